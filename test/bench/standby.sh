#!/bin/bash
#
# What outbox.standby_slots costs when the standby keeps up: a primary and
# a streaming standby (physical slot standby1) on this machine, 500 events/s
# for 20 s, each its own transaction; the publish latency
# (published_at - created_at) with the setting against the same run
# without it.  Target: p50 within 2 ms.
#
# Usage: test/bench/standby.sh	(about 2 minutes)

set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/test/common.sh"
become_postgres "$ROOT" test/bench/standby.sh "$@"
WORK=$OUTBOX_WORK
BENCH=$ROOT/test/bench
RATE=500
SECONDS_RUN=20
PORT=54341
STANDBY_PORT=54342
export PGHOST="$WORK" PGPORT=$PORT

log() { echo "[$(date +%T)] $*" >&2; }
sql() { psql -X -q -At -v ON_ERROR_STOP=1 -d bench -c "$1"; }

start_mock_broker "$ROOT" "$WORK"

init_outbox_server "$WORK/primary" $PORT bench
echo "shared_buffers = '1GB'" >> "$WORK/primary/postgresql.conf"
echo "local replication all trust" >> "$WORK/primary/pg_hba.conf"
pg_ctl -D "$WORK/primary" -l "$WORK/primary.log" -w start >/dev/null
trap 'pg_ctl -D "$WORK/standby" -m immediate -w stop >/dev/null 2>&1; pg_ctl -D "$WORK/primary" -m immediate -w stop >/dev/null 2>&1; kill $BROKER_PID 2>/dev/null' EXIT
createdb bench
psql -X -q -v ON_ERROR_STOP=1 -d bench -f "$BENCH/setup.sql"
sql "SELECT pg_create_physical_replication_slot('standby1')" >/dev/null
pg_basebackup -D "$WORK/standby" -R -S standby1 >/dev/null
cat >> "$WORK/standby/postgresql.conf" <<CONF
port = $STANDBY_PORT
CONF
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
