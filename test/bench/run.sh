#!/bin/bash
#
# The benchmark suite: starts its own server and local broker, runs every
# benchmark with its baseline in the same run, and prints one table:
# benchmark, our figure, baseline figure, ratio, target, pass/miss.  For a
# latency the ratio column is the figure itself, against its bar.
#
# Usage: test/bench/run.sh [--quick]
#	default: about 40 minutes on 2 cores, the durations the targets name
#	(60 s per rate, 5 minutes at 500 events/s, 5 minutes under a held
#	snapshot, 1,000,000 events to drain); --quick: the same rows, shorter
#	(about 10 minutes), to try the script, not to quote.
#
# As root it first prepares the machine, then runs as the postgres user.

PORT=54339
. "$(dirname "$0")/common.sh" "$@"

if [ "${1:-}" = "--quick" ]; then
	PGBENCH_S=4 RATE_S=15 LONG_S=60 HOLD_S=60 DRAIN_N=200000 HISTORY_N=200000 FLAT_N=50000 SUSTAIN_S=45
else
	PGBENCH_S=8 RATE_S=60 LONG_S=300 HOLD_S=300 DRAIN_N=1000000 HISTORY_N=1000000 FLAT_N=200000 SUSTAIN_S=90
fi
rate() { awk -v n="$1" -v s="$2" 'BEGIN { printf "%.0f", n / s }'; }

# --- a broker and a server; the worker publishes from database "bench",
# baselines run in database "baseline" where no worker looks
start_broker
start_server "$WORK/data" bench "shared_buffers = '2GB'" "max_wal_size = '16GB'" \
	"checkpoint_timeout = '30min'" "max_connections = 50" "track_commit_timestamp = on"
for db in bench baseline; do
	bench_database "$db"
	pgbench -i -q -s 10 "$db" >/dev/null 2>&1
done
sql "CREATE EXTENSION pgq" baseline

set_retention() {
	sql "ALTER SYSTEM SET outbox.published_retention = '$1'"
	sql "SELECT pg_reload_conf()" >/dev/null
	sleep 2
}
reset_tables() {
	sql "TRUNCATE orders, app_outbox, outbox_log, outbox_retries, outbox_ledger, outbox_publish_stats, relay_outbox, bench_latency, pgbench_history" "$1"
	sql "VACUUM ANALYZE" "$1"
	sql "CHECKPOINT" "$1"
}
# fill_outbox DATABASE COUNT [KEYS]: COUNT events over KEYS keys (10000),
# committed at once
fill_outbox() {
	sql "SELECT count(outbox_enqueue('bench', bench_payload(i), key => (i % ${3:-10000})::text)) FROM generate_series(1, $2) i" "$1" >/dev/null
}
# drain_worker COUNT [KEYS]: events per second for the worker to publish
# COUNT events committed at once, from the first delivery recorded to the
# last; leaves in $WORK/wal the WAL bytes per event of the enqueue and of
# the publishing
drain_worker() {
	local lsn0 lsn1 base events_per_s
	reset_tables bench
	base=$(published)
	lsn0=$(sql "SELECT pg_current_wal_insert_lsn()")
	fill_outbox bench "$1" "${2:-10000}"
	lsn1=$(sql "SELECT pg_current_wal_insert_lsn()")
	events_per_s=$(publish_rate "$base" "$1")
	sql "SELECT round(pg_wal_lsn_diff('$lsn1', '$lsn0') / $1), round(pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '$lsn1') / $1)" | tr '|' ' ' > "$WORK/wal"
	echo "$events_per_s"
}
# pgbench_tps DATABASE SCRIPT CLIENTS MODE: tps of SCRIPT (a file of
# test/bench, or the name of a pgbench built-in script)
pgbench_tps() {
	local script="-f $BENCH/$2"
	case $2 in *.sql) ;; *) script="-b $2" ;; esac
	pgbench -n -M "$4" -T "$PGBENCH_S" -c "$3" -j "$(( $3 < 2 ? 1 : 2 ))" -s 10 $script "$1" 2>"$WORK/pgbench.err" | tps
}
# copy_recent: the latencies of the events published since the last copy
# into bench_latency (copy_latencies), before retention takes them.
# Events up to 20,000 ids back are looked at again, so that one still in
# flight at a copy is taken at the next.
copy_recent() { copy_latencies "l.id > (SELECT coalesce(max(id), 0) - 20000 FROM bench_latency)"; }

