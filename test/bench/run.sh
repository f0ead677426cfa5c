#!/bin/bash
#
# The benchmark suite: starts its own server and local broker, runs every
# benchmark with its baseline in the same run, and prints one table:
# benchmark, our figure, baseline figure, ratio, target, pass/miss.
#
# Usage: test/bench/run.sh [--large]
#	default: about 12 minutes on 2 cores; --large: the sizes of the issue
#	(1,000,000 events to drain, 5,000,000 kept rows, 5 minutes of load).
#
# As root it first prepares the machine, then runs as the postgres user.

set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/test/common.sh"
become_postgres "$ROOT" test/bench/run.sh "$@"
WORK=$OUTBOX_WORK
BENCH=$ROOT/test/bench

if [ "${1:-}" = "--large" ]; then
	DRAIN_N=1000000 HISTORY_N=5000000 FLAT_N=200000 SUSTAIN_S=300 PGBENCH_S=20
else
	DRAIN_N=200000 HISTORY_N=1000000 FLAT_N=100000 SUSTAIN_S=90 PGBENCH_S=8
fi
LATENCY_S=30
LATENCY_RATE=500
PORT=54339
export PGHOST="$WORK" PGPORT=$PORT
RESULTS=$WORK/results.txt
: > "$RESULTS"

log() { echo "[$(date +%T)] $*" >&2; }
sql() { psql -X -q -At -v ON_ERROR_STOP=1 -d "$1" -c "$2"; }
now() { date +%s.%N; }
# a table row: name, ours, baseline, ratio, target (">= 0.95", or "-" for
# a row that explains another)
result() {
	local verdict
	verdict=$(awk -v r="$4" -v t="$5" 'BEGIN { split(t, a, " "); print (t == "-") ? "-" : ((a[1] == ">=" && r >= a[2]) || (a[1] == "<=" && r <= a[2])) ? "pass" : "MISS" }')
	printf '%-44s %12s %12s %8s %8s  %s\n' "$1" "$2" "$3" "$4" "$5" "$verdict" | tee -a "$RESULTS" >&2
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b == 0 ? 0 : a / b) }'; }

# --- a broker and a server; the worker publishes from database "bench",
# baselines run in database "baseline" where no worker looks
start_mock_broker "$ROOT" "$WORK"

init_outbox_server "$WORK/data" $PORT bench
cat >> "$WORK/data/postgresql.conf" <<CONF
shared_buffers = '2GB'
max_wal_size = '16GB'
checkpoint_timeout = '30min'
max_connections = 50
CONF
pg_ctl -D "$WORK/data" -l "$WORK/server.log" -w start >/dev/null
trap 'pg_ctl -D "$WORK/data" -m immediate -w stop >/dev/null 2>&1; kill $BROKER_PID 2>/dev/null' EXIT
for db in bench baseline; do
	createdb "$db"
	psql -X -q -v ON_ERROR_STOP=1 -d "$db" -f "$BENCH/setup.sql"
done

