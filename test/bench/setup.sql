-- Objects the benchmarks use, in each benchmark database.
CREATE EXTENSION outbox;

-- about 200 bytes of JSON
CREATE FUNCTION bench_payload(i bigint) RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
	SELECT jsonb_build_object('order_id', i, 'customer', 'customer-' || (i % 1000),
							  'items', jsonb_build_array(jsonb_build_object('sku', 'sku-' || (i % 97),
																			'qty', 2, 'price', 19.99)),
							  'total', 39.98, 'currency', 'EUR', 'status', 'paid',
							  'note', repeat('x', 40))
$$;

-- the business table of the enqueue benchmark
CREATE TABLE orders (id bigint PRIMARY KEY, customer text, total numeric,
					 created_at timestamptz DEFAULT now());

-- a plain copy of a log table, for the plain INSERT baseline: same
-- columns, same indexes, ids and event ids from the same generators
CREATE TABLE outbox_copy (LIKE outbox_log_0 INCLUDING ALL);
ALTER TABLE outbox_copy
	ALTER COLUMN id SET DEFAULT nextval('outbox_event_id_seq'),
	ALTER COLUMN txid SET DEFAULT pg_current_xact_id(),
	ALTER COLUMN event_id SET DEFAULT gen_random_uuid(),
	ALTER COLUMN created_at SET DEFAULT now();

-- the table of the baseline relay, as users write it
CREATE TABLE relay_outbox (
	id bigserial PRIMARY KEY,
	event_id uuid NOT NULL DEFAULT gen_random_uuid(),
	topic text NOT NULL,
	key text,
	payload bytea,
	created_at timestamptz NOT NULL DEFAULT now(),
	published_at timestamptz
);
CREATE INDEX relay_outbox_unpublished ON relay_outbox (id) WHERE published_at IS NULL;