result_header

# --- 1. enqueue cost: the same application transaction with
# outbox_enqueue and with the outbox table users write by hand, pgbench,
# three interleaved rounds, the median of each variant counts; no worker
# (database "baseline").  A variant is SCRIPT:CLIENTS:MODE.
log "enqueue cost (pgbench, 3 rounds of ${PGBENCH_S}s per variant)"
declare -A runs wal
VARIANTS="order_enqueue.sql:4:simple order_outbox.sql:4:simple
	order_enqueue.sql:1:prepared order_outbox.sql:1:prepared
	order_enqueue.sql:4:prepared order_outbox.sql:4:prepared
	order_enqueue.sql:8:prepared order_outbox.sql:8:prepared
	tpcb_enqueue.sql:4:simple tpcb_outbox.sql:4:simple"
for round in 1 2 3; do
	for variant in $VARIANTS; do
		reset_tables baseline
		IFS=: read -r script clients mode <<<"$variant"
		lsn=$(sql "SELECT pg_current_wal_insert_lsn()" baseline)
		xacts=$(sql "SELECT xact_commit FROM pg_stat_database WHERE datname = 'baseline'" baseline)
		runs[$variant]="${runs[$variant]:-} $(pgbench_tps baseline "$script" "$clients" "$mode")" ||
			{ log "pgbench failed: $(cat "$WORK/pgbench.err")"; exit 1; }
		sql "SELECT pg_stat_force_next_flush()" baseline >/dev/null
		wal[$variant]=$(sql "SELECT round(pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '$lsn') /
									  (SELECT xact_commit - $xacts FROM pg_stat_database WHERE datname = 'baseline'))" baseline)
	done
done
for variant in $VARIANTS; do
	runs[$variant]=$(median <<<"${runs[$variant]}")
	log "  $variant: ${runs[$variant]} tps (median), ${wal[$variant]} B of WAL per transaction"
done
pair() {	# name ours-variant baseline-variant target
	result "$1" "${runs[$2]}" "${runs[$3]}" "$(ratio "${runs[$2]}" "${runs[$3]}")" "$4"
}
pair "enqueue vs hand-written outbox (tps, simple, 4 cl.)" order_enqueue.sql:4:simple order_outbox.sql:4:simple ">= 1.0"
pair "enqueue vs hand-written outbox (tps, prep., 1 cl.)" order_enqueue.sql:1:prepared order_outbox.sql:1:prepared ">= 1.0"
pair "enqueue vs hand-written outbox (tps, prep., 4 cl.)" order_enqueue.sql:4:prepared order_outbox.sql:4:prepared ">= 1.0"
pair "enqueue vs hand-written outbox (tps, prep., 8 cl.)" order_enqueue.sql:8:prepared order_outbox.sql:8:prepared ">= 1.0"
pair "tpcb-like + enqueue vs + hand-written INSERT (tps)" tpcb_enqueue.sql:4:simple tpcb_outbox.sql:4:simple ">= 1.0"
result "WAL per transaction, enqueue vs hand-written (B)" "${wal[order_enqueue.sql:4:prepared]}" \
	"${wal[order_outbox.sql:4:prepared]}" \
	"$(ratio "${wal[order_enqueue.sql:4:prepared]}" "${wal[order_outbox.sql:4:prepared]}")" "<= 1.0"

