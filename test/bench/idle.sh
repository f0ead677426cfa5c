#!/bin/bash
#
# What idle workers cost: 50 databases with the extension and no traffic,
# a worker publishing from each (outbox.max_workers = 50).  Once every one
# is idle, the CPU time the workers and the launcher use over 30 s, read
# from /proc, as a share of one core: first while the workers still hold
# their Kafka producers, then once they have closed them (a minute without
# events).  Target: under 1%.
#
# Usage: test/bench/idle.sh	(about 3 minutes)

set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/test/common.sh"
become_postgres "$ROOT" test/bench/idle.sh "$@"
WORK=$OUTBOX_WORK
DATABASES=50
MEASURE_S=30
PORT=54343
export PGHOST="$WORK" PGPORT=$PORT

log() { echo "[$(date +%T)] $*" >&2; }
sql() { psql -X -q -At -v ON_ERROR_STOP=1 -d postgres -c "$1"; }

start_mock_broker "$ROOT" "$WORK"
init_outbox_server "$WORK/data" $PORT '*'
cat >> "$WORK/data/postgresql.conf" <<CONF
outbox.max_workers = $DATABASES
max_worker_processes = $((DATABASES + 10))
CONF
pg_ctl -D "$WORK/data" -l "$WORK/server.log" -w start >/dev/null
trap 'pg_ctl -D "$WORK/data" -m immediate -w stop >/dev/null 2>&1; kill $BROKER_PID 2>/dev/null' EXIT

log "creating $DATABASES databases with the extension"
for i in $(seq 1 $DATABASES); do
	createdb "db$i"
	psql -X -q -v ON_ERROR_STOP=1 -d "db$i" -c 'CREATE EXTENSION outbox'
done
until [ "$(psql -X -At -d db1 -c "SELECT count(*) FROM outbox_worker_status() WHERE state = 'idle' AND brokers_up > 0")" = $DATABASES ]; do
	sleep 0.5
done
sleep 5

# cpu_ticks: user + system clock ticks of the launcher and every worker
cpu_ticks() {
	local total=0 pid
	for pid in $(sql "SELECT pid FROM pg_stat_activity WHERE backend_type IN ('outbox worker', 'outbox launcher')"); do
		total=$((total + $(awk '{ print $14 + $15 }' "/proc/$pid/stat")))
	done
	echo $total
}

# measure WHAT: the share of one core used over MEASURE_S seconds
measure() {
	local before after hz
	log "measuring ${MEASURE_S}s: $1"
	before=$(cpu_ticks)
	sleep $MEASURE_S
	after=$(cpu_ticks)
	hz=$(getconf CLK_TCK)
	echo "idle, $DATABASES workers and the launcher, $1: $(awk -v t=$((after - before)) -v hz="$hz" -v s=$MEASURE_S \
		'BEGIN { printf "%.2f", 100 * t / hz / s }')% of one core (target < 1%)"
}

measure "producers open"
sleep 30
measure "producers closed"
