#!/bin/bash
#
# What one captured UPDATE costs the application's backend, in
# instructions: a figure the machine's load does not move.
#
# pgbench's UPDATE of pgbench_accounts (an int key, two ints, a char(84)),
# prepared, N times in one backend (postgres --single, each statement its
# own transaction, data directory in tmpfs, the library preloaded, no
# worker), counted by valgrind's callgrind; the cost of one UPDATE is the
# difference between a run of 3,000 and a run of 1,000, divided by 2,000
# (what a backend costs to start and stop cancels out).  The table
# uncaptured, attached with format => 'debezium', with format => 'outbox',
# and with a PL/pgSQL trigger inserting to_jsonb(NEW) into a side table.
# With PROFILE=1, also the functions under the capture trigger, inclusive,
# per UPDATE (callgrind_annotate of both runs, subtracted).
#
# Usage: [PROFILE=1] test/bench/capture_instructions.sh	(about 4 minutes; needs valgrind)

set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/test/common.sh"
become_postgres "$ROOT" test/bench/capture_instructions.sh "$@"
WORK=$OUTBOX_WORK
DATA=$(mktemp -d /dev/shm/outbox_capture_instructions.XXXXXX)
trap 'rm -rf "$DATA"' EXIT

if ! command -v valgrind >/dev/null; then
	echo "test/bench/capture_instructions.sh: valgrind is needed (apt-get install valgrind)" >&2
	exit 1
fi

initdb -D "$DATA" -A trust >/dev/null
echo "shared_preload_libraries = 'outbox'" >> "$DATA/postgresql.conf"
single() { postgres --single -j -D "$DATA" "$@" 2>/dev/null; }
echo "CREATE DATABASE bench;" | single postgres >/dev/null
single bench >/dev/null <<'SQL'
CREATE EXTENSION outbox;

CREATE TABLE pgbench_accounts (aid int PRIMARY KEY, bid int, abalance int, filler char(84))
	WITH (fillfactor = 100);

INSERT INTO pgbench_accounts SELECT a, (a - 1) / 100000 + 1, 0, '' FROM generate_series(1, 100000) a;

VACUUM ANALYZE pgbench_accounts;

SQL
single bench < "$ROOT/test/bench/capture_side.sql" >/dev/null

# the capture of a set-up, as statements for postgres --single -j
attach() {
	case $1 in
	debezium) echo "SELECT outbox_attach('pgbench_accounts', 'app', format => 'debezium');" ;;
	outbox) echo "SELECT outbox_attach('pgbench_accounts', 'app', format => 'outbox');" ;;
	plpgsql) echo "CREATE TRIGGER capture_side AFTER UPDATE ON pgbench_accounts FOR EACH ROW EXECUTE FUNCTION capture_side();" ;;
	esac
	echo
}
detach() {
	case $1 in
	debezium | outbox) echo "SELECT outbox_detach('pgbench_accounts');" ;;
	plpgsql) echo "DROP TRIGGER capture_side ON pgbench_accounts;" ;;
	esac
	echo
}

# updates N: N prepared UPDATEs of accounts from a fixed seed
updates() {
	awk -v n="$1" 'BEGIN {
		srand(1)
		print "PREPARE u(int, int) AS UPDATE pgbench_accounts SET abalance = abalance + $1 WHERE aid = $2;\n"
		for (i = 0; i < n; i++)
			printf "EXECUTE u(%d, %d);\n\n", int(rand() * 10000) - 5000, 1 + int(rand() * 100000)
	}'
}

# instructions SETUP N: what a backend runs for N updates of SETUP
instructions() {
	{ attach "$1"; echo "CHECKPOINT;"; echo; } | single bench >/dev/null
	updates "$2" > "$WORK/statements.sql"
	valgrind --tool=callgrind --callgrind-out-file="$WORK/callgrind.$1.$2" \
		postgres --single -j -D "$DATA" bench < "$WORK/statements.sql" > "$WORK/single.out" 2>&1
	if grep -q ERROR "$WORK/single.out"; then
		grep -m1 ERROR "$WORK/single.out" >&2
		exit 1
	fi
	{ detach "$1"; echo "TRUNCATE capture_side, outbox_log;"; echo; } | single bench >/dev/null
	sed -n 's/^summary: *\([0-9]*\).*/\1/p; s/^totals: *\([0-9]*\).*/\1/p' "$WORK/callgrind.$1.$2" | head -1
}

declare -A per_update
for setup in none debezium outbox plpgsql; do
	small=$(instructions $setup 1000)
	large=$(instructions $setup 3000)
	per_update[$setup]=$(((large - small) / 2000))
done
printf '%-9s %8d instructions per UPDATE\n' none "${per_update[none]}"
for setup in debezium outbox plpgsql; do
	printf '%-9s %8d instructions per UPDATE, %8d more than none (x %s)\n' $setup "${per_update[$setup]}" \
		$((per_update[$setup] - per_update[none])) \
		"$(awk -v a="${per_update[$setup]}" -v b="${per_update[none]}" 'BEGIN { printf "%.2f", a / b }')"
done

# the functions, inclusive, per UPDATE: the run of 3,000 less that of 1,000
if [ -n "${PROFILE:-}" ]; then
	for setup in debezium outbox; do
		echo "$setup: functions, inclusive instructions per UPDATE (of ${per_update[$setup]})"
		for n in 1000 3000; do
			callgrind_annotate --inclusive=yes --auto=no --threshold=100 "$WORK/callgrind.$setup.$n" 2>/dev/null |
				sed -n 's/^ *\([0-9,]*\) ([ 0-9.]*%) *\(.*\)$/\1 \2/p' | tr -d ',' > "$WORK/inclusive.$n"
		done
		awk 'NR == FNR { small[$2] = $1; next }
			{ d = ($1 - small[$2]) / 2000; if (d >= 300) printf "%9d  %s\n", d, $2 }' \
			"$WORK/inclusive.1000" "$WORK/inclusive.3000" | sort -rn | head -"${PROFILE_LINES:-120}"
	done
fi