# --- 2. latency, commit to delivery report: fixed rates, each its own
# run; the baseline is a bare librdkafka producer at the same rate
set_retention 7d
latency_rows() {	# name script tx/s events/s seconds
	local kept p50 p99 max b50 b99 bmax
	reset_tables bench
	sleep 2
	kept=$(rate_run "$2" "$3" "$5")
	wait_drained
	copy_recent
	read -r p50 p99 max _ <<<"$(latencies)"
	read -r b50 b99 bmax <<<"$("$BENCH/producer" "$BROKERS" "bare.$4" $(($4 * $5)) 10000 "$4")"
	log "  $1: kept $kept tx/s; p50 $p50, p99 $p99, max $max ms; bare producer p50 $b50, p99 $b99, max $bmax ms; the application's slowest transaction $(cat "$WORK/app_max") ms"
	result "latency p50 (ms), $1" "$p50" "$b50" "$p50" "<= 3"
	result "latency p99 (ms), $1" "$p99" "$b99" "$p99" "<= 10"
	result "latency max (ms), $1" "$max" "$bmax" "$max" "<= 50"
	result "  the application's slowest transaction (ms)" "$(cat "$WORK/app_max")" "-" "-" "-"
}
log "latency at 10,000 events/s (1,000 transactions of 10) for ${RATE_S}s"
latency_rows "10k ev/s as 1000 tx/s x 10" enqueue10.sql 1000 10000 "$RATE_S"
log "latency at 2,000 single-event transactions/s for ${RATE_S}s"
latency_rows "2000 tx/s x 1" enqueue.sql 2000 2000 "$RATE_S"

# 500 events/s for LONG_S, with rotations (retention 40 s: the log moves
# on every 20 s and emptied tables are truncated), the retention cleanup
# every 10 s, and a checkpoint at each third of the run
log "latency at 500 events/s for ${LONG_S}s, with rotations, retention and checkpoints"
set_retention 40s
reset_tables bench
rotations=$(sql "SELECT current_log FROM outbox_reader")
rate_run enqueue.sql 500 "$LONG_S" > "$WORK/long.tps" &
LOAD_PID=$!
checkpoints=0
for ((s = 5; s <= LONG_S; s += 5)); do
	sleep 5
	copy_recent
	if [ $((s % (LONG_S / 3))) -eq 0 ] && [ "$s" -lt "$LONG_S" ]; then
		sql "CHECKPOINT"
		checkpoints=$((checkpoints + 1))
	fi
done
wait $LOAD_PID
wait_drained
copy_recent
read -r p50 p99 max _ <<<"$(latencies)"
moved=$(sql "SELECT (current_log - $rotations + 4) % 4 FROM outbox_reader")
log "  500 ev/s for ${LONG_S}s: p50 $p50, p99 $p99, max $max ms; $checkpoints checkpoints, log now $moved tables on; the application's slowest transaction $(cat "$WORK/app_max") ms"
grep -E 'emptied|rotat|checkpoint complete' "$WORK/server.log" | tail -3 >&2 || true
result "latency max (ms), 500 ev/s for ${LONG_S}s, rotating" "$max" "-" "$max" "<= 50"
result "latency p99 (ms), 500 ev/s for ${LONG_S}s, rotating" "$p99" "-" "$p99" "<= 10"
result "  the application's slowest transaction (ms)" "$(cat "$WORK/app_max")" "-" "-" "-"
set_retention 7d

# --- 3. the application's throughput while the worker publishes 10,000
# events/s: tpcb-like at full speed beside 1,000 transactions/s of 10
# events, in "bench" (published) and in "baseline" (no worker)
log "application throughput beside 10,000 events/s, ${RATE_S}s each"
app_tps() {	# database
	reset_tables "$1"
	pgbench -n -M prepared -R 1000 -T "$RATE_S" -c 2 -j 1 -f "$BENCH/enqueue10.sql" "$1" >/dev/null 2>&1 &
	local load=$!
	pgbench -n -M prepared -T "$RATE_S" -c 4 -j 2 -b tpcb-like "$1" 2>/dev/null | tps
	wait $load
}
with_worker=$(app_tps bench)
without=$(app_tps baseline)
log "  tpcb-like: $with_worker tps with the worker publishing, $without without"
result "app tps beside 10k ev/s, worker vs none" "$with_worker" "$without" "$(ratio "$with_worker" "$without")" ">= 0.9"

