#!/bin/bash
#
# What capturing row changes costs the application, beside what a Debezium
# connector costs the server.  pgbench's tpcb-like transaction (3 updates
# and 1 insert, every one captured: 4 changes), 4 clients, prepared
# protocol, ROUNDS interleaved rounds of ROUND_S seconds of each set-up, in
# one server (wal_level = logical for all; its data directory in tmpfs, so
# that the figures are the CPU's, not the disk's); pgbench_history has a
# bigserial primary key.  The set-ups:
#
#   none       nothing captured
#   walsender  a pgoutput slot on a publication of the four tables, streamed
#              by pg_recvlogical (what a Debezium connector costs the server)
#   debezium   outbox_attach(t, 'app', format => 'debezium') on the four
#              tables, the worker publishing to the local broker
#   outbox     the same with format => 'outbox'
#   plpgsql    a PL/pgSQL AFTER ROW trigger on the four tables inserting
#              to_jsonb(NEW) into a side table, nothing reading it
#              (capture_side.sql)
#
# Reported: the application's tps of each set-up and their ratios (target:
# debezium and outbox >= 1.0 x walsender); the CPU per transaction of the
# application's backends (counted by the postmaster once they exit: what
# other processes on the machine do not add to) and of the whole machine
# (/proc/stat); the CPU per change of the publishing side (the
# walsender and pg_recvlogical; the worker, its main thread and its
# librdkafka threads apart, and the test broker) and the changes a batch;
# what 1.0 x the walsender leaves a change of the machine's CPU, and how
# much of it the transport alone (librdkafka's threads and the broker)
# spends.  Then, deterministic, the WAL per captured change:
# WAL_XACTS transactions of one client from a fixed seed, after a
# checkpoint, with the worker disabled and full_page_writes off (full-page
# images follow the checkpoints, not the changes), of each set-up less that
# of none; and the part of it that is the rows and index entries of the
# extension's log (pg_waldump).
#
# With PERF=DIR, one more round of debezium and of outbox at the end, the
# application's backends recorded by perf (cpu-clock, call graphs) into
# DIR/debezium.data and DIR/outbox.data, the worker (its threads included)
# into DIR/debezium-worker.data and DIR/outbox-worker.data; their tps are
# not reported.
#
# Usage: [WAKE_DELAY=3ms] [PERF=DIR] test/bench/capture_cost.sh [ROUND_S [ROUNDS [WAL_XACTS]]]
#	(12 s, 3 rounds, 2,000 transactions: about 7 minutes)

set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/test/common.sh"
become_postgres "$ROOT" test/bench/capture_cost.sh "$@"
WORK=$OUTBOX_WORK
ROUND_S=${1:-12}
ROUNDS=${2:-3}
WAL_XACTS=${3:-2000}
PORT=54346
TABLES="pgbench_accounts pgbench_branches pgbench_tellers pgbench_history"
CHANGES_PER_XACT=4
SETUPS="none walsender debezium outbox plpgsql"
export PGHOST="$WORK" PGPORT=$PORT

log() { echo "[$(date +%T)] $*" >&2; }
sql() { psql -X -q -At -v ON_ERROR_STOP=1 -d bench -c "$1"; }

DATA=$(mktemp -d /dev/shm/outbox_capture.XXXXXX)
start_mock_broker "$ROOT" "$WORK"
init_outbox_server "$DATA" $PORT bench
# each round starts with a checkpoint and writes less than max_wal_size
cat >> "$DATA/postgresql.conf" <<CONF
shared_buffers = '2GB'
max_wal_size = '3GB'
checkpoint_timeout = '30min'
wal_level = logical
${WAKE_DELAY:+outbox.wake_delay = '$WAKE_DELAY'}
CONF
pg_ctl -D "$DATA" -l "$WORK/server.log" -w start >/dev/null
RECV_PID=
trap 'kill $RECV_PID 2>/dev/null || true; pg_ctl -D "$DATA" -m immediate -w stop >/dev/null 2>&1; rm -rf "$DATA"; kill $BROKER_PID 2>/dev/null' EXIT
createdb bench
sql "CREATE EXTENSION outbox"
pgbench -i -q -s 10 bench >/dev/null 2>&1
psql -X -q -v ON_ERROR_STOP=1 -d bench <<'SQL'
ALTER TABLE pgbench_history ADD COLUMN hid bigserial PRIMARY KEY;
CREATE PUBLICATION capture_pub
	FOR TABLE pgbench_accounts, pgbench_branches, pgbench_tellers, pgbench_history;
