#!/bin/bash
#
# The latency from commit to recorded delivery and the worker's CPU per
# event at fixed rates, every outbox.* setting at its default, the data
# directory in tmpfs (pgbench --rate, 4 clients, prepared, RATE_S seconds
# a round):
#
#	500 single-event transactions/s: p50 <= 1 ms, p99 <= 3 ms;
#	2,000 single-event transactions/s and 1,000 transactions/s of 10
#	events (10,000 events/s): p99 <= 5 ms, and the worker's CPU per event
#	(/proc, its librdkafka threads included) no more than the baseline's.
#
# The baseline is another build of the extension (today's main, say),
# installed in a copy of PostgreSQL whose programs are in BASELINE_BINDIR:
#
#	mkdir -p /tmp/base/lib/postgresql /tmp/base/share/postgresql /tmp/src
#	cp -a /usr/lib/postgresql/15 /tmp/base/lib/postgresql/
#	cp -a /usr/share/postgresql/15 /tmp/base/share/postgresql/
#	ln -s /usr/include /tmp/base/include
#	git archive main | tar -x -C /tmp/src
#	PATH=/tmp/base/lib/postgresql/15/bin:$PATH make -C /tmp/src install
#	BASELINE_BINDIR=/tmp/base/lib/postgresql/15/bin test/bench/latency.sh
#
# Its server runs beside this one, on its own tmpfs data directory,
# publishing to the same broker; the rounds of each rate alternate between
# the two, the order swapped each round, so that both see the same load on
# the machine.  The load average is printed with each rate.  Without
# BASELINE_BINDIR, this build alone.
#
# Beside them, the floor a Debezium connector starts from: a third server
# (wal_level = logical, the worker disabled) where the same transactions
# insert the rows of the outbox table users write by hand (insert.sql,
# insert10.sql), read by pg_recvlogical through a test_decoding slot; the
# latency from commit to the moment pg_recvlogical's output is read
# (commit_latency.pl), Kafka not included, and the CPU of the walsender
# and pg_recvlogical per event.  Its rounds are interleaved with the
# others'.
#
# Usage: [BASELINE_BINDIR=DIR] test/bench/latency.sh [RATE_S [ROUNDS]]	(15 s, 3; about 7 minutes with a baseline)

PORT=54347
. "$(dirname "$0")/common.sh" "$@"
RATE_S=${1:-15}
ROUNDS=${2:-3}
BUILDS=ours
[ -n "${BASELINE_BINDIR:-}" ] && BUILDS="ours baseline"
BUILDS="$BUILDS walsender"
LATENCIES=$WORK/walsender_ms	# commit_latency.pl's, all rounds
ROUND_LATENCIES=$WORK/walsender_rate_ms	# those of the rate's rounds

start_broker
declare -A port_of
port=$PORT
for build in $BUILDS; do
	data=$(mktemp -d /dev/shm/outbox_bench.XXXXXX)
	at_exit "rm -rf '$data'"
	port_of[$build]=$port
	port=$((port + 1))
	bindir=$(dirname "$(command -v postgres)")
	[ "$build" = baseline ] && bindir=$BASELINE_BINDIR
	settings=("shared_buffers = '1GB'" "max_wal_size = '8GB'" "checkpoint_timeout = '30min'"
		"track_commit_timestamp = on")
	[ "$build" = walsender ] && settings+=("wal_level = logical" "outbox.enabled = off")
	PATH="$bindir:$PATH" PORT=${port_of[$build]} start_server "$data" bench "${settings[@]}"
	PGPORT=${port_of[$build]} bench_database bench
	if [ "$build" = walsender ]; then
		export PGPORT=${port_of[$build]}
		pg_recvlogical -d bench --slot=latency --create-slot -P test_decoding
		: >"$LATENCIES"
		PGTZ=UTC pg_recvlogical -d bench --slot=latency --start -F 0 \
			-o include-timestamp=on -o skip-empty-xacts=on \
			-f >("$BENCH/commit_latency.pl" >>"$LATENCIES") &
		RECV_PID=$!
		at_exit "kill $RECV_PID 2>/dev/null"
		until WALSENDER_PID=$(sql "SELECT pid FROM pg_stat_replication") && [ -n "$WALSENDER_PID" ]; do
			sleep 0.1
		done
	else
		PGPORT=${port_of[$build]} sql "SELECT outbox_enqueue('orders', '{}'::jsonb)" >/dev/null
	fi
	log "$build: $bindir, data directory in $data (tmpfs)"
