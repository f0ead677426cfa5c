#!/bin/bash
#
# What outbox.standby_slots costs when the standby keeps up: a primary and
# a streaming standby (physical slot standby1) on this machine, 500 events/s
# for 20 s, each its own transaction; the publish latency
# (published_at - created_at) with the setting against the same run
# without it.  Target: p50 within 2 ms.
#
# Usage: test/bench/standby.sh	(about 2 minutes)

PORT=54341
. "$(dirname "$0")/common.sh" "$@"
RATE=500
SECONDS_RUN=20
STANDBY_PORT=54342

start_broker
start_server "$WORK/primary" bench "shared_buffers = '1GB'"
bench_database bench
sql "SELECT pg_create_physical_replication_slot('standby1')" >/dev/null
pg_basebackup -D "$WORK/standby" -R -S standby1 >/dev/null
echo "port = $STANDBY_PORT" >> "$WORK/standby/postgresql.conf"
at_exit 'pg_ctl -D "$WORK/standby" -m immediate -w stop >/dev/null 2>&1'
pg_ctl -D "$WORK/standby" -l "$WORK/standby.log" -w start >/dev/null
until [ "$(sql "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'")" = 1 ]; do sleep 0.1; done

# run SLOTS: the latency percentiles "p50 p99" of one run with
# outbox.standby_slots = SLOTS
run() {
	sql "ALTER SYSTEM SET outbox.standby_slots = '$1'"
	sql "SELECT pg_reload_conf()" >/dev/null
	sql "TRUNCATE outbox_log, outbox_retries, outbox_ledger"
	sleep 2
	pgbench -n -M prepared -R "$RATE" -T "$SECONDS_RUN" -c 4 -j 2 -f "$BENCH/enqueue.sql" bench >/dev/null 2>&1
	until [ "$(sql "SELECT NOT EXISTS (SELECT FROM outbox_messages WHERE status <> 'published')")" = t ]; do sleep 0.1; done
	sql "SELECT round(percentile_cont(0.5) WITHIN GROUP (ORDER BY l)::numeric, 1) || ' ' || round(percentile_cont(0.99) WITHIN GROUP (ORDER BY l)::numeric, 1)
		   FROM (SELECT 1000 * extract(epoch FROM published_at - created_at) AS l FROM outbox_messages) s"
}

log "$RATE events/s for ${SECONDS_RUN}s, without and with outbox.standby_slots, twice"
for round in 1 2; do
	read -r off50 off99 <<<"$(run '')"
	read -r on50 on99 <<<"$(run standby1)"
	log "  round $round: without p50 $off50 ms p99 $off99 ms; with p50 $on50 ms p99 $on99 ms"
	echo "round $round  latency p50 (ms) with standby_slots vs without: $on50 vs $off50, difference $(awk -v a="$on50" -v b="$off50" 'BEGIN { printf "%.1f", a - b }') (target <= 2)"
	echo "round $round  latency p99 (ms) with standby_slots vs without: $on99 vs $off99"
done
