#!/bin/bash
#
# What one captured UPDATE, and one INSERT into a routed outbox table, cost
# the application's backend, in instructions: a figure the machine's load
# does not move.
#
# pgbench's UPDATE of pgbench_accounts (an int key, two ints, a char(84)),
# prepared, N times in one backend (postgres --single, each statement its
# own transaction, data directory in tmpfs, the library preloaded, no
# worker), counted by valgrind's callgrind; the cost of one UPDATE is the
# difference between a run of 3,000 and a run of 1,000, divided by 2,000
# (what a backend costs to start and stop cancels out).  The table
# uncaptured (none), attached with format => 'debezium', with format =>
# 'outbox', and with a PL/pgSQL trigger inserting to_jsonb(NEW) into a side
# table (plpgsql).  The same for a prepared INSERT into an outbox table as
# Debezium's outbox event router reads it (id uuid, aggregatetype,
# aggregateid, type, payload jsonb), without the router (table) and with
# outbox_attach_router() (router, the type column as header eventType).
# With BY_FUNCTION=1, also the functions under the extension's triggers,
# inclusive, per statement (callgrind_annotate of both runs, subtracted).
#
# Usage: [BY_FUNCTION=1] test/bench/capture_instructions.sh [SETUP...]
#	SETUP: none, debezium, outbox, plpgsql, table, router (by default all;
#	debezium, outbox and plpgsql need none, router needs table)
#	(about 5 minutes; needs valgrind)

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

CREATE TABLE outbox (id uuid PRIMARY KEY, aggregatetype varchar(255) NOT NULL,
	aggregateid varchar(255) NOT NULL, type varchar(255) NOT NULL, payload jsonb);

SQL
single bench < "$ROOT/test/bench/capture_side.sql" >/dev/null

# the capture of a set-up, as statements for postgres --single -j
attach() {
	case $1 in
	debezium) echo "SELECT outbox_attach('pgbench_accounts', 'app', format => 'debezium');" ;;
	outbox) echo "SELECT outbox_attach('pgbench_accounts', 'app', format => 'outbox');" ;;
	plpgsql) echo "CREATE TRIGGER capture_side AFTER UPDATE ON pgbench_accounts FOR EACH ROW EXECUTE FUNCTION capture_side();" ;;
	router) echo "SELECT outbox_attach_router('outbox', header_columns => ARRAY['type:eventType']);" ;;
	esac
	echo
}
detach() {
	case $1 in
	debezium | outbox) echo "SELECT outbox_detach('pgbench_accounts');" ;;
	plpgsql) echo "DROP TRIGGER capture_side ON pgbench_accounts;" ;;
	router) echo "SELECT outbox_detach('outbox');" ;;
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

# inserts N: N prepared INSERTs of events into the outbox table, from a
# fixed seed
inserts() {
	awk -v n="$1" 'BEGIN {
		srand(1)
		print "PREPARE i(uuid, varchar, varchar, varchar, jsonb) AS INSERT INTO outbox VALUES ($1, $2, $3, $4, $5);\n"
		for (i = 0; i < n; i++)
		{
			order = 1 + int(rand() * 100000)
			printf "EXECUTE i(\x27%08x-%04x-4%03x-8%03x-%06x%06x\x27, \x27Order\x27, \x27%d\x27, \x27OrderCreated\x27, ", i, int(rand() * 65536), int(rand() * 4096), int(rand() * 4096), int(rand() * 2^24), int(rand() * 2^24), order
			printf "\x27{\"id\": %d, \"customerId\": %d, \"orderDate\": \"2026-11-27T12:00:00Z\", \"lineItems\": [{\"item\": \"Debezium in Action\", \"quantity\": %d, \"totalPrice\": %d.90}]}\x27);\n\n", order, 1 + int(rand() * 1000), 1 + int(rand() * 5), 10 + int(rand() * 90)
		}
	}'
}

# instructions SETUP N: what a backend runs for N statements of SETUP
instructions() {
	{ attach "$1"; echo "CHECKPOINT;"; echo; } | single bench >/dev/null
	case $1 in
	table | router) inserts "$2" ;;
	*) updates "$2" ;;
	esac > "$WORK/statements.sql"
	valgrind --tool=callgrind --callgrind-out-file="$WORK/callgrind.$1.$2" \
		postgres --single -j -D "$DATA" bench < "$WORK/statements.sql" > "$WORK/single.out" 2>&1
	if grep -q ERROR "$WORK/single.out"; then
		grep -m1 ERROR "$WORK/single.out" >&2
		exit 1
	fi
	{ detach "$1"; echo "TRUNCATE capture_side, outbox, outbox_log;"; echo; } | single bench >/dev/null
	sed -n 's/^summary: *\([0-9]*\).*/\1/p; s/^totals: *\([0-9]*\).*/\1/p' "$WORK/callgrind.$1.$2" | head -1
}

# each set-up's statement, and the set-up it is compared with
declare -A statement=([none]=UPDATE [debezium]=UPDATE [outbox]=UPDATE [plpgsql]=UPDATE
	[table]=INSERT [router]=INSERT)
declare -A base=([debezium]=none [outbox]=none [plpgsql]=none [router]=table)
if [ $# -eq 0 ]; then
	set -- none debezium outbox plpgsql table router
fi
for setup in "$@"; do
	if [ -z "${statement[$setup]:-}" ]; then
		echo "test/bench/capture_instructions.sh: unknown set-up $setup" >&2
		exit 1
	fi
done

declare -A per_statement
for setup in "$@"; do
	small=$(instructions "$setup" 1000)
	large=$(instructions "$setup" 3000)
	per_statement[$setup]=$(((large - small) / 2000))
done
for setup in "$@"; do
	b=${base[$setup]:-}
	if [ -z "$b" ] || [ -z "${per_statement[$b]:-}" ]; then
		printf '%-9s %8d instructions per %s\n' "$setup" "${per_statement[$setup]}" "${statement[$setup]}"
		continue
	fi
	printf '%-9s %8d instructions per %s, %8d more than %s (x %s)\n' "$setup" "${per_statement[$setup]}" \
		"${statement[$setup]}" $((per_statement[$setup] - per_statement[$b])) "$b" \
		"$(awk -v a="${per_statement[$setup]}" -v b="${per_statement[$b]}" 'BEGIN { printf "%.2f", a / b }')"
done

# the functions, inclusive, per statement: the run of 3,000 less that of 1,000
if [ -n "${BY_FUNCTION:-}" ]; then
	for setup in "$@"; do
		case $setup in
		debezium | outbox | router) ;;
		*) continue ;;
		esac
		echo "$setup: functions, inclusive instructions per ${statement[$setup]} (of ${per_statement[$setup]})"
		for n in 1000 3000; do
			callgrind_annotate --inclusive=yes --auto=no --threshold=100 "$WORK/callgrind.$setup.$n" 2>/dev/null |
				sed -n 's/^ *\([0-9,]*\) ([ 0-9.]*%) *\(.*\)$/\1 \2/p' | tr -d ',' > "$WORK/inclusive.$n"
		done
		awk 'NR == FNR { small[$2] = $1; next }
			{ d = ($1 - small[$2]) / 2000; if (d >= 300) printf "%9d  %s\n", d, $2 }' \
			"$WORK/inclusive.1000" "$WORK/inclusive.3000" | sort -rn | head -"${BY_FUNCTION_LINES:-120}"
	done
fi