# --- 4. drain: DRAIN_N committed events, from the first delivery to the
# last; baselines: the worker's statements alone (claim and record, no
# Kafka), PgQ's batch read, a bare librdkafka producer, an external relay
log "drain, $DRAIN_N events"
ours=$(drain_worker "$DRAIN_N")
read -r wal_enqueue wal_publish < "$WORK/wal"
log "  worker: $ours events/s; WAL per event: enqueue $wal_enqueue B, publishing $wal_publish B"
bare=$("$BENCH/producer" "$BROKERS" bare "$DRAIN_N" 10000)
log "  bare librdkafka producer: $bare events/s"
sqlonly() {	# keep
	reset_tables baseline
	fill_outbox baseline "$DRAIN_N"
	local start
	start=$(now)
	pgbench -n -M prepared -c 1 -t $((DRAIN_N / 1000)) -D keep="$1" -f "$BENCH/drain_sql.sql" baseline >"$WORK/sqlonly.out" 2>&1 ||
		{ log "the worker's SQL failed: $(tail -3 "$WORK/sqlonly.out")"; exit 1; }
	rate "$DRAIN_N" "$(awk -v s="$start" -v e="$(now)" 'BEGIN { print e - s }')"
}
sql_keep=$(sqlonly true)
log "  the worker's SQL alone: $sql_keep events/s"
sql "SELECT pgq.drop_queue('bench', true) FROM pgq.queue WHERE queue_name = 'bench'" baseline >/dev/null
sql "SELECT pgq.create_queue('bench'); SELECT pgq.register_consumer('bench', 'bench');
			  SELECT pgq.set_queue_config('bench', 'ticker_max_count', '1000')" baseline >/dev/null
sql "SELECT format('SELECT count(pgq.insert_event(''bench'', ''bench'', bench_payload(i)::text)) FROM generate_series(%s, %s) i', n, n + 999)
				FROM generate_series(1, $DRAIN_N, 1000) n" baseline > "$WORK/pgq_fill.sql"
sed 's/$/; SELECT pgq.ticker();/' "$WORK/pgq_fill.sql" | psql -X -q -v ON_ERROR_STOP=1 -d baseline >/dev/null
sql "SELECT pgq.force_tick('bench'); SELECT pgq.ticker()" baseline >/dev/null
batches=$(sql "SELECT count(*) - 1 FROM pgq.tick t JOIN pgq.queue q ON q.queue_id = t.tick_queue WHERE q.queue_name = 'bench'" baseline)
start=$(now)
pgbench -n -M prepared -c 1 -t "$batches" -f "$BENCH/pgq_batch.sql" baseline >"$WORK/pgq.out" 2>&1 ||
	{ log "PgQ's batch read failed: $(tail -3 "$WORK/pgq.out")"; exit 1; }