done
log "load average: $(cut -d' ' -f1-3 /proc/loadavg)"

# us_per_event CPU_MS EVENTS: microseconds of CPU per event
us_per_event() { awk -v c="$1" -v n="$2" 'BEGIN { printf "%.1f", 1000 * c / n }'; }
# note_app_max BUILD: the application's slowest transaction of BUILD's
# rounds, with the last round's
note_app_max() {
	app_max[$1]=$(awk -v a="${app_max[$1]:-0}" -v b="$(cat "$WORK/app_max")" 'BEGIN { print (b > a) ? b : a }')
}

# round BUILD SCRIPT TX_PER_S: pgbench at a fixed rate for RATE_S against
# BUILD's server; adds to its sums (CPU, events, batches, kept tps, the
# application's slowest transaction) and its latencies to bench_latency
declare -A cpu events batches kept app_max
round() {
	local cpu0 cpu1 events1 ids0
	export PGPORT=${port_of[$1]}
	if [ "$1" = walsender ]; then
		walsender_round "$2" "$3"
		return
	fi
	wait_drained
	sql "TRUNCATE outbox_ledger"
	sql "CHECKPOINT"
	sleep 1
	cpu0=$(worker_cpu_ms)
	ids0=$(sql "SELECT coalesce(max(id), 0) FROM outbox_log")
	kept[$1]="${kept[$1]:-} $(rate_run "$2" "$3" "$RATE_S")"
	wait_drained
	cpu1=$(($(worker_cpu_ms) - cpu0))
	events1=$(sql "SELECT coalesce(sum(cardinality(ids)), 0) FROM outbox_ledger")
	cpu[$1]=$((${cpu[$1]:-0} + cpu1))
	events[$1]=$((${events[$1]:-0} + events1))
	batches[$1]=$((${batches[$1]:-0} + $(sql "SELECT count(*) FROM outbox_ledger")))
	note_app_max "$1"
	copy_latencies "l.id > $ids0"
	log "  $1: p50/p99 $(sql "SELECT round(percentile_cont(0.5) WITHIN GROUP (ORDER BY ms)::numeric, 1) || ' / ' ||
									round(percentile_cont(0.99) WITHIN GROUP (ORDER BY ms)::numeric, 1)
							   FROM bench_latency WHERE id > $ids0") ms, $(us_per_event "$cpu1" "$events1") us CPU/event"
}

# walsender_round SCRIPT TX_PER_S: a round of the walsender reference, the
# same transactions as inserts, its latencies (commit_latency.pl's) added
# to ROUND_LATENCIES
walsender_round() {
	local cpu0 cpu1 lines0 lines1 lsn per_xact=1
	[ "$1" = enqueue10.sql ] && per_xact=10
	sql "CHECKPOINT"
	sleep 1
	lines0=$(wc -l <"$LATENCIES")
	cpu0=$(($(cpu_ms "$WALSENDER_PID") + $(cpu_ms "$RECV_PID")))
	kept[walsender]="${kept[walsender]:-} $(rate_run "${1/enqueue/insert}" "$2" "$RATE_S")"
	lsn=$(sql "SELECT pg_current_wal_lsn()")
	until [ "$(sql "SELECT sent_lsn >= '$lsn' FROM pg_stat_replication")" = t ]; do
		sleep 0.1
	done
	sleep 0.5
	cpu1=$(($(cpu_ms "$WALSENDER_PID") + $(cpu_ms "$RECV_PID") - cpu0))
	lines1=$(wc -l <"$LATENCIES")
	sed -n "$((lines0 + 1)),${lines1}p" "$LATENCIES" >>"$ROUND_LATENCIES"
	cpu[walsender]=$((${cpu[walsender]:-0} + cpu1))
	events[walsender]=$((${events[walsender]:-0} + (lines1 - lines0) * per_xact))
	note_app_max walsender
	log "  walsender: $((lines1 - lines0)) commits read, $(us_per_event "$cpu1" $(((lines1 - lines0) * per_xact))) us CPU/event"
}

