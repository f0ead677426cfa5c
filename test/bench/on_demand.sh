#!/bin/bash
#
# Workers on demand, under PostgreSQL's default max_worker_processes (8):
#
# 1. 12 databases with the extension, one event committed in each at once:
#    the seconds until the last is published (target: within 15 s);
# 2. 50 databases with the extension and no traffic, once every one has
#    been served and the workers that run have closed their producers (a
#    minute without events): the CPU time the workers and the launcher use
#    over 30 s,
#    read from /proc, as a share of one core (target: under 0.5%).
#
# Usage: test/bench/on_demand.sh	(about 4 minutes)

PORT=54344
. "$(dirname "$0")/common.sh" "$@"
MEASURE_S=30

start_broker
start_server "$WORK/data" '*'
log "max_worker_processes = $(sql 'SHOW max_worker_processes' postgres), outbox.worker_idle_timeout = $(sql 'SHOW outbox.worker_idle_timeout' postgres)"

# make_databases FROM TO: databases dbFROM..dbTO with the extension
make_databases() {
	for i in $(seq "$1" "$2"); do
		createdb "db$i"
		sql 'CREATE EXTENSION outbox' "db$i" 2>/dev/null
	done
}

# --- 1. 12 databases, one event each
make_databases 1 12
start=$(date +%s.%N)
for i in $(seq 1 12); do
	sql "SELECT outbox_enqueue('ondemand.t', 'db$i'::text)" "db$i" >/dev/null
done
published=0
until [ "$published" = 12 ]; do
	published=0
	for i in $(seq 1 12); do
		published=$((published + $(sql "SELECT count(*) FROM outbox_messages WHERE status = 'published'" "db$i")))
	done
	sleep 0.2
done
echo "12 databases, one event each: all published in $(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }') s (target 15 s)"

# --- 2. 50 idle databases
make_databases 13 50
log "waiting until every database has been served"
until [ "$(sql "SELECT count(*) FROM outbox_worker_status() WHERE state IN ('idle', 'parked')" db1)" = 50 ]; do
	sleep 1
done
log "waiting until the workers that run have closed their producers (a minute without events)"
until [ "$(sql "SELECT count(*) FROM outbox_worker_status() WHERE pid IS NOT NULL AND brokers_up IS NOT NULL" db1)" = 0 ]; do
	sleep 1
done
sleep 5

log "measuring ${MEASURE_S}s"
share=$(workers_core_share $MEASURE_S)
echo "50 idle databases ($(sql "SELECT count(*) FROM outbox_worker_status() WHERE state = 'parked'" db1) parked, $(sql "SELECT count(*) FROM outbox_worker_status() WHERE pid IS NOT NULL" db1) with a worker): $share% of one core (target < 0.5%)"