set_retention() {
	sql bench "ALTER SYSTEM SET outbox.published_retention = '$1'"
	sql bench "SELECT pg_reload_conf()" >/dev/null
	sleep 2
}
reset_tables() {
	sql "$1" "TRUNCATE orders, outbox_copy, outbox_log, outbox_retries, outbox_ledger, outbox_publish_stats, relay_outbox, pgbench_history"
	sql "$1" "VACUUM ANALYZE"
	sql "$1" "CHECKPOINT"
}
# fill_outbox DATABASE COUNT [KEYS]: COUNT events over KEYS keys (10000)
fill_outbox() {
	sql "$1" "SELECT count(outbox_enqueue('bench', bench_payload(i), key => (i % ${3:-10000})::text)) FROM generate_series(1, $2) i" >/dev/null
}
# wait until the worker has counted N events published since reset_tables:
# cheap, where outbox_stats counts the whole backlog at each look
wait_published() {
	until [ "$(sql "$1" "SELECT coalesce(sum(published), 0) >= $2 FROM outbox_publish_stats")" = t ]; do
		sleep 0.05
	done
}
wait_drained() {
	until [ "$(sql "$1" "SELECT pending + failed = 0 FROM outbox_stats WHERE topic IS NULL")" = t ]; do
		sleep 0.05
	done
}
# events per second for the worker to drain $1 events over $2 keys (10000);
# leaves in $WORK/wal the WAL bytes per event of the enqueue and of the
# publishing
drain_worker() {
	local start lsn0 lsn1
	reset_tables bench
	lsn0=$(sql bench "SELECT pg_current_wal_insert_lsn()")
	fill_outbox bench "$1" "${2:-10000}"
	lsn1=$(sql bench "SELECT pg_current_wal_insert_lsn()")
	start=$(now)
	wait_published bench "$1"
	sql bench "SELECT round(pg_wal_lsn_diff('$lsn1', '$lsn0') / $1), round(pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '$lsn1') / $1)" | tr '|' ' ' > "$WORK/wal"
	awk -v n="$1" -v s="$start" -v e="$(now)" 'BEGIN { printf "%.0f", n / (e - s) }'
}
# tps of pgbench in DATABASE running SCRIPT (a file of test/bench, or the
# name of a pgbench built-in script) with CLIENTS clients, protocol MODE
# (simple, prepared)
pgbench_tps() {
	local script="-f $BENCH/$2"
	case $2 in *.sql) ;; *) script="-b $2" ;; esac
	pgbench -n -M "$4" -T "$PGBENCH_S" -c "$3" -j "$(( $3 < 2 ? 1 : 2 ))" -s 10 $script "$1" 2>"$WORK/pgbench.err" |
		sed -n 's/^tps = \([0-9.]*\) .*/\1/p' | cut -d. -f1
}

echo "benchmark                                            ours     baseline    ratio   target" | tee "$RESULTS" >&2

# --- 1. enqueue cost: pgbench, three interleaved rounds, the median of
# each variant counts.  A variant is DATABASE:SCRIPT:CLIENTS:MODE.  No
# worker serves "baseline"; in "bench" the worker publishes every event.
log "enqueue cost (pgbench, 3 rounds of ${PGBENCH_S}s per variant)"
set_retention 7d
for db in bench baseline; do pgbench -i -q -s 10 "$db" >/dev/null 2>&1; done
declare -A tps
VARIANTS="baseline:plain.sql:4:simple baseline:enqueue.sql:4:simple
	baseline:plain.sql:4:prepared baseline:enqueue.sql:4:prepared
	baseline:plain.sql:1:prepared baseline:enqueue.sql:1:prepared
	baseline:plain.sql:8:prepared baseline:enqueue.sql:8:prepared
	baseline:tpcb-like:4:simple baseline:tpcb_enqueue.sql:4:simple
	baseline:tpcb_insert.sql:4:simple
	baseline:order.sql:4:simple bench:order.sql:4:simple"
for round in 1 2 3; do
	for variant in $VARIANTS; do
		db=${variant%%:*}
		reset_tables "$db"
		IFS=: read -r _ script clients mode <<<"$variant"
		tps[$variant]="${tps[$variant]:-} $(pgbench_tps "$db" "$script" "$clients" "$mode")" ||
			{ log "pgbench failed: $(cat "$WORK/pgbench.err")"; exit 1; }
	done
done
for variant in $VARIANTS; do
	tps[$variant]=$(echo ${tps[$variant]} | tr ' ' '\n' | sort -n | sed -n 2p)
	log "  $variant: ${tps[$variant]} tps (median)"
