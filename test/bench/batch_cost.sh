#!/bin/bash
#
# The worker's cost per batch, the latency, and the enqueue against the
# INSERT users write by hand, with the data directory in tmpfs (CPU-bound),
# in one short run (about 5 minutes):
#
# 1. at 1,000 and 2,000 single-event transactions/s and at 1,000
#    transactions/s of 10 events (pgbench --rate, 4 clients, prepared,
#    RATE_S seconds each): the latency from commit to the recorded delivery,
#    p50/p99/max (targets 3, 10, 50 ms) beside the application's slowest
#    transaction; and what the worker costs: CPU per event (/proc), events
#    per batch (ledger rows), rows it writes and WAL bytes per batch
#    (pg_stat_user_tables, pg_waldump of the worker's transactions);
# 2. the system calls of the worker's process, all its threads (strace -c),
#    per batch at 1,000 single-event transactions/s, if strace is there;
# 3. enqueue vs the outbox table users write by hand, simple and prepared
#    protocol, 4 clients, ROUNDS interleaved rounds of ROUND_S seconds, the
#    median (target >= 1.0), in a database no worker serves.
#
# Usage: [WAKE_DELAY=3ms] test/bench/batch_cost.sh [RATE_S [ROUND_S [ROUNDS]]]	(20 s, 6 s, 3; outbox.wake_delay: the default unless given)

PORT=54346
. "$(dirname "$0")/common.sh" "$@"
RATE_S=${1:-20}
ROUND_S=${2:-6}
ROUNDS=${3:-3}
DATA=$(mktemp -d /dev/shm/outbox_bench.XXXXXX)
at_exit 'rm -rf "$DATA"'

start_broker
start_server "$DATA" bench "shared_buffers = '1GB'" "max_wal_size = '8GB'" "checkpoint_timeout = '30min'" \
	"track_commit_timestamp = on" ${WAKE_DELAY:+"outbox.wake_delay = '$WAKE_DELAY'"}
bench_database bench
bench_database baseline
log "data directory in $DATA (tmpfs), outbox.wake_delay = $(sql 'SHOW outbox.wake_delay')"

# rows the worker writes: the tables of the extension but the log
rows_written() {
	sql "SELECT sum(n_tup_ins + n_tup_upd + n_tup_del) FROM pg_stat_user_tables
		  WHERE relname IN ('outbox_reader', 'outbox_ledger', 'outbox_retries', 'outbox_publish_stats')"
}
# the WAL of the worker's transactions (those that wrote to its tables)
# and of the pruning of its tables, from LSN $1 to $2, in bytes; and the
# number of those transactions
worker_wal() {
	local nodes
	nodes=$(sql "SELECT string_agg(pg_relation_filenode(c.oid)::text, ' ')
				   FROM pg_class c
				  WHERE c.relname IN ('outbox_reader', 'outbox_ledger', 'outbox_retries', 'outbox_publish_stats')
					 OR c.oid IN (SELECT indexrelid FROM pg_index i JOIN pg_class t ON t.oid = i.indrelid
								   WHERE t.relname IN ('outbox_reader', 'outbox_ledger', 'outbox_retries', 'outbox_publish_stats'))")
	pg_waldump -p "$DATA/pg_wal" -s "$1" -e "$2" 2>/dev/null |
		awk -v nodes="$nodes" '
			BEGIN { n = split(nodes, a, " "); for (i = 1; i <= n; i++) node[a[i]] = 1 }
			{
				match($0, /tot\): *[0-9]+\/ *[0-9]+/); split(substr($0, RSTART, RLENGTH), t, "/"); len[NR] = t[2] + 0
				match($0, /tx: *[0-9]+/); xid[NR] = substr($0, RSTART + 3, RLENGTH - 3) + 0
				mine[NR] = 0
				while (match($0, /rel [0-9]+\/[0-9]+\/[0-9]+/)) {
					split(substr($0, RSTART + 4, RLENGTH - 4), r, "/")
					if (r[3] in node) { mine[NR] = 1; if (xid[NR] != 0) worker[xid[NR]] = 1 }
					$0 = substr($0, RSTART + RLENGTH)
				}
			}
			END {
				for (i = 1; i <= NR; i++)
					if (mine[i] || (xid[i] != 0 && xid[i] in worker)) bytes += len[i]
				for (x in worker) xacts++
				print bytes + 0, xacts + 0
			}'
}