pgq=$(rate "$DRAIN_N" "$(awk -v s="$start" -v e="$(now)" 'BEGIN { print e - s }')")
log "  PgQ's batch read: $pgq events/s"
reset_tables baseline
sql "INSERT INTO relay_outbox (topic, key, payload) SELECT 'relay', (i % 10000)::text, convert_to(bench_payload(i)::text, 'UTF8') FROM generate_series(1, $DRAIN_N) i" baseline
start=$(now)
/usr/bin/python3 "$BENCH/relay.py" "host=$WORK port=$PORT dbname=baseline" "$BROKERS" 100 drain
relay=$(rate "$DRAIN_N" "$(awk -v s="$start" -v e="$(now)" 'BEGIN { print e - s }')")
log "  external relay: $relay events/s"
result "the worker's SQL vs PgQ's batch read (ev/s)" "$sql_keep" "$pgq" "$(ratio "$sql_keep" "$pgq")" ">= 1.0"
result "drain vs the worker's SQL alone (ev/s)" "$ours" "$sql_keep" "$(ratio "$ours" "$sql_keep")" ">= 0.9"
result "drain vs bare librdkafka producer (ev/s)" "$ours" "$bare" "$(ratio "$ours" "$bare")" ">= 0.4"
result "drain vs external relay (ev/s)" "$ours" "$relay" "$(ratio "$ours" "$relay")" ">= 4"
result "WAL per event, publishing vs enqueue (B)" "$wal_publish" "$wal_enqueue" "$(ratio "$wal_publish" "$wal_enqueue")" "<= 0.05"
set_retention 0
ours0=$(drain_worker "$DRAIN_N")
sql_delete=$(sqlonly false)
log "  retention 0: worker $ours0, SQL alone $sql_delete events/s"
result "drain, retention 0, vs SQL alone (ev/s)" "$ours0" "$sql_delete" "$(ratio "$ours0" "$sql_delete")" ">= 0.9"
set_retention 7d

# a hot key: order per key must not make one busy key slow
log "hot key, $FLAT_N events of one key vs over 100 keys"
hot=$(drain_worker "$FLAT_N" 1)
spread=$(drain_worker "$FLAT_N" 100)
log "  one key $hot, 100 keys $spread events/s"
result "drain, one key vs 100 keys (ev/s)" "$hot" "$spread" "$(ratio "$hot" "$spread")" ">= 0.5"

# flat cost: the drain with HISTORY_N published events kept
log "flat cost, $FLAT_N events with and without $HISTORY_N published events kept"
empty=$(drain_worker "$FLAT_N")
reset_tables bench
base=$(published)
fill_outbox bench "$HISTORY_N"
until [ "$(published)" -ge $((base + HISTORY_N)) ]; do sleep 0.2; done
sql "VACUUM ANALYZE"
sql "CHECKPOINT"
base=$(published)
fill_outbox bench "$FLAT_N"
kept=$(publish_rate "$base" "$FLAT_N")
log "  empty log $empty, with history $kept events/s"
result "drain with history kept vs empty (ev/s)" "$kept" "$empty" "$(ratio "$kept" "$empty")" ">= 0.95"

# --- 5. a snapshot held for HOLD_S while 2,000 events/s flow: the same run
# with and without it; the tables the worker updates, their dead tuples
log "a held snapshot, 2,000 events/s for ${HOLD_S}s, with and without"
table_state() {
	sql "SELECT string_agg(relname || ' ' || pg_size_pretty(pg_relation_size(relid)) || ' ' || n_dead_tup || ' dead', ', ' ORDER BY relname)
				 FROM pg_stat_user_tables WHERE relname IN ('outbox_reader', 'outbox_ledger', 'outbox_publish_stats')"
}
held_run() {	# hold: yes or no; prints tps p99 cpu-per-1000 size
	local holder="" kept cpu0 cpu1 p0 p1 p50 p99 max size
	reset_tables bench
	sql "VACUUM outbox_reader, outbox_ledger, outbox_publish_stats"
	log "  before ($1): $(table_state)"
	if [ "$1" = yes ]; then
		psql -X -q -d bench -c "BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT count(*) FROM outbox_reader; SELECT pg_sleep($HOLD_S + 10); COMMIT" >/dev/null 2>&1 &
		holder=$!
		sleep 1
	fi
	cpu0=$(worker_cpu_ms) p0=$(published)
	kept=$(rate_run enqueue.sql 2000 "$HOLD_S")
	wait_drained
	cpu1=$(worker_cpu_ms) p1=$(published)
	copy_recent
	read -r p50 p99 max _ <<<"$(latencies)"
	size=$(sql "SELECT pg_relation_size('outbox_reader') + pg_relation_size('outbox_ledger') + pg_relation_size('outbox_publish_stats')")
	log "  after ($1): $(table_state); kept $kept tx/s, p50 $p50, p99 $p99, max $max ms; the application's slowest transaction $(cat "$WORK/app_max") ms"
	[ -n "$holder" ] && { sql "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE '%pg_sleep%' AND pid <> pg_backend_pid()" >/dev/null; wait $holder || true; }
	echo "$kept $p99 $(awk -v c=$((cpu1 - cpu0)) -v n=$((p1 - p0)) 'BEGIN { printf "%.1f", 1000 * c / n }') $size"
}
read -r free_tps free_p99 free_cpu free_size <<<"$(held_run no)"
read -r held_tps held_p99 held_cpu held_size <<<"$(held_run yes)"
log "  worker CPU per 1000 events: $held_cpu ms held, $free_cpu ms not; reader+ledger+stats $held_size B held, $free_size B not"
result "held snapshot: kept tx/s vs none (2000 ev/s)" "$held_tps" "$free_tps" "$(ratio "$held_tps" "$free_tps")" ">= 0.9"
result "held snapshot: latency p99 (ms)" "$held_p99" "$free_p99" "$held_p99" "<= 10"
result "held snapshot: worker CPU per 1000 events (ms)" "$held_cpu" "$free_cpu" "$(ratio "$held_cpu" "$free_cpu")" "<= 1.1"