done
pair() {	# name ours-variant baseline-variant target
	result "$1" "${tps[$2]}" "${tps[$3]}" "$(ratio "${tps[$2]}" "${tps[$3]}")" "$4"
}
pair "enqueue vs plain INSERT (tps, simple)" baseline:enqueue.sql:4:simple baseline:plain.sql:4:simple ">= 1.0"
pair "enqueue vs plain INSERT (tps, prepared)" baseline:enqueue.sql:4:prepared baseline:plain.sql:4:prepared ">= 1.0"
pair "tpcb-like + enqueue vs tpcb-like (tps)" baseline:tpcb_enqueue.sql:4:simple baseline:tpcb-like:4:simple ">= 0.90"
pair "tpcb-like + plain INSERT vs tpcb-like (tps)" baseline:tpcb_insert.sql:4:simple baseline:tpcb-like:4:simple "-"
pair "app tps, worker publishing vs no worker" bench:order.sql:4:simple baseline:order.sql:4:simple ">= 0.85"
ours_scale=$(ratio "${tps[baseline:enqueue.sql:8:prepared]}" "${tps[baseline:enqueue.sql:1:prepared]}")
plain_scale=$(ratio "${tps[baseline:plain.sql:8:prepared]}" "${tps[baseline:plain.sql:1:prepared]}")
result "scaling 1->8 clients (x), vs plain INSERT" "$ours_scale" "$plain_scale" \
	"$(ratio "$ours_scale" "$plain_scale")" ">= 0.95"

# --- 2. drain rate
log "drain rate, $DRAIN_N events"
set_retention 7d
ours=$(drain_worker "$DRAIN_N")
read -r wal_enqueue wal_publish < "$WORK/wal"
log "  worker: $ours events/s; WAL per event: enqueue $wal_enqueue B, publishing $wal_publish B"
bare=$("$BENCH/producer" "$BROKERS" bare "$DRAIN_N" 10000)
log "  bare librdkafka producer: $bare events/s"
reset_tables baseline
sql baseline "INSERT INTO relay_outbox (topic, key, payload) SELECT 'relay', (i % 10000)::text, convert_to(bench_payload(i)::text, 'UTF8') FROM generate_series(1, $DRAIN_N) i"
start=$(now)
/usr/bin/python3 "$BENCH/relay.py" "host=$WORK port=$PORT dbname=baseline" "$BROKERS" 100 drain
relay=$(awk -v n="$DRAIN_N" -v s="$start" -v e="$(now)" 'BEGIN { printf "%.0f", n / (e - s) }')
log "  external relay: $relay events/s"
# the worker's claim and mark statements alone, without Kafka, one batch
# per transaction: the database's own limit for this design
sqlonly() {
	local start
	reset_tables baseline
	fill_outbox baseline "$DRAIN_N"
	start=$(now)
	pgbench -n -M prepared -c 1 -t $((DRAIN_N / 1000 + 1)) -D keep="$1" -f "$BENCH/drain_sql.sql" baseline >/dev/null 2>&1
	awk -v n="$DRAIN_N" -v s="$start" -v e="$(now)" 'BEGIN { printf "%.0f", n / (e - s) }'
}
sql_keep=$(sqlonly true)
log "  SQL alone: $sql_keep events/s"
result "WAL per event, publishing vs enqueue (B)" "$wal_publish" "$wal_enqueue" "$(ratio "$wal_publish" "$wal_enqueue")" "<= 0.05"
result "drain (events/s) vs external relay" "$ours" "$relay" "$(ratio "$ours" "$relay")" ">= 4"
result "drain (events/s) vs bare librdkafka producer" "$ours" "$bare" "$(ratio "$ours" "$bare")" ">= 0.5"
result "drain (events/s) vs SQL alone, no Kafka" "$ours" "$sql_keep" "$(ratio "$ours" "$sql_keep")" ">= 0.8"
set_retention 0
ours0=$(drain_worker "$DRAIN_N")
sql_delete=$(sqlonly false)
log "  retention 0: worker $ours0, SQL alone $sql_delete events/s"
result "drain, retention 0 (events/s) vs relay" "$ours0" "$relay" "$(ratio "$ours0" "$relay")" ">= 4"
result "drain, retention 0, vs SQL alone" "$ours0" "$sql_delete" "$(ratio "$ours0" "$sql_delete")" ">= 0.8"

