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

PORT=54343
. "$(dirname "$0")/common.sh" "$@"
DATABASES=50
MEASURE_S=30

start_broker
start_server "$WORK/data" '*' "outbox.max_workers = $DATABASES" "max_worker_processes = $((DATABASES + 10))"

log "creating $DATABASES databases with the extension"
for i in $(seq 1 $DATABASES); do
	createdb "db$i"
	psql -X -q -v ON_ERROR_STOP=1 -d "db$i" -c 'CREATE EXTENSION outbox'
done
until [ "$(psql -X -At -d db1 -c "SELECT count(*) FROM outbox_worker_status() WHERE state = 'idle' AND brokers_up > 0")" = $DATABASES ]; do
	sleep 0.5
done
sleep 5

# measure WHAT: the share of one core used over MEASURE_S seconds
measure() {
	log "measuring ${MEASURE_S}s: $1"
	echo "idle, $DATABASES workers and the launcher, $1: $(workers_core_share $MEASURE_S)% of one core (target < 1%)"
}

measure "producers open"
sleep 30
measure "producers closed"