# rate_row NAME SCRIPT TX_PER_S EVENTS_PER_TX: pgbench at a fixed rate for
# RATE_S, then its figures
rate_row() {
	local cpu cpu0 ids0 rows0 lsn0 lsn1 kept events batches rows app_max p50 p99 max wal xacts
	sql "TRUNCATE outbox_ledger, bench_latency"
	sql "CHECKPOINT"
	sleep 1
	cpu0=$(worker_cpu_ms)
	ids0=$(sql "SELECT coalesce(max(id), 0) FROM outbox_log")
	sql "SELECT pg_stat_force_next_flush()" >/dev/null
	rows0=$(rows_written)
	lsn0=$(sql "SELECT pg_current_wal_insert_lsn()")
	kept=$(rate_run "$2" "$3" "$RATE_S")
	wait_drained
	sleep 1.5	# the worker's statistics reach pgstat at most once a second
	lsn1=$(sql "SELECT pg_current_wal_insert_lsn()")
	# outbox_messages knows no event of a batch whose ledger row is gone
	events=$(sql "SELECT coalesce(sum(cardinality(ids)), 0) FROM outbox_ledger")
	batches=$(sql "SELECT count(*) FROM outbox_ledger")
	rows=$(($(rows_written) - rows0))
	read -r wal xacts <<<"$(worker_wal "$lsn0" "$lsn1")"
	app_max=$(cat "$WORK/app_max")
	copy_latencies "l.id > $ids0"
	read -r p50 p99 max _ <<<"$(latencies)"
	printf '%-16s kept %5s tx/s  latency p50 %5s  p99 %5s  max %5s ms (app slowest %s ms; targets 3, 10, 50)\n' \
		"$1" "$kept" "$p50" "$p99" "$max" "$app_max"
	cpu=$(($(worker_cpu_ms) - cpu0))
	printf '%-16s worker: %s us CPU/event, %s events/batch, %s us CPU, %s rows and %s B of WAL per batch, %s write transactions per batch\n' \
		"" "$(awk -v c="$cpu" -v n="$events" 'BEGIN { printf "%.1f", 1000 * c / n }')" \
		"$(ratio "$events" "$batches")" "$(awk -v c="$cpu" -v b="$batches" 'BEGIN { printf "%.0f", 1000 * c / b }')" \
		"$(ratio "$rows" "$batches")" \
		"$(awk -v w="$wal" -v b="$batches" 'BEGIN { printf "%.0f", w / b }')" "$(ratio "$xacts" "$batches")"
}

log "1. fixed rates, ${RATE_S}s each"
sql "SELECT outbox_enqueue('orders', '{}'::jsonb)" >/dev/null
wait_drained
rate_row "1000 tx/s x 1" enqueue.sql 1000 1
rate_row "2000 tx/s x 1" enqueue.sql 2000 1
rate_row "1000 tx/s x 10" enqueue10.sql 1000 10

if command -v strace >/dev/null; then
	log "2. system calls of the worker at 1,000 tx/s, 10 s"
	sql "TRUNCATE outbox_ledger"
	pid=$(worker_pid)
	strace -c -f -q -p "$pid" -o "$WORK/strace.txt" &
	STRACE_PID=$!
	sleep 1
	pgbench -n -M prepared -R 1000 -T 10 -c 4 -j 2 -f "$BENCH/enqueue.sql" bench >/dev/null 2>&1
	wait_drained
	kill -INT $STRACE_PID
	wait $STRACE_PID 2>/dev/null || true
	batches=$(sql "SELECT count(*) FROM outbox_ledger")
	awk -v b="$batches" '$NF == "total" { printf "worker: %.1f system calls per batch (%d batches, strace -c -f)\n", $(NF - 2) / b, b }' "$WORK/strace.txt"
	awk -v b="$batches" 'NR > 2 && $1 ~ /^[0-9.]+$/ && $NF != "total" { printf "  %-16s %6.1f per batch\n", $NF, $4 / b }' "$WORK/strace.txt" | head -8
fi

log "3. enqueue vs the hand-written INSERT, $ROUNDS rounds of ${ROUND_S}s"
declare -A runs
for round in $(seq 1 "$ROUNDS"); do
	for variant in order_enqueue.sql:simple order_outbox.sql:simple order_enqueue.sql:prepared order_outbox.sql:prepared; do
		IFS=: read -r script mode <<<"$variant"
		sql "TRUNCATE orders, app_outbox, outbox_log, outbox_retries, outbox_ledger" baseline
		sql "CHECKPOINT" baseline
		runs[$variant]="${runs[$variant]:-} $(pgbench -n -M "$mode" -T "$ROUND_S" -c 4 -j 2 -f "$BENCH/$script" baseline 2>"$WORK/pgbench.err" | tps)"
	done
done
for mode in simple prepared; do
	e=$(median <<<"${runs[order_enqueue.sql:$mode]}")
	o=$(median <<<"${runs[order_outbox.sql:$mode]}")
	echo "enqueue vs INSERT ($mode): $e vs $o tps, $(ratio "$e" "$o") (target >= 1.0)"
done
