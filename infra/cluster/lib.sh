# Shared by infra/cluster/up and infra/cluster/ctl (sourced, not run). Everything about one
# running cluster lives in its state directory $D:
#   state         shell variables: ports, URLs, node names, binaries (sourced by ctl)
#   state.json    the same for programs (tests, `loadtest rush`): urls, ports, admin_token, nodes
#   pids/NAME.pid the process id of each node (lb, cdn: the nginx master; postgres: the postmaster)
#   run/NAME      the command that starts NAME in the foreground (what a systemd unit would run)
#   conf/         each node's configuration file (secrets: mode 600)
#   logs/NAME.log each node's output
#   down/NAME     NAME is out of its load balancer (ctl restart)
#   lb/           the balancers' nginx prefix: nginx.conf, conf.d/lb.conf, upstreams/, error.log
#   cdn/          the CDN's nginx prefix (infra/cdn-start): nginx.conf, conf.d/cdn.conf, cache
# shellcheck shell=bash

CLUSTER_LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
INFRA_DIR=$(dirname "$CLUSTER_LIB_DIR")
# shellcheck disable=SC2034 # used by the scripts that source this file
REPO_DIR=$(dirname "$INFRA_DIR")

log() { printf '[cluster] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# pid_of NAME: the recorded process id, or nothing.
pid_of() { cat "$D/pids/$1.pid" 2>/dev/null || true; }

# alive PID: the process exists and is not a zombie.
alive() {
  local pid=$1 state
  [ -n "$pid" ] && [ -r "/proc/$pid/stat" ] || return 1
  state=$(sed -e 's/^.*) //' "/proc/$pid/stat" 2>/dev/null | cut -c1) || return 1
  [ -n "$state" ] && [ "$state" != Z ]
}

# wait_gone PID SECONDS: 0 once the process is gone, 1 if it is still there at the deadline.
wait_gone() {
  local pid=$1 deadline=$((SECONDS + $2))
  while alive "$pid"; do
    [ "$SECONDS" -lt "$deadline" ] || return 1
    sleep 0.05
  done
}

# wait_until SECONDS WHAT COMMAND...: runs COMMAND until it succeeds; dies at the deadline.
wait_until() {
  local limit=$1 what=$2 deadline
  shift 2
  deadline=$((SECONDS + limit))
  until "$@" >/dev/null 2>&1; do
    [ "$SECONDS" -lt "$deadline" ] || die "$what: not ready within ${limit}s"
    sleep 0.1
  done
}

# http_ok URL: the URL answers 2xx.
http_ok() { curl -fsS -o /dev/null --max-time 2 "$1"; }

# Listening TCP ports on this machine, from /proc (no ss/netstat needed).
listening_ports() {
  local hex
  cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | awk '$4 == "0A" { n = split($2, a, ":"); print a[n] }' |
    sort -u | while read -r hex; do echo $((16#$hex)); done
}

# pick_ports N: N distinct ports that nothing listens on, from 20000-32000 (below the kernel's
# ephemeral range, so the free ports tests bind to port 0 for never collide with them).
pick_ports() {
  local n=$1 used p out=()
  used=" $(listening_ports | tr '\n' ' ') "
  while [ "${#out[@]}" -lt "$n" ]; do
    p=$((20000 + RANDOM % 12000))
    case "$used" in *" $p "*) continue ;; esac
    used+="$p "
    out+=("$p")
  done
  echo "${out[@]}"
}

# start_node NAME: starts run/NAME in its own session (Ctrl-C in the terminal reaches only `up`,
# which stops the nodes in order), output appended to logs/NAME.log, pid in pids/NAME.pid.
start_node() {
  local name=$1
  setsid "$D/run/$name" >>"$D/logs/$name.log" 2>&1 </dev/null &
  echo $! >"$D/pids/$name.pid"
}

# stop_node NAME [SECONDS]: SIGTERM (the services drain), SIGKILL after SECONDS (default 30).
stop_node() {
  local name=$1 limit=${2:-30} pid
  pid=$(pid_of "$name")
  alive "$pid" || return 0
  kill -TERM "$pid" 2>/dev/null || true
  if ! wait_gone "$pid" "$limit"; then
    log "$name (pid $pid) still running ${limit}s after SIGTERM: SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    wait_gone "$pid" 5 || true
  fi
}

# port_of NAME: the node's port from the state file.
port_of() {
  local var="PORT_${1^^}"
  echo "${!var:?no port for $1}"
}

# render_upstreams: writes lb/upstreams/{waiting_room,booking_core}.conf from the node list
# and the down/ markers.
render_upstreams() {
  local svc names name port down
  mkdir -p "$D/lb/upstreams"
  for svc in waiting_room booking_core; do
    if [ "$svc" = waiting_room ]; then names=$WR_NODES; else names=$BC_NODES; fi
    {
      echo "# Written by infra/cluster (lib.sh render_upstreams); \`ctl restart\` marks a node down."
      for name in $names; do
        port=$(port_of "$name")
        down=
        [ -e "$D/down/$name" ] && down=" down"
        echo "server 127.0.0.1:$port max_fails=2 fail_timeout=3s$down; # $name"
      done
    } >"$D/lb/upstreams/$svc.conf.new"
    mv "$D/lb/upstreams/$svc.conf.new" "$D/lb/upstreams/$svc.conf"
  done
}

nginx_bin() { echo "${NGINX:-$(command -v nginx || echo /usr/sbin/nginx)}"; }

# nginx_reload: checks the balancers' configuration, sends SIGHUP to their nginx master and
# waits until every process of the previous generation has exited: the old workers finish the
# requests they carry and then exit, so once this returns nothing is in flight through the old
# configuration (and no old worker holds a keep-alive connection to a node marked down).
nginx_reload() {
  local master old pid
  master=$(pid_of lb)
  alive "$master" || die "the balancers' nginx is not running"
  "$(nginx_bin)" -t -q -p "$D/lb" -c "$D/lb/nginx.conf" 2>>"$D/logs/lb.log" ||
    die "nginx configuration test failed (see $D/logs/lb.log)"
  old=$(pgrep -P "$master" | tr '\n' ' ')
  kill -HUP "$master"
  for pid in $old; do
    wait_gone "$pid" 30 || log "nginx process $pid of the old generation still running after 30s"
  done
}

# pg NAME ARGS...: a PostgreSQL program, as the postgres user when we are root (PostgreSQL
# refuses to run as root).
pg() {
  local prog=$1
  shift
  if [ "$(id -u)" = 0 ]; then
    runuser -u postgres -- "$PG_BIN/$prog" "$@"
  else
    "$PG_BIN/$prog" "$@"
  fi
}

pg_ready() { "$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$PORT_POSTGRES" -U postgres; }

# postgres_start / postgres_stop: through pg_ctl (the postmaster daemonises; its pid is the
# first line of postmaster.pid).
postgres_start() {
  pg pg_ctl start -w -t 60 -D "$D/pg/data" -l "$D/pg/log" \
    -o "-p $PORT_POSTGRES -k $D/pg -c listen_addresses=127.0.0.1 -c max_connections=300 -c fsync=off -c synchronous_commit=off -c full_page_writes=off" \
    >/dev/null
  head -1 "$D/pg/data/postmaster.pid" >"$D/pids/postgres.pid"
}
postgres_stop() {
  [ -e "$D/pg/data/postmaster.pid" ] || return 0
  pg pg_ctl stop -w -t 30 -m fast -D "$D/pg/data" >/dev/null 2>&1 ||
    pg pg_ctl stop -w -m immediate -D "$D/pg/data" >/dev/null 2>&1 || true
}

redis_cli() { redis-cli -h 127.0.0.1 -p "$1" "${@:2}"; }

# redis_role PORT: master, slave or nothing (down).
redis_role() { redis_cli "$1" role 2>/dev/null | head -1; }

# replica_in_sync PORT: the Redis on PORT is a replica whose link to its master is up (the
# initial full sync done). Until then its master's writes cannot be confirmed by `WAIT`, and a
# queue with `store_min_replicas` >= 1 answers 503 for them.
replica_in_sync() { redis_cli "$1" info replication 2>/dev/null | tr -d '\r' | grep -q '^master_link_status:up'; }

# replicas_in_sync N PORT...: at least N of the PORTs are replicas in sync with their master.
replicas_in_sync() {
  local want=$1 port n=0
  shift
  for port in "$@"; do
    if [ "$(redis_role "$port")" = slave ] && replica_in_sync "$port"; then n=$((n + 1)); fi
  done
  [ "$n" -ge "$want" ]
}

# wait_service NAME SECONDS: the node's /healthz answers.
wait_service() {
  wait_until "$2" "$1" http_ok "http://127.0.0.1:$(port_of "$1")/healthz"
}

# stop_nginx NAME: SIGQUIT (graceful: requests in flight finish), SIGTERM after 20 s.
stop_nginx() {
  local pid
  pid=$(pid_of "$1")
  alive "$pid" || return 0
  kill -QUIT "$pid" 2>/dev/null || true
  wait_gone "$pid" 20 || stop_node "$1" 5
}

# stop_all: the order of a clean stop: the edge first (the CDN, then the balancers, each
# finishing what it carries), then the booking core and the waiting room (they drain on SIGTERM),
# the gateway, then the stores.
stop_all() {
  local name pids=()
  stop_nginx cdn
  stop_nginx lb
  for name in $BC_NODES $WR_NODES gateway; do
    stop_node "$name" 25 &
    pids+=($!)
  done
  for name in "${pids[@]}"; do wait "$name" || true; done
  pids=()
  for name in $REDIS_NODES $QUEUE_REDIS; do
    stop_node "$name" 10 &
    pids+=($!)
  done
  for name in "${pids[@]}"; do wait "$name" || true; done
  postgres_stop
}
