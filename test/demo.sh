#!/bin/bash
#
# A local demo: a PostgreSQL server with the outbox worker, a local
# Kafka-protocol broker (test/mock_broker), events enqueued in transactions,
# and what arrived in Kafka printed with kcat.  Everything is torn down at
# the end, however the demo ends: the server, the broker and the scratch
# directory (unless OUTBOX_WORK named it).  Pass --keep to leave the server
# and the broker running; the demo then says where they and their files are.
#
# As root it first runs test/setup.sh (packages, build, install), then runs
# itself again as the postgres user.

set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)

. "$ROOT/test/common.sh"
become_postgres "$ROOT" test/demo.sh "$@"
WORK=$OUTBOX_WORK
KEEP=${1:-}
PORT=54329
export PGHOST="$WORK" PGPORT=$PORT PGDATABASE=postgres

psql_demo() {
	echo "postgres=# $1"
	psql -X -q -v ON_ERROR_STOP=1 -c "$1"
}

BROKER_PID=
cleanup() {
	local status=$?
	trap - EXIT INT TERM HUP
	if [ "$KEEP" = "--keep" ]; then
		echo "--- left running: psql -h $WORK -p $PORT; broker $BROKERS (pid $BROKER_PID)"
		echo "--- files in $WORK; to end: pg_ctl -D $WORK/data stop; kill $BROKER_PID; rm -rf $WORK"
		return
	fi
	if [ -f "$WORK/data/postmaster.pid" ]; then
		pg_ctl -D "$WORK/data" -m fast -w stop >/dev/null 2>&1 || true
	fi
	if [ -n "$BROKER_PID" ]; then
		kill "$BROKER_PID" 2>/dev/null || true
		wait "$BROKER_PID" 2>/dev/null || true
	fi
	if [ "$OUTBOX_WORK_MADE" = 1 ]; then
		rm -rf "$WORK"
	else
		echo "--- files in $WORK"
	fi
	exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

echo "--- starting a local Kafka-protocol broker"
start_mock_broker "$ROOT" "$WORK"
echo "brokers: $BROKERS"

echo "--- starting PostgreSQL with shared_preload_libraries = 'outbox'"
init_outbox_server "$WORK/data" $PORT postgres
pg_ctl -D "$WORK/data" -l "$WORK/server.log" -w start >/dev/null

psql_demo "CREATE EXTENSION outbox"
psql_demo "CREATE TABLE orders (id int PRIMARY KEY, total numeric)"
psql_demo "BEGIN;
INSERT INTO orders VALUES (1, 9.99);
SELECT outbox_enqueue('orders', '{\"id\": 1, \"total\": 9.99}'::jsonb, key => '1',
                      headers => '{\"source\": \"demo\"}');
COMMIT;"
psql_demo "BEGIN;
INSERT INTO orders VALUES (2, 5.00);
SELECT outbox_enqueue('orders', '{\"id\": 2, \"total\": 5.00}'::jsonb, key => '2');
ROLLBACK;"
psql_demo "SELECT outbox_enqueue('orders', '{\"id\": 1, \"status\": \"shipped\"}'::jsonb, key => '1')"

echo "--- waiting for the worker"
for _ in $(seq 1 100); do
	[ "$(psql -X -At -c "SELECT count(*) FROM outbox_messages WHERE status <> 'published'")" = 0 ] && break
	sleep 0.1
done
psql_demo "SELECT id, topic, key, status, attempts, kafka_partition, kafka_offset,
       published_at - created_at AS latency FROM outbox_messages ORDER BY id"

echo "--- what arrived in Kafka (kcat -C -t orders): partition, offset, key, headers, payload"
kcat -C -q -e -b "$BROKERS" -t orders -f 'partition %p offset %o key %k headers %h\n  %s\n'
echo "--- the rolled-back order 2 never existed, so it never arrived"
