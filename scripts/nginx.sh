#!/usr/bin/env bash
# A throwaway nginx (Debian nginx-light) serving a folder on 127.0.0.1 at a
# free port, for the tests, the benchmarks and the demo; never a system service.
#   scripts/nginx.sh start ROOT STATE   serve ROOT; prints the port. STATE gets
#                                       nginx.conf, nginx.pid, access.log, error.log
#   scripts/nginx.sh start --webdav ROOT STATE   serve ROOT read-write (WebDAV)
#   scripts/nginx.sh start [--webdav] --port N ROOT STATE   on port N (a restart)
#   scripts/nginx.sh start --proxy-cache UPSTREAM ROOT STATE   a pull-through
#                                       cache of UPSTREAM (proxy_cache), its
#                                       copies in ROOT: the benchmarks' peer of
#                                       a trove serve mirror
#   scripts/nginx.sh stop STATE         stop it
# Beside ROOT's files as they are, it serves:
#   /fresh/NAME      with Cache-Control: max-age=3600
#   /immutable/NAME  with Cache-Control: max-age=31536000, immutable
#   /moved/NAME      a 302 redirect to /NAME
#   /pep691/NAME     with Content-Type: application/vnd.pypi.simple.v1+json (a
#                    PEP 691 package index page)
# The access log has one line per request: method, URI, status, body bytes
# sent, then the Range, If-Range, If-None-Match and If-Modified-Since headers.
# With --webdav (for the remote tests; nginx-light's dav module) GET and HEAD
# read ROOT; PUT (atomic: nginx writes a temp file, then renames), DELETE,
# MKCOL, COPY and MOVE write it (dav_methods; PROPFIND, which
# libnginx-mod-http-dav-ext adds, is not needed). Folders are made as a PUT or
# MOVE needs them (create_full_put_path); bodies have no size limit; and
# /slow/PATH serves ROOT/PATH at 1 MB/s (limit_rate), for a transfer a test
# interrupts. Its access log lines are: method, URI, status, body bytes sent,
# request length.
set -euo pipefail
nginx=$(command -v nginx || echo /usr/sbin/nginx)

case "${1:-}" in
start)
  # nginx daemonizes and would keep every descriptor it inherits: close all
  # but stdin, stdout and stderr (a parent waiting for our end, such as
  # Foundation's Process, would otherwise wait for nginx's).
  for fd in /proc/$$/fd/*; do
    n=${fd##*/}
    [ "$n" -gt 2 ] 2>/dev/null && eval "exec $n>&-" 2>/dev/null || true
  done
  shift
  webdav=false
  fixed=""
  upstream=""
  while [ $# -gt 0 ]; do
    case "$1" in
    --webdav) webdav=true; shift ;;
    --proxy-cache)
      case "${2:-}" in
      http://*) upstream=$2 ;;
      *) echo "nginx.sh: --proxy-cache takes an http:// URL, not '${2:-}'" >&2; exit 64 ;;
      esac
      shift 2
      ;;
    --port)
      case "${2:-}" in
      '' | *[!0-9]*) echo "nginx.sh: --port takes a port number, not '${2:-}'" >&2; exit 64 ;;
      esac
      fixed=$2
      shift 2
      ;;
    *) break ;;
    esac
  done
  [ $# -eq 2 ] || { echo "usage: scripts/nginx.sh start [--webdav | --proxy-cache UPSTREAM] [--port N] ROOT STATE" >&2; exit 64; }
  set -- start "$@"
  root=$(cd "$2" && pwd)
  mkdir -p "$3"
  state=$(cd "$3" && pwd)
  cache=""
  if [ -n "$upstream" ]; then
    # As a caching proxy is set up: the copy is written while the response
    # goes out, straight into the cache folder.
    format='$request_method $request_uri $status $body_bytes_sent $upstream_cache_status'
    cache="proxy_cache_path $root levels=1:2 keys_zone=trove:16m max_size=64g use_temp_path=off;"
    locations="location / { proxy_pass $upstream; proxy_cache trove; proxy_cache_valid 200 1h; }"
  elif $webdav; then
    format='$request_method $request_uri $status $body_bytes_sent $request_length'
    locations="dav_methods PUT DELETE MKCOL COPY MOVE;
    dav_access user:rw group:r all:r;
    create_full_put_path on;
    client_max_body_size 0;
    location /slow/ { alias $root/; limit_rate 1m; }"
  else
    format='$request_method $request_uri $status $body_bytes_sent "$http_range" "$http_if_range" "$http_if_none_match" "$http_if_modified_since"'
    locations="location /fresh/ { alias $root/; add_header Cache-Control \"max-age=3600\"; }
    location /immutable/ { alias $root/; add_header Cache-Control \"max-age=31536000, immutable\"; }
    location /moved/ { rewrite ^/moved/(.*)\$ /\$1 redirect; }
    location /pep691/ { alias $root/; types { } default_type application/vnd.pypi.simple.v1+json; }"
  fi
  user=""
  [ "$(id -u)" -eq 0 ] && user="user root root;"
  for _ in 1 2 3 4 5; do
    port=${fixed:-$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}
    cat >"$state/nginx.conf" <<CONF
$user
worker_processes 1;
pid $state/nginx.pid;
error_log $state/error.log warn;
events { worker_connections 512; }
http {
  default_type application/octet-stream;
  sendfile on;
  keepalive_requests 100000;
  log_format trove '$format';
  access_log $state/access.log trove;
  client_body_temp_path $state/client-body;
  proxy_temp_path $state/proxy;
  fastcgi_temp_path $state/fastcgi;
  uwsgi_temp_path $state/uwsgi;
  scgi_temp_path $state/scgi;
  $cache
  server {
    listen 127.0.0.1:$port;
    root $root;
    $locations
  }
}
CONF
    rm -f "$state/nginx.pid"
    # The daemon keeps no descriptor of ours: a caller reading our output
    # sees its end when this script exits.
    if "$nginx" -c "$state/nginx.conf" -e "$state/error.log" </dev/null >/dev/null 2>>"$state/error.log"; then
      for _ in $(seq 50); do
        [ -s "$state/nginx.pid" ] && { echo "$port"; exit 0; }
        sleep 0.1
      done
    fi
  done
  echo "nginx.sh: cannot start nginx; see $state/error.log" >&2
  exit 1
  ;;
stop)
  state=$2
  [ -s "$state/nginx.pid" ] || exit 0
  pid=$(cat "$state/nginx.pid")
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || exit 0; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null || true
  ;;
*)
  echo "usage: scripts/nginx.sh start [--webdav | --proxy-cache UPSTREAM] [--port N] ROOT STATE | stop STATE" >&2
  exit 64
  ;;
esac
