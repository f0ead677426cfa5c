#!/bin/bash
#
# The enqueue against the INSERT users write by hand, in instructions per
# transaction: a figure the machine's load does not move, where their tps
# swing by a third from run to run on a shared 2-core machine.
#
# The application transaction of test/bench/order_*.sql (a business row
# and its event), N times in one backend (postgres --single, data directory
# in tmpfs, the library preloaded, no worker), counted by valgrind's
# callgrind; the cost of one transaction is the difference between a run
# of 3,000 and a run of 1,000, divided by 2,000 (what a backend costs to
# start and stop cancels out).  Simple protocol (statements with their
# values) and prepared (PREPARE, then EXECUTE).  Target: enqueue <=
# INSERT, that is INSERT / enqueue >= 1.0.
#
# Usage: test/bench/enqueue_cost.sh	(about 3 minutes; needs valgrind)

. "$(dirname "$0")/common.sh" "$@"
DATA=$(mktemp -d /dev/shm/outbox_enqueue_cost.XXXXXX)
at_exit 'rm -rf "$DATA"'

if ! command -v valgrind >/dev/null; then
	echo "test/bench/enqueue_cost.sh: valgrind is needed (apt-get install valgrind)" >&2
	exit 1
fi

initdb -D "$DATA" -A trust >/dev/null
echo "shared_preload_libraries = 'outbox'" >> "$DATA/postgresql.conf"
single() { postgres --single -j -D "$DATA" "$@" 2>/dev/null; }
echo "CREATE DATABASE bench;" | single postgres >/dev/null
single bench < "$BENCH/setup.sql" >/dev/null

# transactions KIND MODE N: N application transactions, ids from a fixed
# seed, as statements for postgres --single -j (each ends with ";" and an
# empty line)
transactions() {
	awk -v kind="$1" -v mode="$2" -v n="$3" -v q="'" 'BEGIN {
		srand(1)
		event["enqueue"] = "SELECT outbox_enqueue(" q "orders" q ", bench_payload(%s), key => (%s %% 10000)::text)"
		event["outbox"] = "INSERT INTO app_outbox (topic, key, payload) VALUES (" q "orders" q ", (%s %% 10000)::text, bench_payload(%s))"
		order = "INSERT INTO orders (id, customer, total) VALUES (%s, " q "customer-" q " || (%s %% 1000), 39.98) ON CONFLICT DO NOTHING"
		if (mode == "prepared") {
			printf "PREPARE o(bigint) AS " order ";\n\n", "$1", "$1"
			printf "PREPARE e(bigint) AS " event[kind] ";\n\n", "$1", "$1"
		}
		for (i = 0; i < n; i++) {
			id = int(1 + rand() * 2000000000)
			print "BEGIN;\n"
			if (mode == "prepared")
				printf "EXECUTE o(%d);\n\nEXECUTE e(%d);\n\n", id, id
			else {
				printf order ";\n\n", id, id
				printf event[kind] ";\n\n", id, id
			}
			print "END;\n"
		}
	}'
}

# instructions KIND MODE N: what a backend runs for N transactions
instructions() {
	echo "TRUNCATE orders, app_outbox, outbox_log, outbox_retries, outbox_ledger;" | single bench >/dev/null
	transactions "$1" "$2" "$3" > "$WORK/statements.sql"
	valgrind --tool=callgrind --callgrind-out-file="$WORK/callgrind.$1.$2.$3" \
		postgres --single -j -D "$DATA" bench < "$WORK/statements.sql" > "$WORK/single.out" 2>&1
	if grep -q ERROR "$WORK/single.out"; then
		grep -m1 ERROR "$WORK/single.out" >&2
		exit 1
	fi
	sed -n 's/^summary: *\([0-9]*\).*/\1/p; s/^totals: *\([0-9]*\).*/\1/p' "$WORK/callgrind.$1.$2.$3" | head -1
}

per_transaction() {
	local small large
	small=$(instructions "$1" "$2" 1000)
	large=$(instructions "$1" "$2" 3000)
	echo $(((large - small) / 2000))
}

for mode in simple prepared; do
	e=$(per_transaction enqueue "$mode")
	o=$(per_transaction outbox "$mode")
	printf '%-9s enqueue %8d, INSERT %8d instructions per transaction: INSERT / enqueue %s (target >= 1.0)\n' \
		"$mode" "$e" "$o" "$(awk -v a="$o" -v b="$e" 'BEGIN { printf "%.3f", a / b }')"
done
