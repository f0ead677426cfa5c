#!/bin/bash
#
# Run every test suite against the installed extension: pg_regress (sql/),
# isolation (specs/) and the TAP tests that need a worker and a broker
# (test/t/).  Each suite starts its own throw-away server.  The last line
# printed is "N passed, N failed"; the exit status is 0 only if none failed.
#
# Usage: test/run.sh [TAP test files...]
#
# As root (CI, a fresh machine) it first runs test/setup.sh: packages, build,
# install.  PostgreSQL refuses to run as root, so it then runs itself again
# as the postgres user, in a scratch directory that user owns.

set -u

ROOT=$(cd "$(dirname "$0")/.." && pwd)

# test files, made relative to the repository
TESTS=()
for t in "$@"; do
	TESTS+=("$(realpath --relative-to="$ROOT" "$t")")
done
set -- "${TESTS[@]}"

. "$ROOT/test/common.sh"
become_postgres "$ROOT" test/run.sh "$@" || { echo "0 passed, 1 failed"; exit 1; }
WORK=$OUTBOX_WORK
BINDIR=$(pg_config --bindir)
PGXS_DIR=$(cd "$(dirname "$(pg_config --pgxs)")/../.." && pwd)
REGRESS_TESTS=$(sed -n 's/^REGRESS = //p' "$ROOT/Makefile")
ISOLATION_TESTS=$(sed -n 's/^ISOLATION = //p' "$ROOT/Makefile")

passed=0
failed=0

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

cd "$WORK" || exit 1

if [ $# -eq 0 ]; then
	echo "=== pg_regress: $REGRESS_TESTS"
	"$PGXS_DIR/src/test/regress/pg_regress" \
		--temp-instance="$WORK/regress-instance" \
		--inputdir="$ROOT" --outputdir="$WORK/regress" \
		--bindir="$BINDIR" --encoding=UTF8 --no-locale $REGRESS_TESTS 2>&1 | tee "$WORK/regress.out"
	count_regress "$WORK/regress.out"
	[ -f "$WORK/regress/regression.diffs" ] && cat "$WORK/regress/regression.diffs"

	echo "=== isolation: $ISOLATION_TESTS"
	"$PGXS_DIR/src/test/isolation/pg_isolation_regress" \
		--temp-instance="$WORK/isolation-instance" \
		--inputdir="$ROOT" --outputdir="$WORK/isolation" \
		--temp-config="$ROOT/specs/temp.conf" \
		--bindir="$BINDIR" $ISOLATION_TESTS 2>&1 | tee "$WORK/isolation.out"
	count_regress "$WORK/isolation.out"
	[ -f "$WORK/isolation/output_iso/regression.diffs" ] && cat "$WORK/isolation/output_iso/regression.diffs"
	[ -f "$WORK/isolation/regression.diffs" ] && cat "$WORK/isolation/regression.diffs"
fi

echo "=== TAP: test/t"
mkdir -p "$WORK/tap"
cd "$ROOT" || exit 1
if [ $# -eq 0 ]; then
	set -- test/t/*.pl
fi
TESTDIR="$WORK/tap" PG_REGRESS="$PGXS_DIR/src/test/regress/pg_regress" \
	OUTBOX_ROOT="$ROOT" \
	prove -v -I "$PGXS_DIR/src/test/perl" -I "$ROOT/test/perl" "$@" 2>&1 | tee "$WORK/tap.out"
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