# --- 2b. a hot key: order per key must not make one busy key slow
log "hot key, $FLAT_N events of one key vs over 100 keys"
hot=$(drain_worker "$FLAT_N" 1)
spread=$(drain_worker "$FLAT_N" 100)
log "  one key $hot, 100 keys $spread events/s"
result "drain, one key vs 100 keys (ev/s)" "$hot" "$spread" "$(ratio "$hot" "$spread")" ">= 0.5"

# --- 3. latency: a steady LATENCY_RATE events/s, each its own transaction
log "latency, $LATENCY_RATE events/s for ${LATENCY_S}s"
set_retention 7d
reset_tables baseline	# let autovacuum of the drain runs settle first
reset_tables bench
sleep 5
pgbench -n -M prepared -R "$LATENCY_RATE" -T "$LATENCY_S" -c 4 -j 2 -f "$BENCH/enqueue.sql" bench >/dev/null 2>&1
wait_drained bench
read -r p50 p99 max <<<"$(sql bench "SELECT round(percentile_cont(0.5) WITHIN GROUP (ORDER BY l)::numeric, 1), round(percentile_cont(0.99) WITHIN GROUP (ORDER BY l)::numeric, 1), round(max(l)::numeric, 1) FROM (SELECT 1000 * extract(epoch FROM published_at - created_at) AS l FROM outbox_messages) s" | tr '|' ' ')"
reset_tables baseline
/usr/bin/python3 "$BENCH/relay.py" "host=$WORK port=$PORT dbname=baseline" "$BROKERS" 100 run $((LATENCY_S + 2)) &
RELAY_PID=$!
pgbench -n -M prepared -R "$LATENCY_RATE" -T "$LATENCY_S" -c 4 -j 2 -f "$BENCH/relay_insert.sql" baseline >/dev/null 2>&1
wait $RELAY_PID
read -r r50 r99 rmax <<<"$(sql baseline "SELECT round(percentile_cont(0.5) WITHIN GROUP (ORDER BY l)::numeric, 1), round(percentile_cont(0.99) WITHIN GROUP (ORDER BY l)::numeric, 1), round(max(l)::numeric, 1) FROM (SELECT 1000 * extract(epoch FROM published_at - created_at) AS l FROM relay_outbox WHERE published_at IS NOT NULL) s" | tr '|' ' ')"
log "  worker p50 $p50 ms, p99 $p99 ms, max $max ms; relay (100 ms poll) p50 $r50 ms, p99 $r99 ms, max $rmax ms"
result "latency p50 (ms) vs relay polling 100ms" "$p50" "$r50" "$p50" "<= 5"
result "latency p99 (ms) vs relay polling 100ms" "$p99" "$r99" "$p99" "<= 25"
result "latency max (ms) vs relay polling 100ms" "$max" "$rmax" "$max" "<= 100"

# --- 4. flat cost: drain rate with HISTORY_N published rows kept
log "flat cost, $FLAT_N events with and without $HISTORY_N published rows kept"
empty=$(drain_worker "$FLAT_N")
reset_tables bench
# history as the worker leaves it: log rows read, a ledger row per 1000
sql bench "SELECT outbox_lock_reader(true);
		   INSERT INTO outbox_log_1 (id, txid, event_id, topic, key, payload, created_at)
		   SELECT nextval('outbox_event_id_seq'), '3', gen_random_uuid(), 'history', (i % 10000)::text,
				  convert_to(bench_payload(i)::text, 'UTF8'), now()
			 FROM generate_series(1, $HISTORY_N) i;
		   INSERT INTO outbox_ledger
		   SELECT min(id), max(id), array_agg(id ORDER BY id), array_agg(0), array_agg(id ORDER BY id), now()
			 FROM outbox_log_1 GROUP BY id / 1000;
		   UPDATE outbox_reader SET last_id = (SELECT max(id) FROM outbox_log)" >/dev/null
