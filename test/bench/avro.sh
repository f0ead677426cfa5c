#!/bin/bash
#
# What Avro costs: the same 10-field event on a topic of format avro
# (checked against its schema and encoded at enqueue) and on a topic
# without settings (the jsonb as given), in one server, with the test
# schema registry (test/schema_registry, which installs avsc the first
# time):
#
#   enqueue   pgbench, one event per transaction, 2 clients, prepared,
#             ROUNDS interleaved rounds of ROUND_S seconds per topic: the
#             ratio of their tps; and the backend's CPU per enqueue, from
#             /proc, over ENQUEUE_N events enqueued in one statement
#   drain     DRAIN_N events committed at once: events per second the
#             worker publishes, from the first delivery to the last
#
# Usage: test/bench/avro.sh [ROUND_S [ROUNDS [DRAIN_N]]]	(10 s, 3 rounds, 200000)

PORT=54346
. "$(dirname "$0")/common.sh" "$@"
ROUND_S=${1:-10}
ROUNDS=${2:-3}
DRAIN_N=${3:-200000}
ENQUEUE_N=100000

start_broker
mkfifo "$WORK/registry.in"
"$ROOT/test/schema_registry" < "$WORK/registry.in" > "$WORK/registry.out" 2> "$WORK/registry.err" &
at_exit "kill $! 2>/dev/null"
exec 4> "$WORK/registry.in"
until [ -s "$WORK/registry.out" ]; do sleep 0.1; done
start_server "$WORK/data" bench "shared_buffers = '1GB'" "max_wal_size = '16GB'" \
	"checkpoint_timeout = '30min'" "outbox.schema_registry_url = '$(head -1 "$WORK/registry.out")'"
createdb bench
psql -X -q -v ON_ERROR_STOP=1 -d bench <<'SQL'
CREATE EXTENSION outbox;
-- ten fields: the schema's types, logical ones among them
CREATE FUNCTION bench_event(i bigint) RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
	SELECT jsonb_build_object('order_id', i, 'customer', 'customer-' || (i % 1000),
							  'sku', 'sku-' || (i % 97), 'qty', 2, 'price', 19.99,
							  'total', 39.98, 'currency', 'EUR', 'status', 'PAID',
							  'created_at', '2026-11-24T18:30:00.123Z',
							  'note', CASE WHEN i % 2 = 0 THEN repeat('x', 40) END)
$$;
SELECT outbox_set_topic('bench.avro', format => 'avro', value_schema => '
{"type": "record", "name": "Order", "namespace": "bench", "fields": [
  {"name": "order_id", "type": "long"},
  {"name": "customer", "type": "string"},
  {"name": "sku", "type": "string"},
  {"name": "qty", "type": "int"},
  {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
  {"name": "total", "type": "double"},
  {"name": "currency", "type": {"type": "enum", "name": "Currency", "symbols": ["EUR", "USD"]}},
  {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID"]}},
  {"name": "created_at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
  {"name": "note", "type": ["null", "string"], "default": null}
]}');
SQL
cat > "$WORK/enqueue.sql" <<'SQL'
\set id random(1, 2000000000)
SELECT outbox_enqueue(:topic, bench_event(:id), key => (:id % 10000)::text);
SQL

# the worker has published everything, the log starts empty
settle() {
	wait_drained
	sql "TRUNCATE outbox_ledger" 2>/dev/null || true
	sql "CHECKPOINT"
}
enqueue_tps() {
	pgbench -n -M prepared -T "$ROUND_S" -c 2 -j 2 -D topic="$1" -f "$WORK/enqueue.sql" bench 2>"$WORK/pgbench.err" | tps
}
# cpu_us TOPIC: the backend's CPU time per enqueue, in microseconds, over
# ENQUEUE_N events in one statement
cpu_us() {
	psql -X -q -At -v ON_ERROR_STOP=1 -d bench <<SQL
SELECT pg_backend_pid() AS pid \gset
\setenv BACKEND :pid
\! awk '{ print \$14 + \$15 }' /proc/\$BACKEND/stat > $WORK/cpu0
SELECT count(outbox_enqueue('$1', bench_event(i), key => (i % 10000)::text)) FROM generate_series(1, $ENQUEUE_N) i \g /dev/null
\! awk '{ print \$14 + \$15 }' /proc/\$BACKEND/stat > $WORK/cpu1
SQL
	awk -v a="$(cat "$WORK/cpu0")" -v b="$(cat "$WORK/cpu1")" -v hz="$(getconf CLK_TCK)" -v n=$ENQUEUE_N \
		'BEGIN { printf "%.1f", (b - a) / hz * 1e6 / n }'
}
# drain TOPIC: events per second for the worker to publish DRAIN_N events
# committed at once, from the first delivery to the last
drain() {
	local base
	settle
	base=$(published)
	sql "SELECT count(outbox_enqueue('$1', bench_event(i), key => (i % 10000)::text)) FROM generate_series(1, $DRAIN_N) i" >/dev/null
	publish_rate "$base" "$DRAIN_N"
}

declare -A sum
for round in $(seq 1 "$ROUNDS"); do
	log "round $round of $ROUNDS: enqueue"
	for topic in bench.json bench.avro; do
		settle
		sum[$topic]=$((${sum[$topic]:-0} + $(enqueue_tps $topic)))
	done
done
settle
log "CPU per enqueue, $ENQUEUE_N events"
cpu_json=$(cpu_us bench.json)
cpu_avro=$(cpu_us bench.avro)
bytes=$(sql "SELECT topic, round(avg(length(payload))) FROM outbox_messages WHERE topic LIKE 'bench.%' GROUP BY topic ORDER BY topic" | tr '\n' ' ')
log "drain, $DRAIN_N events each"
drain_json=$(drain bench.json)
drain_avro=$(drain bench.avro)

tps_json=$((${sum[bench.json]} / ROUNDS))
tps_avro=$((${sum[bench.avro]} / ROUNDS))
echo
echo "enqueue, one event per transaction, 2 clients ($ROUNDS rounds of ${ROUND_S}s each):"
printf '  jsonb topic  %6d tps\n  avro topic   %6d tps  (%s of jsonb)\n' "$tps_json" "$tps_avro" \
	"$(awk -v a=$tps_avro -v j=$tps_json 'BEGIN { printf "%.2f", a / j }')"
echo "backend CPU per enqueue ($ENQUEUE_N in one statement): jsonb $cpu_json us, avro $cpu_avro us"
echo "drain ($DRAIN_N events): jsonb $drain_json events/s, avro $drain_avro events/s"
echo "payload bytes (topic|average): $bytes"
