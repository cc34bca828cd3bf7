#!/usr/bin/env bash
# A throwaway one-node Ceph cluster with radosgw (S3) on 127.0.0.1, for the tests and
# benchmarks of S3 remotes. Every file lives under DIR; every socket is on loopback.
#   scripts/s3-ceph.sh start DIR   starts mon, osd (memstore) and radosgw; writes DIR/s3.env
#                                  (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION,
#                                  S3_ENDPOINT, AWS_ENDPOINT_URL, and for HTTPS on a second
#                                  port with a certificate made for 127.0.0.1, S3_ENDPOINT_TLS
#                                  and S3_CA_BUNDLE) and prints the endpoint
#   scripts/s3-ceph.sh stop DIR    stops them (radosgw, then the osd, then the mon)
# Daemons are found by their pid, checked against a command line naming DIR/ceph.conf, or
# by that command line alone when the pid files are gone: never by name.
# Needs Debian's ceph-mon, ceph-osd, radosgw and ceph-common (scripts/deps.sh test).
set -euo pipefail
# The daemons must not keep a descriptor the caller waits on (a pipe, or the
# socket by which a program learns that this script ended): only 0-2 stay.
for fd in $(ls /proc/$$/fd); do
  if [ "$fd" -gt 2 ]; then eval "exec $fd>&-" 2>/dev/null || true; fi
done

usage() { echo "usage: $0 start|stop DIR" >&2; exit 64; }
[ $# -eq 2 ] || usage
command=$1
dir=$(realpath -m "$2")
conf=$dir/ceph.conf
python=/usr/bin/python3
[ -x "$python" ] || python=python3

# The pids of the daemons whose command line names exactly this cluster's ceph.conf.
cluster_pids() {
  local p
  for p in /proc/[0-9]*; do
    [ -r "$p/cmdline" ] || continue
    case "$(cat "$p/comm" 2>/dev/null)" in ceph-mon | ceph-osd | radosgw) ;; *) continue ;; esac
    if tr '\0' '\n' <"$p/cmdline" 2>/dev/null | grep -Fxq "$conf"; then echo "${p#/proc/}"; fi
  done
}

# Whether pid $1 is still a daemon of this cluster (and not a zombie).
is_ours() {
  [ -r "/proc/$1/cmdline" ] || return 1
  [ "$(awk '/^State:/ {print $2}' "/proc/$1/status" 2>/dev/null)" != Z ] || return 1
  tr '\0' '\n' <"/proc/$1/cmdline" 2>/dev/null | grep -Fxq "$conf"
}

# stop_daemon NAME TIMEOUT: SIGTERM, then SIGKILL after TIMEOUT seconds.
stop_daemon() {
  local name=$1 timeout=$2 pid="" waited=0
  [ -f "$dir/run/$name.spid" ] && pid=$(cat "$dir/run/$name.spid")
  local pids=()
  if [ -n "$pid" ] && is_ours "$pid"; then pids+=("$pid"); fi
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do
    waited=0
    while is_ours "$pid" && [ $waited -lt $((timeout * 10)) ]; do
      sleep 0.1
      waited=$((waited + 1))
    done
    is_ours "$pid" && kill -KILL "$pid" 2>/dev/null || true
  done
  rm -f "$dir/run/$name.spid"
}

stop_cluster() {
  [ -f "$dir/.s3-ceph" ] || return 0
  stop_daemon rgw 20
  stop_daemon osd 30
  stop_daemon mon 20
  # Daemons whose pid files were lost: found by their command line alone.
  local pid
  for pid in $(cluster_pids); do kill -TERM "$pid" 2>/dev/null || true; done
  sleep 0.2
  for pid in $(cluster_pids); do
    local waited=0
    while is_ours "$pid" && [ $waited -lt 200 ]; do sleep 0.1; waited=$((waited + 1)); done
    is_ours "$pid" && kill -KILL "$pid" 2>/dev/null || true
  done
  return 0
}

