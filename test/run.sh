#!/bin/bash
#
# Run every test suite against the installed extension:
#
# 1. test/layers.sh (the folders of src/ include only downwards),
#    test/packages.sh (the package lists name what the build needs), then
#    make installcheck (pg_regress: sql/, isolation: specs/) against a
#    stock server (a Debian cluster's defaults, the library preloaded, its
#    worker running), then against a server started the way the README
#    says, with a local Kafka-protocol broker and prepared transactions;
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
PORT=${OUTBOX_TEST_PORT:-54331}

passed=0
failed=0

# Nothing left behind, however the run ends: the TAP tests, told to stop,
# stop their servers and brokers (t/OutboxTest.pm); then any server of
# this run still up, and the installcheck's broker.
BROKER_PID=
DATA_DIRS=()
descendants() {
	local child
	for child in $(pgrep -P "$1"); do
		echo "$child"
		descendants "$child"
	done
}
cleanup() {
	local prove tests test running data
	trap - EXIT
	for prove in $(descendants $$ | xargs -r ps -o pid= -o comm= -p | awk '$2 == "prove" { print $1 }'); do
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
	for data in "${DATA_DIRS[@]}" "$WORK"/tap/tmp_check/*_data/pgdata; do
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

# make installcheck against a server of its own in $WORK/$1 ($2 says
# which), the library preloaded and its worker running, made by initdb with
# the options that follow, and the lines of postgresql.conf on stdin; then
# nothing of it may be left: no test database or role, no worker serving
# a database.
installcheck_against() {
	local dir="$WORK/$1" name=$2 left
	shift 2
	echo "=== make installcheck, against $name"
	mkdir -p "$dir"
	initdb -D "$dir/data" "$@" >/dev/null
	cat >> "$dir/data/postgresql.conf"
	cat >> "$dir/data/postgresql.conf" <<CONF
port = $PORT
unix_socket_directories = '$WORK'
listen_addresses = ''
CONF
	DATA_DIRS+=("$dir/data")
	pg_ctl -D "$dir/data" -l "$dir/server.log" -w start >/dev/null
	PGHOST="$WORK" PGPORT=$PORT PGUSER=postgres \
		make -C "$ROOT" -s installcheck 2>&1 | tee "$dir/installcheck.out"
	count_regress "$dir/installcheck.out"
	for diffs in "$ROOT/regression.diffs" "$ROOT/output_iso/regression.diffs"; do
		[ -f "$diffs" ] && cat "$diffs"
	done
	# kept with the server's log
	mv "$ROOT/results" "$ROOT/output_iso" "$ROOT/regression.diffs" "$ROOT/regression.out" "$dir/" 2>/dev/null
	left=$(psql -X -At -h "$WORK" -p $PORT -d postgres -c "
		SELECT string_agg(datname, ' ') FROM pg_database
		 WHERE datname NOT IN ('postgres', 'template0', 'template1')")
	left+=$(psql -X -At -h "$WORK" -p $PORT -d postgres -c "
		SELECT string_agg(' role ' || rolname, '') FROM pg_roles
		 WHERE rolname !~ '^pg_' AND rolname <> 'postgres'")
	left+=$(psql -X -At -h "$WORK" -p $PORT -d postgres -c "
		SELECT string_agg(' an outbox worker of ' || datname, '') FROM pg_stat_activity
		 WHERE backend_type = 'outbox worker' AND datname <> 'postgres'")
	if [ -z "$left" ]; then
		passed=$((passed + 1))
	else
		echo "not ok - installcheck left behind: $left"
		failed=$((failed + 1))
	fi
	pg_ctl -D "$dir/data" -m fast -w stop >/dev/null
}

if [ $# -eq 0 ]; then
	# the layers of src/: no include up, no two files that include each
	# other; the package lists name the libraries the build needs
	for check in layers packages; do
		if "$ROOT/test/$check.sh"; then
			passed=$((passed + 1))
		else
			failed=$((failed + 1))
		fi
	done
	# the server a Debian cluster is (pg_createcluster's initdb options,
	# nothing set but the library), the worker running without a broker:
	# the specs that prepare transactions say they are skipped
	installcheck_against stock "a stock server" --auth-local peer --auth-host scram-sha-256 <<CONF
shared_preload_libraries = 'outbox'
CONF
	# the server the README sets up, with a broker, and prepared
	# transactions for commit_order.spec
	start_mock_broker "$ROOT" "$WORK"
	installcheck_against installcheck "a server with prepared transactions" -A trust <<CONF
shared_preload_libraries = 'outbox'
outbox.brokers = '$BROKERS'
max_prepared_transactions = 10
CONF
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
# The tests mostly wait (for brokers, timeouts, servers): three at a time
# keep the two cores busy.  Those that count what happens within a time
# under load (databases' time slices, a hung cluster's grace) run alone,
# after the others.
ALONE="t/034_hung_cluster.pl t/035_turns.pl t/037_hung_turn.pl"
tap() {
	TESTDIR="$WORK/tap" PG_REGRESS="$PGXS_DIR/src/test/regress/pg_regress" \
		prove -v --timer -I "$PGXS_DIR/src/test/perl" -I "$ROOT/t" "$@"
}
if [ $# -eq 0 ]; then
	# the longest first, so that the jobs end together
	set -- $(printf '%s\n' t/016_hostile.pl t/011_commit_order.pl t/*.pl |
		awk '!seen[$0]++' | grep -vxF -e "${ALONE// /$'\n'}")
	{
		tap -j "${OUTBOX_TAP_JOBS:-3}" "$@"
		# shellcheck disable=SC2086
		tap $ALONE
	} 2>&1 | tee "$WORK/tap.out"
else
	tap -j "${OUTBOX_TAP_JOBS:-3}" "$@" 2>&1 | tee "$WORK/tap.out"
fi
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
