#!/usr/bin/env bash
# A throwaway WebDAV server (Debian nginx-light's dav module) on 127.0.0.1 at
# a free port, for the remote tests; never a system service.
#   scripts/nginx-dav.sh start ROOT STATE   serve ROOT read-write; prints the port.
#                                           STATE gets nginx.conf, nginx.pid,
#                                           access.log, error.log
#   scripts/nginx-dav.sh stop STATE         stop it
# GET and HEAD read ROOT; PUT (atomic: nginx writes a temp file, then renames),
# DELETE, MKCOL, COPY and MOVE write it (dav_methods; PROPFIND, which
# libnginx-mod-http-dav-ext adds, is not needed). Folders are made as a PUT
# or MOVE needs them (create_full_put_path); bodies have no size limit.
# The access log has one line per request: method, URI, status, body bytes
# sent, request length.
set -euo pipefail
nginx=$(command -v nginx || echo /usr/sbin/nginx)

case "${1:-}" in
start)
  # nginx daemonizes and would keep every descriptor it inherits: close all
  # but stdin, stdout and stderr.
  for fd in /proc/$$/fd/*; do
    n=${fd##*/}
    [ "$n" -gt 2 ] 2>/dev/null && eval "exec $n>&-" 2>/dev/null || true
  done
  root=$(cd "$2" && pwd)
  mkdir -p "$3"
  state=$(cd "$3" && pwd)
  user=""
  [ "$(id -u)" -eq 0 ] && user="user root root;"
  for _ in 1 2 3 4 5; do
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
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
  log_format trove '\$request_method \$request_uri \$status \$body_bytes_sent \$request_length';
  access_log $state/access.log trove;
  client_body_temp_path $state/client-body;
  proxy_temp_path $state/proxy;
  fastcgi_temp_path $state/fastcgi;
  uwsgi_temp_path $state/uwsgi;
  scgi_temp_path $state/scgi;
  server {
    listen 127.0.0.1:$port;
    root $root;
    dav_methods PUT DELETE MKCOL COPY MOVE;
    dav_access user:rw group:r all:r;
    create_full_put_path on;
    client_max_body_size 0;
  }
}
CONF
    if "$nginx" -c "$state/nginx.conf" -e "$state/error.log" </dev/null >/dev/null 2>>"$state/error.log"; then
      for _ in $(seq 50); do
        [ -s "$state/nginx.pid" ] && { echo "$port"; exit 0; }
        sleep 0.1
      done
    fi
  done
  echo "nginx-dav.sh: cannot start nginx; see $state/error.log" >&2
  exit 1
  ;;
stop)
  exec "$(dirname "$0")/nginx.sh" stop "$2"
  ;;
*)
  echo "usage: scripts/nginx-dav.sh start ROOT STATE | stop STATE" >&2
  exit 64
  ;;
esac