sql bench "VACUUM ANALYZE outbox_log_1, outbox_ledger"
sql bench "CHECKPOINT"
fill_outbox bench "$FLAT_N"
start=$(now)
wait_published bench "$FLAT_N"
kept=$(awk -v n="$FLAT_N" -v s="$start" -v e="$(now)" 'BEGIN { printf "%.0f", n / (e - s) }')
log "  empty table $empty, with history $kept events/s"
result "drain with history kept vs empty (ev/s)" "$kept" "$empty" "$(ratio "$kept" "$empty")" ">= 0.95"

# --- 5. sustained load: 4 clients enqueue as fast as they can, retention 0
log "sustained load, 4 clients for ${SUSTAIN_S}s"
set_retention 0
reset_tables bench
worker=$(sql bench "SELECT pid FROM outbox_worker_status()")
rss() { awk '/RssAnon/ { print $2 }' "/proc/$worker/status"; }	# private memory
size() { sql bench "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c WHERE c.relname IN ('outbox_log_0', 'outbox_log_1', 'outbox_log_2', 'outbox_log_3', 'outbox_ledger', 'outbox_reader', 'outbox_retries', 'outbox_event_ids')"; }
backlog() { sql bench "SELECT pending + failed FROM outbox_stats WHERE topic IS NULL"; }
published() { sql bench "SELECT published FROM outbox_worker_status()"; }
rss_start=$(rss)
published_start=$(published)
pgbench -n -M prepared -T "$SUSTAIN_S" -c 4 -j 2 -f "$BENCH/enqueue.sql" bench > "$WORK/sustain.out" 2>&1 &
PGBENCH_PID=$!
minute=$(( SUSTAIN_S < 300 ? SUSTAIN_S / 3 : 60 ))
# the size every second: a log table fills for 10 s or more before enqueue
# moves on and it is emptied, so one sample lands anywhere in that cycle;
# the peaks of two windows are compared instead
start=$(date +%s)
while kill -0 $PGBENCH_PID 2>/dev/null; do
	echo "$(( $(date +%s) - start )) $(size)"
	sleep 1
done > "$WORK/sizes" &
SIZES_PID=$!
sleep "$minute"
backlog_minute=$(backlog); rss_minute=$(rss)
wait $PGBENCH_PID
wait $SIZES_PID
backlog_end=$(backlog); rss_end=$(rss)
size_minute=$(awk -v a="$minute" -v b="$((2 * minute))" '$1 >= a && $1 < b && $2 > m { m = $2 } END { print m + 0 }' "$WORK/sizes")
size_end=$(awk -v a="$((SUSTAIN_S - minute))" '$1 >= a && $2 > m { m = $2 } END { print m + 0 }' "$WORK/sizes")
enqueued=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$WORK/sustain.out")
publish_rate=$(awk -v a="$(published)" -v b="$published_start" -v t="$SUSTAIN_S" 'BEGIN { printf "%.0f", (a - b) / t }')
enqueue_rate=$(awk -v n="$enqueued" -v t="$SUSTAIN_S" 'BEGIN { printf "%.0f", n / t }')
log "  enqueued $enqueue_rate/s, published $publish_rate/s; backlog ${backlog_minute} -> ${backlog_end}; peak size ${size_minute} -> ${size_end} bytes; worker RSS ${rss_start} -> ${rss_minute} -> ${rss_end} kB"
result "sustained: published vs enqueued (ev/s)" "$publish_rate" "$enqueue_rate" "$(ratio "$publish_rate" "$enqueue_rate")" ">= 1.0"
result "sustained: peak size last ${minute}s vs ${minute}-$((2 * minute))s (B)" "$size_end" "$size_minute" "$(ratio "$size_end" "$size_minute")" "<= 1.2"
result "sustained: worker memory end vs ${minute}s (kB)" "$rss_end" "$rss_minute" "$(ratio "$rss_end" "$rss_minute")" "<= 1.1"

echo
cat "$RESULTS"
