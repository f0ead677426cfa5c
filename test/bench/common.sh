# Sourced first thing by each benchmark of test/bench/, with the
# benchmark's arguments:
#
#	PORT=54345	(the benchmark's server; none for a benchmark without one)
#	. "$(dirname "$0")/common.sh" "$@"
#
# Sets the shell's options (set -euo pipefail: a failing command, an unset
# variable or a failing pipe ends the benchmark), runs the benchmark as the
# postgres user (become_postgres, test/common.sh) and sets ROOT (the
# repository), WORK (its scratch directory), BENCH (test/bench), RESULTS
# (the table of results), PGHOST and PGPORT (the server of PORT, on a Unix
# socket in WORK).  What start_broker and start_server start ends with the
# benchmark, however it ends, after what at_exit adds.  The functions
# below are the set-up, the readings (CPU, pgbench, the worker, latencies)
# and the table that the benchmarks share; a benchmark keeps only what it
# measures.

set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/test/common.sh"
become_postgres "$ROOT" "test/bench/$(basename "$0")" "$@"
WORK=$OUTBOX_WORK
BENCH=$ROOT/test/bench
RESULTS=$WORK/results.txt
export PGHOST="$WORK"
if [ -n "${PORT:-}" ]; then
	export PGPORT=$PORT
fi

# --- set-up

# at_exit COMMAND: run COMMAND (a string, evaluated then) when the benchmark
# ends, before what was added earlier
AT_EXIT=()
at_exit() { AT_EXIT=("$1" "${AT_EXIT[@]}"); }
run_at_exit() {
	local command
	for command in "${AT_EXIT[@]}"; do
		eval "$command" || true
	done
}
trap run_at_exit EXIT

log() { echo "[$(date +%T)] $*" >&2; }
now() { date +%s.%N; }

# sql QUERY [DATABASE]: run QUERY in DATABASE (bench), unaligned, tuples only
sql() { psql -X -q -At -v ON_ERROR_STOP=1 -d "${2:-bench}" -c "$1"; }

# start_broker [DIR]: a test broker with its files in DIR ($WORK): sets
# BROKERS and BROKER_PID, its control input on fd 3 (start_mock_broker)
start_broker() {
	start_mock_broker "$ROOT" "${1:-$WORK}"
	at_exit "kill $BROKER_PID 2>/dev/null"
}

# start_server DATADIR DATABASE [SETTING...]: a server on PORT with the
# library preloaded and its worker publishing from DATABASE to $BROKERS
# (init_outbox_server), the settings added to its postgresql.conf, its log
# in $WORK/server.log
start_server() {
	local data=$1 database=$2
	shift 2
	init_outbox_server "$data" "$PORT" "$database"
	printf '%s\n' "$@" >> "$data/postgresql.conf"
	at_exit "pg_ctl -D '$data' -m immediate -w stop >/dev/null 2>&1"
	pg_ctl -D "$data" -l "$WORK/server.log" -w start >/dev/null
}

# bench_database DATABASE: a database with the objects of setup.sql
bench_database() {
	createdb "$1"
	psql -X -q -v ON_ERROR_STOP=1 -d "$1" -f "$BENCH/setup.sql"
}

# --- readings

# cpu_ms PID: the CPU time of a process so far, its threads included, in ms
cpu_ms() { awk -v hz="$(getconf CLK_TCK)" '{ printf "%d\n", ($14 + $15) * 1000 / hz }' "/proc/$1/stat"; }

# the worker of database bench: its process, its CPU time so far (ms), and
# the events it has published since it started (shared memory)
worker_pid() { sql "SELECT pid FROM outbox_worker_status() WHERE database = 'bench'"; }
worker_cpu_ms() { cpu_ms "$(worker_pid)"; }
published() { sql "SELECT published FROM outbox_worker_status() WHERE database = 'bench'"; }

# workers_core_share SECONDS: the CPU time the launcher and every worker
# use over SECONDS, as a share of one core, in percent
workers_core_share() {
	local before after
	before=$(workers_cpu_ms)
	sleep "$1"
	after=$(workers_cpu_ms)
	awk -v ms=$((after - before)) -v s="$1" 'BEGIN { printf "%.2f", ms / 10 / s }'
}
workers_cpu_ms() {
	local total=0 pid
	for pid in $(sql "SELECT pid FROM pg_stat_activity WHERE backend_type IN ('outbox worker', 'outbox launcher')" postgres); do
		total=$((total + $(cpu_ms "$pid" 2>/dev/null || echo 0)))
	done
	echo $total
}