free_port() {
  "$python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

random_hex() { head -c "$1" /dev/urandom | od -An -tx1 | tr -d ' \n'; }

# daemon NAME COMMAND...: runs COMMAND in the foreground of a new session, in the
# background of this script; its pid goes to run/NAME.spid.
daemon() {
  local name=$1
  shift
  setsid "$@" </dev/null >>"$dir/log/$name.out" 2>&1 &
  echo $! >"$dir/run/$name.spid"
}

fail() {
  echo "s3-ceph: $*" >&2
  stop_cluster
  exit 1
}

start_cluster() {
  for tool in ceph-mon ceph-osd radosgw radosgw-admin ceph ceph-authtool monmaptool; do
    command -v "$tool" >/dev/null || {
      echo "s3-ceph: $tool is not installed (scripts/deps.sh test installs Ceph)" >&2
      exit 69
    }
  done
  if [ -e "$dir" ] && [ -n "$(ls -A "$dir")" ] && [ ! -f "$dir/.s3-ceph" ]; then
    echo "s3-ceph: $dir is not empty and is not a cluster folder of this script" >&2
    exit 73
  fi
  stop_cluster
  rm -rf "$dir"
  mkdir -p "$dir/run" "$dir/log" "$dir/mon.a" "$dir/osd.0" "$dir/rgw.a"
  touch "$dir/.s3-ceph"

  local fsid osd_uuid mon_port access secret
  fsid=$(cat /proc/sys/kernel/random/uuid)
  osd_uuid=$(cat /proc/sys/kernel/random/uuid)
  mon_port=$(free_port)
  access=${S3_ACCESS_KEY:-$(random_hex 10 | tr a-f A-F)}
  secret=${S3_SECRET_KEY:-$(random_hex 20)}

  cat >"$conf" <<EOF
[global]
fsid = $fsid
mon host = [v2:127.0.0.1:$mon_port]
public addr = 127.0.0.1
cluster addr = 127.0.0.1
ms bind msgr1 = false
ms bind ipv6 = false
keyring = $dir/keyring
run dir = $dir/run
admin socket = $dir/run/\$name.asok
log file = $dir/log/\$name.log
pid file = $dir/run/\$name.pid
mon data = $dir/mon.\$id
osd data = $dir/osd.\$id
rgw data = $dir/rgw.\$id
auth cluster required = cephx
auth service required = cephx
auth client required = cephx
objecter tick interval = 0.2
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
mon allow pool delete = true
mon allow pool size one = true
mon warn on pool no redundancy = false
mon max pg per osd = 1000
[mon]
paxos propose interval = 0.01
paxos min wait = 0.001
[osd]
osd objectstore = memstore
memstore device bytes = ${S3_CEPH_MEM_BYTES:-4294967296}
osd op num shards = 2
osd op num threads per shard = 2
[client.rgw.a]
rgw enable lc threads = false
rgw thread pool size = 64
rgw gc obj min wait = 60
EOF

  local keyring=$dir/keyring
  {
    ceph-authtool --create-keyring "$keyring" --gen-key -n mon. --cap mon 'allow *'
    ceph-authtool "$keyring" --gen-key -n client.admin --cap mon 'allow *' --cap osd 'allow *' \
      --cap mgr 'allow *' --cap mds 'allow *'
    ceph-authtool "$keyring" --gen-key -n osd.0 --cap mon 'allow profile osd' \
      --cap osd 'allow *' --cap mgr 'allow profile osd'
    ceph-authtool "$keyring" --gen-key -n client.rgw.a --cap mon 'allow rw' --cap osd 'allow rwx' \
      --cap mgr 'allow rw'
  } >>"$dir/log/setup.out" 2>&1 || fail "ceph-authtool failed (see $dir/log/setup.out)"

  # The OSD's mkfs needs no monitor (the fsid is in ceph.conf): it runs meanwhile.
  ceph-osd -c "$conf" -i 0 --mkfs --osd-uuid "$osd_uuid" --no-mon-config \
    >>"$dir/log/osd-mkfs.out" 2>&1 &
  local mkfs=$!

  monmaptool --create --fsid "$fsid" --addv a "[v2:127.0.0.1:$mon_port]" "$dir/monmap" \
    >>"$dir/log/setup.out" 2>&1 || fail "monmaptool failed (see $dir/log/setup.out)"
  ceph-mon -c "$conf" --mkfs -i a --monmap "$dir/monmap" --keyring "$keyring" \
    >>"$dir/log/setup.out" 2>&1 || fail "ceph-mon --mkfs failed (see $dir/log/setup.out)"
  daemon mon ceph-mon -c "$conf" -f -i a

  timeout 60 ceph -c "$conf" osd new "$osd_uuid" 0 >>"$dir/log/setup.out" 2>&1 ||
    fail "ceph osd new failed: the monitor did not answer (see $dir/log/)"
  wait "$mkfs" || fail "ceph-osd --mkfs failed (see $dir/log/osd-mkfs.out)"
  daemon osd ceph-osd -c "$conf" -f -i 0

  timeout 120 radosgw-admin -c "$conf" user create --uid=test --display-name=test \
    --access-key="$access" --secret-key="$secret" >>"$dir/log/setup.out" 2>&1 ||
    fail "radosgw-admin user create failed (see $dir/log/setup.out)"

  # HTTPS beside HTTP, with a throwaway certificate for 127.0.0.1 that only
  # this cluster's clients trust (given S3_CA_BUNDLE).
  mkdir -p "$dir/tls"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 365 \
    -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 \
    -keyout "$dir/tls/key.pem" -out "$dir/tls/cert.pem" >>"$dir/log/setup.out" 2>&1 ||
    fail "openssl could not make a certificate (see $dir/log/setup.out)"

  local try port="" tls_port="" up=""
  for try in 1 2 3; do
    port=${S3_CEPH_RGW_PORT:-$(free_port)}
    tls_port=${S3_CEPH_RGW_TLS_PORT:-$(free_port)}
    daemon rgw radosgw -c "$conf" -f -n client.rgw.a \
      --rgw-frontends "beast endpoint=127.0.0.1:$port ssl_endpoint=127.0.0.1:$tls_port ssl_certificate=$dir/tls/cert.pem ssl_private_key=$dir/tls/key.pem tcp_nodelay=1"
    local waited=0
    while [ $waited -lt 300 ]; do
      if curl -s -o /dev/null --max-time 1 "http://127.0.0.1:$port/" &&
        curl -s -o /dev/null --max-time 1 --cacert "$dir/tls/cert.pem" "https://127.0.0.1:$tls_port/"; then
        up=1
        break
      fi
      is_ours "$(cat "$dir/run/rgw.spid")" || break
      sleep 0.1
      waited=$((waited + 1))
    done
    [ -n "$up" ] && break
    stop_daemon rgw 20
    [ -n "${S3_CEPH_RGW_PORT:-}${S3_CEPH_RGW_TLS_PORT:-}" ] && break
  done
  [ -n "$up" ] ||
    fail "radosgw did not answer on 127.0.0.1:$port (HTTP) and 127.0.0.1:$tls_port (HTTPS) (see $dir/log/)"

  cat >"$dir/s3.env" <<EOF
AWS_ACCESS_KEY_ID=$access
AWS_SECRET_ACCESS_KEY=$secret
AWS_REGION=us-east-1
S3_ENDPOINT=http://127.0.0.1:$port
AWS_ENDPOINT_URL=http://127.0.0.1:$port
S3_ENDPOINT_TLS=https://127.0.0.1:$tls_port
S3_CA_BUNDLE=$dir/tls/cert.pem
EOF
  chmod 600 "$dir/s3.env"
  echo "http://127.0.0.1:$port"
}

case "$command" in
  start) start_cluster ;;
  stop) stop_cluster ;;
  *) usage ;;
esac
