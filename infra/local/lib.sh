# Shared by infra/local/up, down and status. Sourced, not run.
# Everything lives under $CONCORD_LOCAL (default: <repo>/.local), which git ignores.

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
LOCAL=${CONCORD_LOCAL:-$ROOT/.local}
PG_PORT=${CONCORD_PG_PORT:-55432}
KAFKA_PORT=${CONCORD_KAFKA_PORT:-19092}
KAFKA_CONTROLLER_PORT=${CONCORD_KAFKA_CONTROLLER_PORT:-19093}
# The read-only plaintext listener for local tools (kcat, a browser of
# topics); everything that writes uses the authenticated one on KAFKA_PORT.
KAFKA_PLAINTEXT_PORT=${CONCORD_KAFKA_PLAINTEXT_PORT:-19094}
KAFKA_HEAP=${CONCORD_KAFKA_HEAP:--Xms512m -Xmx1g}
# The JVM flags kafka-run-class.sh gives the broker (its
# KAFKA_JVM_PERFORMANCE_OPTS): G1 aiming at 20 ms pauses. G1's own goal is
# 200 ms; under relay-bench's 2,000 events/s its young collections, which
# stall every produce acknowledgement, averaged 35 ms with it (jstat) and
# 19 ms with these.
KAFKA_JVM_OPTS="-server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent -XX:MaxInlineLevel=15 -Djava.awt.headless=true"
# The server runs as the postgres user, which must reach its data dir. When
# the checkout sits somewhere that user cannot enter (a root-only temp dir),
# the cluster lives under /var/lib/concord-local/<hash of the checkout> instead.
PG_BASE=$LOCAL/postgres
if [ "$(id -u)" = 0 ] && id postgres >/dev/null 2>&1; then
  mkdir -p "$LOCAL"
  if ! runuser -u postgres -- test -x "$LOCAL" 2>/dev/null; then
    PG_BASE=/var/lib/concord-local/$(printf '%s' "$LOCAL" | sha1sum | cut -c1-12)/postgres
  fi
fi
PG_DATA=$PG_BASE/data
PG_LOG=$PG_BASE/postgres.log
KAFKA_DIR=$LOCAL/kafka
KAFKA_DATA=$KAFKA_DIR/data
KAFKA_LOGS=$KAFKA_DIR/logs
KAFKA_PID=$KAFKA_DIR/kafka.pid
KAFKA_LIBS=$LOCAL/cache/kafka-libs
# The stack's CA, the broker's certificate and the principals' passwords
# (mode 0600), made on the first start; admin.properties is the admin's
# client configuration for Apache's tools (--command-config).
KAFKA_TLS=$KAFKA_DIR/tls
KAFKA_SECRETS=$KAFKA_DIR/secrets.env
KAFKA_ADMIN_PROPERTIES=$KAFKA_TLS/admin.properties
KAFKA_ADMIN_USER=concord-admin
ENV_FILE=$LOCAL/stack.env
DATABASES="orders inventory payments console"

say() { printf '%s\n' "$*" >&2; }
die() { printf 'infra/local: %s\n' "$*" >&2; exit 1; }

# pg_bin prints the directory of the newest installed PostgreSQL server.
pg_bin() {
  local d
  d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
  [ -n "$d" ] && [ -x "$d/postgres" ] && echo "$d"
}

# as_pg runs a PostgreSQL server command as the postgres user: the server
# refuses to run as root.
as_pg() {
  if [ "$(id -u)" = 0 ]; then
    (cd / && runuser -u postgres -- "$@")
  else
    "$@"
  fi
}

pg_running() {
  local bin; bin=$(pg_bin) || return 1
  [ -f "$PG_DATA/postmaster.pid" ] && as_pg "$bin/pg_ctl" -D "$PG_DATA" status >/dev/null 2>&1
}

kafka_running() {
  [ -f "$KAFKA_PID" ] && kill -0 "$(cat "$KAFKA_PID")" 2>/dev/null
}

# port_owner prints who listens on a TCP port, or nothing when it is free.
port_owner() {
  local port=$1 line
  if command -v ss >/dev/null 2>&1; then
    line=$(ss -Hltnp "sport = :$port" 2>/dev/null | head -n 1)
    [ -n "$line" ] || return 0
    echo "$line" | sed -n 's/.*users:((\(.*\))).*/\1/p' | grep . || echo "another process"
  elif (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    echo "another process"
  fi
}

port_free() { [ -z "$(port_owner "$1")" ]; }

pg_url() { echo "postgres://postgres@127.0.0.1:$PG_PORT/$1?sslmode=disable"; }