# --- 6. sustained load: 4 clients enqueue as fast as they can, retention 0
log "sustained load, 4 clients for ${SUSTAIN_S}s"
set_retention 0
reset_tables bench
pid=$(worker_pid)
rss() { awk '/RssAnon/ { print $2 }' "/proc/$pid/status"; }	# private memory
size() { sql "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c WHERE c.relname IN ('outbox_log_0', 'outbox_log_1', 'outbox_log_2', 'outbox_log_3', 'outbox_ledger', 'outbox_reader', 'outbox_retries', 'outbox_event_ids')"; }
rss_start=$(rss)
published_start=$(published)
pgbench -n -M prepared -T "$SUSTAIN_S" -c 4 -j 2 -f "$BENCH/enqueue.sql" bench > "$WORK/sustain.out" 2>&1 &
PGBENCH_PID=$!
third=$((SUSTAIN_S / 3))
# the size every second: a log table fills for 10 s or more before enqueue
# moves on and it is emptied, so one sample lands anywhere in that cycle;
# the peaks of two windows are compared instead
start=$(date +%s)
while kill -0 $PGBENCH_PID 2>/dev/null; do
	echo "$(( $(date +%s) - start )) $(size)"
	sleep 1
done > "$WORK/sizes" &
SIZES_PID=$!
sleep "$third"
rss_third=$(rss)
wait $PGBENCH_PID
wait $SIZES_PID
wait_drained
rss_end=$(rss)
size_middle=$(awk -v a="$third" -v b="$((2 * third))" '$1 >= a && $1 < b && $2 > m { m = $2 } END { print m + 0 }' "$WORK/sizes")
size_end=$(awk -v a="$((SUSTAIN_S - third))" '$1 >= a && $2 > m { m = $2 } END { print m + 0 }' "$WORK/sizes")
enqueued=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$WORK/sustain.out")
publish_rate=$(rate "$(( $(published) - published_start ))" "$SUSTAIN_S")
enqueue_rate=$(rate "$enqueued" "$SUSTAIN_S")
log "  enqueued $enqueue_rate/s, published $publish_rate/s; peak size ${size_middle} -> ${size_end} bytes; worker RSS ${rss_start} -> ${rss_third} -> ${rss_end} kB"
result "sustained: published vs enqueued (ev/s)" "$publish_rate" "$enqueue_rate" "$(ratio "$publish_rate" "$enqueue_rate")" ">= 1.0"
result "sustained: peak size last third vs middle (B)" "$size_end" "$size_middle" "$(ratio "$size_end" "$size_middle")" "<= 1.2"
result "sustained: worker memory end vs first third (kB)" "$rss_end" "$rss_third" "$(ratio "$rss_end" "$rss_third")" "<= 1.1"

echo
cat "$RESULTS"