SQL
psql -X -q -v ON_ERROR_STOP=1 -d bench -f "$ROOT/test/bench/capture_side.sql"

# the captures of a set-up, put on the four tables and taken off
attach() {
	local t
	for t in $TABLES; do
		case $1 in
		debezium) sql "SELECT outbox_attach('$t', 'app', format => 'debezium')" ;;
		outbox) sql "SELECT outbox_attach('$t', 'app', format => 'outbox')" ;;
		plpgsql) sql "CREATE TRIGGER capture_side AFTER INSERT OR UPDATE ON $t
					  FOR EACH ROW EXECUTE FUNCTION capture_side()" ;;
		esac
	done >/dev/null
}
detach() {
	local t
	for t in $TABLES; do
		case $1 in
		debezium | outbox) sql "SELECT outbox_detach('$t')" ;;
		plpgsql) sql "DROP TRIGGER capture_side ON $t" ;;
		esac
	done >/dev/null
}

worker_pid() { sql "SELECT pid FROM outbox_worker_status() WHERE database = 'bench'"; }
# CPU in ms (clock ticks of 10 ms) of a process, its threads included
cpu_ms_of() { awk '{ print ($14 + $15) * 10 }' "/proc/$1/stat"; }
# the same of its main thread alone (the worker's, less librdkafka's threads)
main_ms_of() { awk '{ print ($14 + $15) * 10 }' "/proc/$1/task/$1/stat"; }
# busy CPU of the whole machine, in ms
machine_cpu_ms() { awk '/^cpu / { print ($2 + $3 + $4 + $7 + $8) * 10 }' /proc/stat; }
# CPU in ms of the server's processes that have exited (the postmaster's
# children reaped: the application's backends once pgbench has gone)
POSTMASTER=$(head -1 "$DATA/postmaster.pid")
exited_ms() { awk '{ print ($16 + $17) * 10 }' "/proc/$POSTMASTER/stat"; }
set_enabled() {
	sql "ALTER DATABASE bench SET outbox.enabled = $1"
	until [ "$(sql "SELECT state FROM outbox_worker_status() WHERE database = 'bench'")" = "$2" ]; do
		sleep 0.2
	done
}
drained() { [ "$(sql "SELECT count(*) FROM outbox_unread_topics()")" = 0 ]; }
# the tables as they were, what the last round wrote gone
settle() {
	sql "TRUNCATE pgbench_history, capture_side, outbox_ledger"
	sql "VACUUM ANALYZE" 2>/dev/null
	sql "CHECKPOINT"
}
# one round of a set-up: its tps, transactions, the machine's busy CPU and
# that of the application's backends added to the set-up's totals
declare -A sum xacts busy backends
run_round() {
	local setup=$1 cpu0 exited0 out
	cpu0=$(machine_cpu_ms)
	exited0=$(exited_ms)
	out=$(pgbench -n -b tpcb-like -M prepared -T "$ROUND_S" -c 4 -j 2 bench 2>"$WORK/pgbench.err")
	busy[$setup]=$((${busy[$setup]:-0} + $(machine_cpu_ms) - cpu0))
	until [ "$(sql "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pgbench'")" = 0 ]; do
		sleep 0.1
	done
	sleep 0.2
	backends[$setup]=$((${backends[$setup]:-0} + $(exited_ms) - exited0))
	xacts[$setup]=$((${xacts[$setup]:-0} + $(echo "$out" | sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p')))
	sum[$setup]=$((${sum[$setup]:-0} + $(echo "$out" | sed -n 's/^tps = \([0-9]*\).*/\1/p')))
}

# the publishing side's CPU (ms) and the changes it published, by set-up
declare -A pub_ms pub_main_ms pub_broker_ms published batches
set_enabled on idle
for round in $(seq 1 "$ROUNDS"); do
	log "round $round of $ROUNDS"
	for setup in $SETUPS; do
		settle
		case $setup in
		none | plpgsql)
			attach $setup
			run_round $setup
			detach $setup
			;;
		walsender)
			pg_recvlogical -d bench --slot=capture_slot --create-slot -P pgoutput
			pg_recvlogical -d bench --slot=capture_slot --start -o proto_version=1 \
				-o publication_names=capture_pub -f /dev/null &
			RECV_PID=$!
			until walsender=$(sql "SELECT pid FROM pg_stat_replication WHERE application_name = 'pg_recvlogical'") &&
				[ -n "$walsender" ]; do
				sleep 0.1
			done
			recv0=$(($(cpu_ms_of $RECV_PID) + $(cpu_ms_of "$walsender")))
			run_round walsender
			# what the round wrote, decoded and sent
			lsn=$(sql "SELECT pg_current_wal_lsn()")
			until [ "$(sql "SELECT sent_lsn >= '$lsn' FROM pg_stat_replication WHERE pid = $walsender")" = t ]; do
				sleep 0.1
			done
			pub_ms[walsender]=$((${pub_ms[walsender]:-0} + $(cpu_ms_of $RECV_PID) + $(cpu_ms_of "$walsender") - recv0))
			kill $RECV_PID
			wait $RECV_PID 2>/dev/null || true
			RECV_PID=
			sql "SELECT pg_drop_replication_slot('capture_slot')" >/dev/null
			;;
		debezium | outbox)
			attach $setup
			worker=$(worker_pid)
			cpu0=$(cpu_ms_of "$worker")
			main0=$(main_ms_of "$worker")
			broker0=$(cpu_ms_of $BROKER_PID)
			run_round $setup
			until drained; do sleep 0.2; done
			pub_ms[$setup]=$((${pub_ms[$setup]:-0} + $(cpu_ms_of "$worker") - cpu0))
			pub_main_ms[$setup]=$((${pub_main_ms[$setup]:-0} + $(main_ms_of "$worker") - main0))
			pub_broker_ms[$setup]=$((${pub_broker_ms[$setup]:-0} + $(cpu_ms_of $BROKER_PID) - broker0))
			read -r round_published round_batches <<<"$(sql "SELECT coalesce(sum(cardinality(ids)), 0) || ' ' || count(*) FROM outbox_ledger")"
			published[$setup]=$((${published[$setup]:-0} + round_published))
			batches[$setup]=$((${batches[$setup]:-0} + round_batches))
			detach $setup
			;;
		esac
	done
done

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
per_xact() { awk -v c="$1" -v n="$2" 'BEGIN { printf "%.0f", 1000 * c / n }'; }
per_change() { awk -v c="$1" -v n="$2" 'BEGIN { printf "%.1f", 1000 * c / n }'; }
echo "tpcb-like, 4 clients, prepared, $ROUNDS rounds of $ROUND_S s; load average $(cut -d' ' -f1-3 /proc/loadavg)"
for s in $SETUPS; do
	printf '%-10s %8d tps  vs none %s  vs walsender %s  CPU per transaction: backends %s us, machine %s us\n' \
		$s $((sum[$s] / ROUNDS)) "$(ratio "${sum[$s]}" "${sum[none]}")" \
		"$(ratio "${sum[$s]}" "${sum[walsender]}")" \
		"$(per_xact "${backends[$s]}" "${xacts[$s]}")" "$(per_xact "${busy[$s]}" "${xacts[$s]}")"
done
echo "debezium vs walsender: $(ratio "${sum[debezium]}" "${sum[walsender]}") (target >= 1.0)"
echo "outbox vs walsender:   $(ratio "${sum[outbox]}" "${sum[walsender]}") (target >= 1.0)"
echo "publishing, CPU per change: walsender + pg_recvlogical $(per_change "${pub_ms[walsender]}" $((xacts[walsender] * CHANGES_PER_XACT))) us"
for s in debezium outbox; do
	echo "  $s: worker $(per_change "${pub_ms[$s]}" "${published[$s]}") us (its main thread $(per_change "${pub_main_ms[$s]}" "${published[$s]}")," \
		"librdkafka's threads $(per_change $((pub_ms[$s] - pub_main_ms[$s])) "${published[$s]}")) + broker $(per_change "${pub_broker_ms[$s]}" "${published[$s]}") us;" \
		"$(awk -v n="${published[$s]}" -v b="${batches[$s]}" 'BEGIN { printf "%.0f", n / b }') changes a batch"
done
# What 1.0 x the walsender leaves a captured change: the machine's CPU
# per change that the walsender's set-up adds to nothing captured.  Of it,
# the transport (librdkafka's threads and the broker) is what any design
# publishing from inside the server spends, capture and queue aside.
budget=$(awk -v w="${busy[walsender]}" -v wx="${xacts[walsender]}" -v n="${busy[none]}" -v nx="${xacts[none]}" \
	-v c=$CHANGES_PER_XACT 'BEGIN { printf "%.1f", 1000 * (w / wx - n / nx) / c }')
echo "budget per change at 1.0 x walsender: $budget us of the machine's CPU; the transport alone spends" \
	"$(per_change $((pub_ms[debezium] - pub_main_ms[debezium] + pub_broker_ms[debezium])) "${published[debezium]}") us (debezium)," \
	"$(per_change $((pub_ms[outbox] - pub_main_ms[outbox] + pub_broker_ms[outbox])) "${published[outbox]}") us (outbox)"

# WAL per captured change: the same transactions from the same seed, after
# a checkpoint, the worker disabled (its own WAL is not the change's)
log "WAL of $WAL_XACTS transactions per set-up"
set_enabled off disabled
sql "ALTER SYSTEM SET full_page_writes = off"
sql "SELECT pg_reload_conf()" >/dev/null
# the files of the log tables and their indexes, as pg_waldump names them
log_files=$(sql "SELECT string_agg(pg_relation_filenode(c.oid)::text, '|')
	FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
	WHERE n.nspname = (SELECT extnamespace::regnamespace::text FROM pg_extension WHERE extname = 'outbox')
	  AND (c.relname ~ '^outbox_log_[0-9]' )")
declare -A wal log_wal
for setup in none debezium outbox plpgsql none2; do
	s=${setup%2}
	settle
	attach $s
	sql "CHECKPOINT"
	lsn0=$(sql "SELECT pg_current_wal_insert_lsn()")
	pgbench -n -b tpcb-like -M prepared -t "$WAL_XACTS" -c 1 --random-seed=1 bench >/dev/null 2>"$WORK/pgbench.err"
	lsn1=$(sql "SELECT pg_current_wal_insert_lsn()")
	detach $s
	wal[$setup]=$(sql "SELECT pg_wal_lsn_diff('$lsn1', '$lsn0')::bigint")
	# the records on the log's files: their total length
	log_wal[$setup]=$(pg_waldump -p "$DATA/pg_wal" -s "$lsn0" -e "$lsn1" 2>/dev/null |
		awk -v files="$log_files" '$0 ~ ("rel [0-9]+/[0-9]+/(" files ") ") {
			if (match($0, /len \(rec\/tot\): *[0-9]+\/ *[0-9]+/)) {
				split(substr($0, RSTART, RLENGTH), f, "/"); t += f[3]
			}
		} END { print t + 0 }')
done
sql "ALTER SYSTEM RESET full_page_writes"
sql "SELECT pg_reload_conf()" >/dev/null
changes=$((WAL_XACTS * CHANGES_PER_XACT))
echo "WAL, $WAL_XACTS transactions of 1 client (full_page_writes off), bytes per transaction:" \
	"none $((wal[none] / WAL_XACTS)) (again at the end: $((wal[none2] / WAL_XACTS)))"
for s in debezium outbox plpgsql; do
	printf '%-10s %6d B per transaction, %5d B per captured change more than none (%d B of them the log'"'"'s rows and index entries)\n' \
		$s $((wal[$s] / WAL_XACTS)) $(((wal[$s] - wal[none]) / changes)) $((log_wal[$s] / changes))
done

# the profile: the backends of one more round of each format, recorded
# once pgbench has connected them
if [ -n "${PERF:-}" ]; then
	set_enabled on idle
	for setup in debezium outbox; do
		settle
		attach $setup
		pgbench -n -b tpcb-like -M prepared -T "$ROUND_S" -c 4 -j 2 bench >/dev/null 2>"$WORK/pgbench.err" &
		bench_pid=$!
		until pids=$(sql "SELECT string_agg(pid::text, ',') FROM pg_stat_activity WHERE application_name = 'pgbench'") &&
			[ "$(echo "$pids" | tr ',' '\n' | grep -c .)" = 4 ]; do
			sleep 0.1
		done
		perf record -q -e cpu-clock -g -p "$(worker_pid)" -o "$PERF/$setup-worker.data" -- sleep $((ROUND_S - 2)) 2>/dev/null &
		perf_worker=$!
		perf record -q -e cpu-clock -g -p "$pids" -o "$PERF/$setup.data" -- sleep $((ROUND_S - 2)) 2>/dev/null
		wait $bench_pid
		until drained; do sleep 0.2; done
		detach $setup
		wait $perf_worker
		log "perf of $setup's backends in $PERF/$setup.data, of the worker in $PERF/$setup-worker.data"
	done
fi
