#!/bin/bash
#
# What publishing costs the application, beside what a Debezium connector
# costs the server.  pgbench's tpcb-like transaction plus one event, 4
# clients, prepared protocol, ROUNDS interleaved rounds of ROUND_S seconds
# of each set-up, in one server (wal_level = logical for all):
#
#   outbox     INSERT into a hand-written outbox table, nothing reading it
#   walsender  the same, with a pgoutput slot on a publication of that table
#              streamed by pg_recvlogical (Debezium's server side)
#   off        outbox_enqueue(), the worker not publishing (outbox.enabled off)
#   worker     outbox_enqueue(), the worker publishing to the local broker
#
# Targets: worker >= 1.0 x walsender, worker >= 0.9 x off.  Also the
# machine's busy CPU per transaction of each set-up (/proc/stat); the CPU
# per event of the publishing side: the walsender and pg_recvlogical, the
# worker (its librdkafka threads included) and the test broker; and the
# worker's events per batch (ledger rows).
#
# Usage: [WAKE_DELAY=3ms] test/bench/app_cost.sh [ROUND_S [ROUNDS]]	(12 s, 3 rounds; outbox.wake_delay: the default unless given)

PORT=54345
. "$(dirname "$0")/common.sh" "$@"
ROUND_S=${1:-12}
ROUNDS=${2:-3}

start_broker
start_server "$WORK/data" bench "shared_buffers = '2GB'" "max_wal_size = '16GB'" \
	"checkpoint_timeout = '30min'" "wal_level = logical" ${WAKE_DELAY:+"outbox.wake_delay = '$WAKE_DELAY'"}
RECV_PID=
at_exit 'kill $RECV_PID 2>/dev/null'
bench_database bench
pgbench -i -q -s 10 bench >/dev/null 2>&1
sql "CREATE PUBLICATION bench_pub FOR TABLE app_outbox"

# busy CPU of the whole machine, in ms
machine_cpu_ms() { awk '/^cpu / { print ($2 + $3 + $4 + $7 + $8) * 10 }' /proc/stat; }
set_enabled() {
	sql "ALTER DATABASE bench SET outbox.enabled = $1"
	until [ "$(sql "SELECT state FROM outbox_worker_status() WHERE database = 'bench'")" = "$2" ]; do
		sleep 0.2
	done
}
# the worker publishes what waited, then the tables start empty
settle() {
	wait_drained
	sql "TRUNCATE app_outbox, pgbench_history, outbox_ledger"
	sql "VACUUM ANALYZE" 2>/dev/null
	sql "CHECKPOINT"
}
# one round of a set-up: its tps, transactions and the machine's busy CPU
# added to the set-up's totals
declare -A sum xacts busy
run_round() {
	local setup=$1 script=$2 cpu0 out
	cpu0=$(machine_cpu_ms)
	out=$(pgbench -n -M prepared -T "$ROUND_S" -c 4 -j 2 -s 10 -f "$BENCH/$script" bench 2>"$WORK/pgbench.err")
	busy[$setup]=$((${busy[$setup]:-0} + $(machine_cpu_ms) - cpu0))
	xacts[$setup]=$((${xacts[$setup]:-0} + $(echo "$out" | sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p')))
	sum[$setup]=$((${sum[$setup]:-0} + $(echo "$out" | tps)))
}

worker_ms=0
broker_ms=0
recv_ms=0
events=0
batches=0
for round in $(seq 1 "$ROUNDS"); do
	log "round $round of $ROUNDS"
	set_enabled off disabled
	settle
	run_round outbox tpcb_outbox.sql

	settle
	pg_recvlogical -d bench --slot=bench_slot --create-slot -P pgoutput
	pg_recvlogical -d bench --slot=bench_slot --start -o proto_version=1 \
		-o publication_names=bench_pub -f /dev/null &
	RECV_PID=$!
	until walsender=$(sql "SELECT pid FROM pg_stat_replication WHERE application_name = 'pg_recvlogical'") &&
		[ -n "$walsender" ]; do
		sleep 0.1
	done
	recv0=$(($(cpu_ms $RECV_PID) + $(cpu_ms "$walsender")))
	run_round walsender tpcb_outbox.sql
	# what the round wrote, decoded and sent
	lsn=$(sql "SELECT pg_current_wal_lsn()")
	until [ "$(sql "SELECT sent_lsn >= '$lsn' FROM pg_stat_replication WHERE pid = $walsender")" = t ]; do
		sleep 0.1
	done
	recv_ms=$((recv_ms + $(cpu_ms $RECV_PID) + $(cpu_ms "$walsender") - recv0))
	kill $RECV_PID
	wait $RECV_PID 2>/dev/null || true
	RECV_PID=
	sql "SELECT pg_drop_replication_slot('bench_slot')" >/dev/null

	settle
	run_round off tpcb_enqueue.sql

	set_enabled on idle
	settle
	cpu0=$(worker_cpu_ms)
	broker0=$(cpu_ms $BROKER_PID)
	run_round worker tpcb_enqueue.sql
	wait_drained
	worker_ms=$((worker_ms + $(worker_cpu_ms) - cpu0))
	broker_ms=$((broker_ms + $(cpu_ms $BROKER_PID) - broker0))
	events=$((events + $(sql "SELECT coalesce(sum(cardinality(ids)), 0) FROM outbox_ledger")))
	batches=$((batches + $(sql "SELECT count(*) FROM outbox_ledger")))
done

for s in outbox walsender off worker; do
	printf '%-10s %8d tps\n' "$s" $((sum[$s] / ROUNDS))
done
echo "worker vs walsender: $(ratio "${sum[worker]}" "${sum[walsender]}") (target >= 1.0)"
echo "worker vs off:       $(ratio "${sum[worker]}" "${sum[off]}") (target >= 0.9)"
echo "walsender vs outbox: $(ratio "${sum[walsender]}" "${sum[outbox]}")"
echo "off vs outbox:       $(ratio "${sum[off]}" "${sum[outbox]}")"
per_xact() { awk -v c="$1" -v n="$2" 'BEGIN { printf "%.0f", 1000 * c / n }'; }
echo "machine CPU per transaction (us): $(for s in outbox walsender off worker; do printf '%s %s  ' $s "$(per_xact "${busy[$s]}" "${xacts[$s]}")"; done)"
echo "publishing, CPU per event: walsender + pg_recvlogical $(per_xact "$recv_ms" "${xacts[walsender]}") us; worker $(per_xact "$worker_ms" "$events") + broker $(per_xact "$broker_ms" "$events") us"
echo "worker: $(ratio "$events" "$batches") events per batch, outbox.wake_delay = $(sql 'SHOW outbox.wake_delay')"
