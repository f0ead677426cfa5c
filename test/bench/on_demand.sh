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
#    read from /proc, as a share of one core (target: under 0.5%);
# 3. of those, 8 where a role with only EXECUTE on outbox_enqueue commits
#    an event every 1.5 s (under outbox.worker_idle_timeout: their workers
#    are never idle), and 4 that commit 10 events every 3 s, for 60 s: the
#    longest an event took from its commit to its publication (target:
#    15 s), the databases taking turns on the six workers.
#
# Usage: test/bench/on_demand.sh	(about 6 minutes)

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

# --- 3. a trickle in 8 databases, bursts in 4 more
sql 'CREATE ROLE trickler LOGIN'
for i in $(seq 1 8); do
	sql "GRANT EXECUTE ON FUNCTION outbox_enqueue(text, text, text, jsonb, uuid) TO trickler" "db$i"
done
log "trickling for 60 s"
start=$(date +%s.%N)
for tick in $(seq 1 40); do
	commits=()
	for i in $(seq 1 8); do
		psql -X -q -At -v ON_ERROR_STOP=1 -U trickler -d "db$i" \
			-c "SELECT outbox_enqueue('ondemand.trickle', 'x'::text, key => 'k')" >/dev/null &
		commits+=($!)
	done
	if [ $((tick % 2)) = 0 ]; then
		for i in $(seq 9 12); do
			sql "SELECT outbox_enqueue('ondemand.burst', 'x'::text, key => 'k') FROM generate_series(1, 10)" "db$i" >/dev/null &
			commits+=($!)
		done
	fi
	wait "${commits[@]}"
	sleep "$(awk -v s="$start" -v t="$tick" -v n="$(date +%s.%N)" 'BEGIN { d = s + 1.5 * t - n; print (d > 0 ? d : 0) }')"
done
until [ "$(for i in $(seq 1 12); do sql "SELECT count(*) FROM outbox_messages WHERE status <> 'published'" "db$i"; done | sort -u)" = 0 ]; do
	sleep 0.2
done
slowest=$(for i in $(seq 1 12); do
	sql "SELECT max(extract(epoch FROM published_at - created_at)) FROM outbox_messages WHERE topic IN ('ondemand.trickle', 'ondemand.burst')" "db$i"
done | sort -g | tail -1)
echo "8 databases trickling, 4 in bursts, on six workers: the slowest event published $(printf %.1f "$slowest") s after its commit (target 15 s)"
