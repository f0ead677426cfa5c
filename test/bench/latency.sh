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
# Usage: [BASELINE_BINDIR=DIR] test/bench/latency.sh [RATE_S [ROUNDS]]	(15 s, 3; about 5 minutes with a baseline)

PORT=54347
. "$(dirname "$0")/common.sh" "$@"
RATE_S=${1:-15}
ROUNDS=${2:-3}
BUILDS=ours
[ -n "${BASELINE_BINDIR:-}" ] && BUILDS="ours baseline"

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
	PATH="$bindir:$PATH" PORT=${port_of[$build]} start_server "$data" bench \
		"shared_buffers = '1GB'" "max_wal_size = '8GB'" "checkpoint_timeout = '30min'" \
		"track_commit_timestamp = on"
	PGPORT=${port_of[$build]} bench_database bench
	PGPORT=${port_of[$build]} sql "SELECT outbox_enqueue('orders', '{}'::jsonb)" >/dev/null
	log "$build: $bindir, data directory in $data (tmpfs)"
done
log "load average: $(cut -d' ' -f1-3 /proc/loadavg)"

# round BUILD SCRIPT TX_PER_S: pgbench at a fixed rate for RATE_S against
# BUILD's server; adds to its sums (CPU, events, batches, kept tps, the
# application's slowest transaction) and its latencies to bench_latency
declare -A cpu events batches kept app_max
round() {
	local cpu0 cpu1 events1 ids0
	export PGPORT=${port_of[$1]}
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
	app_max[$1]=$(awk -v a="${app_max[$1]:-0}" -v b="$(cat "$WORK/app_max")" 'BEGIN { print (b > a) ? b : a }')
	copy_latencies "l.id > $ids0"
	log "  $1: p50/p99 $(sql "SELECT round(percentile_cont(0.5) WITHIN GROUP (ORDER BY ms)::numeric, 1) || ' / ' ||
									round(percentile_cont(0.99) WITHIN GROUP (ORDER BY ms)::numeric, 1)
							   FROM bench_latency WHERE id > $ids0") ms, $(awk -v c="$cpu1" -v n="$events1" 'BEGIN { printf "%.1f", 1000 * c / n }') us CPU/event"
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
	for r in $(seq 1 "$ROUNDS"); do
		order=$BUILDS
		[ $((r % 2)) = 0 ] && order=$(tr ' ' '\n' <<<"$BUILDS" | tac | tr '\n' ' ')
		for build in $order; do
			round "$build" "$2" "$3"
			load="$load $(cut -d' ' -f1 /proc/loadavg)"
		done
	done
	for build in $BUILDS; do
		export PGPORT=${port_of[$build]}
		read -r p50 p99 max _ <<<"$(latencies)"
		p50_of[$1:$build]=$p50
		p99_of[$1:$build]=$p99
		us_of[$1:$build]=$(awk -v c="${cpu[$build]}" -v n="${events[$build]}" 'BEGIN { printf "%.1f", 1000 * c / n }')
		printf '%-15s %-8s kept %5s tx/s  latency p50 %4s  p99 %4s  max %5s ms (app slowest %s ms)  worker %5s us CPU/event, %5s events/batch\n' \
			"$1" "$build" "$(median <<<"${kept[$build]}")" "${p50_of[$1:$build]}" "${p99_of[$1:$build]}" "$max" \
			"${app_max[$build]}" "${us_of[$1:$build]}" "$(ratio "${events[$build]}" "${batches[$build]}")" >&2
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
		;;
	*)
		result "latency p99 (ms), $1" "${p99_of[$1:ours]}" "$b99" "${p99_of[$1:ours]}" "<= 5"
		if [ "$bus" = - ]; then
			result "worker CPU per event (us), $1" "$us" - - -
		else
			result "worker CPU per event (us), $1" "$us" "$bus" "$(ratio "$us" "$bus")" "<= 1.0"
		fi
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