# rate NAME SCRIPT TX_PER_S: ROUNDS rounds of each build, interleaved;
# a line of figures per build; leaves p50, p99 and CPU per event in
# p50_of, p99_of, us_of, by "NAME:BUILD"
declare -A p50_of p99_of us_of
rate() {
	local r build order p50 p99 max load=""
	cpu=() events=() batches=() kept=() app_max=()
	for build in $BUILDS; do
		PGPORT=${port_of[$build]} sql "TRUNCATE bench_latency"
	done
	: >"$ROUND_LATENCIES"
	for r in $(seq 1 "$ROUNDS"); do
		order=$BUILDS
		[ $((r % 2)) = 0 ] && order=$(tr ' ' '\n' <<<"$BUILDS" | tac | tr '\n' ' ')
		for build in $order; do
			round "$build" "$2" "$3"
			load="$load $(cut -d' ' -f1 /proc/loadavg)"
		done
	done
	# the walsender's latencies into its own bench_latency, read as ours
	awk '{ print NR "\t" $1 }' "$ROUND_LATENCIES" |
		PGPORT=${port_of[walsender]} psql -X -q -v ON_ERROR_STOP=1 -d bench -c "COPY bench_latency FROM STDIN"
	for build in $BUILDS; do
		export PGPORT=${port_of[$build]}
		read -r p50 p99 max _ <<<"$(latencies)"
		p50_of[$1:$build]=$p50
		p99_of[$1:$build]=$p99
		us_of[$1:$build]=$(us_per_event "${cpu[$build]}" "${events[$build]}")
		printf '%-15s %-9s kept %5s tx/s  latency p50 %4s  p99 %4s  max %5s ms (app slowest %s ms)  ' \
			"$1" "$build" "$(median <<<"${kept[$build]}")" "${p50_of[$1:$build]}" "${p99_of[$1:$build]}" "$max" \
			"${app_max[$build]}" >&2
		if [ "$build" = walsender ]; then
			printf 'walsender + pg_recvlogical %5s us CPU/event\n' "${us_of[$1:$build]}" >&2
		else
			printf 'worker %5s us CPU/event, %5s events/batch\n' \
				"${us_of[$1:$build]}" "$(ratio "${events[$build]}" "${batches[$build]}")" >&2
		fi
	done
	log "$1: load average at the end of each round:$load"
}

# rows NAME: the table's rows of rate NAME (baseline column "-" without
# a baseline)
rows() {
	local b50=${p50_of[$1:baseline]:--} b99=${p99_of[$1:baseline]:--} bus=${us_of[$1:baseline]:--}
	local us=${us_of[$1:ours]}
	case $1 in
	500*)
		result "latency p50 (ms), $1" "${p50_of[$1:ours]}" "$b50" "${p50_of[$1:ours]}" "<= 1"
		result "latency p99 (ms), $1" "${p99_of[$1:ours]}" "$b99" "${p99_of[$1:ours]}" "<= 3"
		result "  worker CPU per event (us)" "$us" "$bus" "-" "-"
		result "  walsender: latency p50 (ms), commit to pg_recvlogical" "${p50_of[$1:walsender]}" - - -
		result "  walsender: latency p99 (ms)" "${p99_of[$1:walsender]}" - - -
		result "  walsender + pg_recvlogical: CPU per event (us)" "${us_of[$1:walsender]}" - - -
		;;
	*)
		result "latency p99 (ms), $1" "${p99_of[$1:ours]}" "$b99" "${p99_of[$1:ours]}" "<= 5"
		if [ "$bus" = - ]; then
			result "worker CPU per event (us), $1" "$us" - - -
		else
			result "worker CPU per event (us), $1" "$us" "$bus" "$(ratio "$us" "$bus")" "<= 1.0"
		fi
		result "  walsender: latency p99 (ms), commit to pg_recvlogical" "${p99_of[$1:walsender]}" - - -
		result "  walsender + pg_recvlogical: CPU per event (us)" "${us_of[$1:walsender]}" - - -
		;;
	esac
}

log "$ROUNDS rounds of ${RATE_S}s per rate and build"
rate "500 tx/s x 1" enqueue.sql 500
rate "2000 tx/s x 1" enqueue.sql 2000
rate "1000 tx/s x 10" enqueue10.sql 1000
log "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
result_header
for name in "500 tx/s x 1" "2000 tx/s x 1" "1000 tx/s x 10"; do
	rows "$name"
done
