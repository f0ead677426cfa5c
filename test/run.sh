#!/bin/bash
#
# Run every test suite against the installed extension:
#
# 1. make installcheck (pg_regress: sql/, isolation: specs/) against a
#    server started the way the README says: the library preloaded, its
#    worker running, a local Kafka-protocol broker;
# 2. the TAP tests (t/), each with servers and brokers of its own.
#
# The last line printed is "N passed, N failed"; the exit status is 0 only
# if none failed.  Nothing is left running, however the run ends (an
# interrupt, a signal): servers stopped, brokers ended.  The logs stay in
# the scratch directory, which the last lines name.
#
# Usage: test/run.sh [TAP test files...]	(with files: those tests only)
#        test/run.sh installcheck		(pg_regress and isolation only)
#
# As root (CI, a fresh machine) it first runs test/setup.sh: packages, build,
# install.  PostgreSQL refuses to run as root, so it then runs itself again
# as the postgres user, in a scratch directory that user owns.

set -u

ROOT=$(cd "$(dirname "$0")/.." && pwd)

# test files, made relative to the repository
TESTS=()
ONLY_INSTALLCHECK=
if [ "${1:-}" = installcheck ]; then
	ONLY_INSTALLCHECK=1
	shift
fi
for t in "$@"; do
	TESTS+=("$(realpath --relative-to="$ROOT" "$t")")
done
set -- "${TESTS[@]}"

. "$ROOT/test/common.sh"
become_postgres "$ROOT" test/run.sh ${ONLY_INSTALLCHECK:+installcheck} "$@" || { echo "0 passed, 1 failed"; exit 1; }
WORK=$OUTBOX_WORK
PGXS_DIR=$(cd "$(dirname "$(pg_config --pgxs)")/../.." && pwd)
PORT=54331

passed=0
failed=0

# Nothing left behind, however the run ends: the TAP tests, told to stop,
# stop their servers and brokers (t/OutboxTest.pm); then any server of
# this run still up, and the installcheck's broker.
BROKER_PID=
cleanup() {
	local prove tests test running data
	trap - EXIT
	for prove in $(pgrep -P $$ -x prove); do
		tests=$(pgrep -P "$prove")
		kill -TERM $tests "$prove" 2>/dev/null
		for _ in $(seq 1 100); do
			running=0
			for test in $tests; do
				kill -0 "$test" 2>/dev/null && running=1
			done
			[ "$running" = 0 ] && break
			sleep 0.1
		done
	done
	for data in "$WORK"/installcheck/data "$WORK"/tap/tmp_check/*_data/pgdata; do
		[ -f "$data/postmaster.pid" ] &&
			pg_ctl -D "$data" -m immediate -w stop >/dev/null 2>&1
	done
	if [ -n "$BROKER_PID" ]; then
		kill "$BROKER_PID" 2>/dev/null
		wait "$BROKER_PID" 2>/dev/null
	fi
}
trap cleanup EXIT

# Count pg_regress's "... ok" and "... FAILED" lines of a suite's output.
count_regress() {
	local out=$1 ok bad
	ok=$(grep -cE '\.\.\. ok' "$out")
	bad=$(grep -cE '\.\.\. (FAILED|failed)' "$out")
	if [ "$ok" = 0 ] && [ "$bad" = 0 ]; then
		bad=1	# the suite did not even start
	fi
	passed=$((passed + ok))
	failed=$((failed + bad))
}

if [ $# -eq 0 ]; then
	echo "=== make installcheck, against a server with the worker"
	mkdir -p "$WORK/installcheck"
	start_mock_broker "$ROOT" "$WORK/installcheck"
	init_outbox_server "$WORK/installcheck/data" $PORT '*'
	# commit_order.spec prepares transactions
	echo "max_prepared_transactions = 10" >> "$WORK/installcheck/data/postgresql.conf"
	pg_ctl -D "$WORK/installcheck/data" -l "$WORK/installcheck/server.log" -w start >/dev/null
	# each suite on its own, so that one's failure does not skip the other;
	# the TAP tests run next, with servers of their own
	for suite in "ISOLATION=" "REGRESS="; do
		PGHOST="$WORK" PGPORT=$PORT PGUSER=postgres \
			make -C "$ROOT" -s installcheck TAP_TESTS= "$suite" 2>&1 | tee "$WORK/installcheck.out"
		count_regress "$WORK/installcheck.out"
	done
	for diffs in "$ROOT/regression.diffs" "$ROOT/output_iso/regression.diffs"; do
		[ -f "$diffs" ] && cat "$diffs"
	done
	# the tests turned the worker off for their databases: none serves them
	workers=$(psql -X -At -h "$WORK" -p $PORT -d postgres -c \
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'outbox worker' AND datname <> 'postgres'")
	if [ "$workers" = 0 ]; then
		passed=$((passed + 1))
	else
		echo "not ok - $workers outbox workers serve the test databases after installcheck"
		failed=$((failed + 1))
	fi
	pg_ctl -D "$WORK/installcheck/data" -m fast -w stop >/dev/null
	kill "$BROKER_PID" 2>/dev/null
	wait "$BROKER_PID" 2>/dev/null
	BROKER_PID=
fi

if [ -n "$ONLY_INSTALLCHECK" ]; then
	echo "$passed passed, $failed failed"
	[ "$failed" = 0 ]
	exit
fi

echo "=== TAP: t"
mkdir -p "$WORK/tap"
cd "$ROOT" || exit 1
if [ $# -eq 0 ]; then
	set -- t/*.pl
fi
TESTDIR="$WORK/tap" PG_REGRESS="$PGXS_DIR/src/test/regress/pg_regress" \
	prove -v -I "$PGXS_DIR/src/test/perl" -I "$ROOT/t" "$@" 2>&1 | tee "$WORK/tap.out"
ok=$(grep -acE '^ *ok [0-9]+' "$WORK/tap.out")
bad=$(grep -acE '^ *not ok [0-9]+' "$WORK/tap.out")
# a script that died after its last assertion counts as one failure
died=$(grep -aE '\(Wstat: [1-9][0-9]* ' "$WORK/tap.out" | grep -c 'Failed: 0)')
if [ "$ok" = 0 ] && [ "$bad" = 0 ]; then
	died=1	# no TAP test ran at all
fi
passed=$((passed + ok))
failed=$((failed + bad + died))

echo "logs: $WORK"
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