# tps: the transactions per second of pgbench's report on stdin, whole
tps() { sed -n 's/^tps = \([0-9]*\).*/\1/p'; }

# rate_run SCRIPT TX_PER_S SECONDS: pgbench at a fixed rate in "bench";
# prints the transactions per second it kept, and leaves in
# $WORK/app_max the application's own slowest transaction in ms (from its
# start, not from its scheduled time; its COMMIT included): an event
# cannot be published before its commit is on disk and visible, so a
# commit that waits for the disk delays its events as much
rate_run() {
	rm -f "$WORK"/rate_log.*
	pgbench -n -M prepared -R "$2" -T "$3" -c 4 -j 2 -l --log-prefix="$WORK/rate_log" \
		-f "$BENCH/$1" bench 2>"$WORK/pgbench.err" | tps
	cat "$WORK"/rate_log.* | awk '{ t = ($3 - $7) / 1000; if (t > m) m = t } END { printf "%.1f\n", m }' > "$WORK/app_max"
}

# wait_drained [DATABASE]: until nothing is due in DATABASE (bench)
wait_drained() {
	until [ "$(sql "SELECT pending + failed = 0 FROM outbox_stats WHERE topic IS NULL" "${1:-bench}")" = t ]; do
		sleep 0.2
	done
}

# publish_rate BASE COUNT: once the worker has published COUNT events
# past BASE (published), the events per second from the first delivery
# seen to the last
publish_rate() {
	local first="" first_count p t
	while :; do
		p=$(published) t=$(now)
		[ -z "$first" ] && [ "$p" -gt "$1" ] && first=$t first_count=$((p - $1))
		[ "$p" -ge $(($1 + $2)) ] && break
		sleep 0.02
	done
	awk -v n="$(($2 - first_count))" -v s="$first" -v e="$t" 'BEGIN { printf "%.0f", n / (e - s) }'
}

# copy_latencies CONDITION: into bench_latency, the latency of each event
# of the log (l) that CONDITION takes and whose delivery is recorded: from
# the commit of its transaction (its commit timestamp) to the recording of
# the delivery report, in ms; an event copied before is left as it was
copy_latencies() {
	sql "INSERT INTO bench_latency
		 SELECT l.id, 1000 * extract(epoch FROM g.published_at - pg_xact_commit_timestamp(l.txid::xid))
		   FROM outbox_log l
		   JOIN outbox_ledger g ON int8range(g.first_id, g.last_id, '[]') @> l.id AND l.id = ANY (g.ids)
		  WHERE $1
		 ON CONFLICT DO NOTHING"
}

# latencies: "p50 p99 max count" of bench_latency, in ms
latencies() {
	sql "SELECT round(percentile_cont(0.5) WITHIN GROUP (ORDER BY ms)::numeric, 1),
				round(percentile_cont(0.99) WITHIN GROUP (ORDER BY ms)::numeric, 1),
				round(max(ms)::numeric, 1), count(*)
		   FROM bench_latency" | tr '|' ' '
}

# --- figures

# ratio A B: A / B to two places (0 if B is 0)
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b == 0 ? 0 : a / b) }'; }

# median: the median of the numbers on stdin, one a line or a word
median() { tr ' ' '\n' | sed '/^$/d' | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

# result_header: the header of the table of results, which it starts
# (stderr and $RESULTS); result NAME OURS BASELINE RATIO TARGET: a row of
# it, TARGET ">= 0.95", "<= 10", or "-" for a row that explains another
result_header() {
	printf '%-50s %11s %11s %8s %8s\n' benchmark ours baseline ratio target | tee "$RESULTS" >&2
}
result() {
	local verdict
	verdict=$(awk -v r="$4" -v t="$5" 'BEGIN { split(t, a, " "); print (t == "-") ? "-" : ((a[1] == ">=" && r >= a[2]) || (a[1] == "<=" && r <= a[2])) ? "pass" : "MISS" }')
	printf '%-50s %11s %11s %8s %8s  %s\n' "$1" "$2" "$3" "$4" "$5" "$verdict" | tee -a "$RESULTS" >&2
}
