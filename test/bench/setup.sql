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

-- the outbox table users write by hand, the baseline of the enqueue's
-- cost: a bigserial id, a uuid default, a jsonb payload, a partial index on
-- the unpublished rows
CREATE TABLE app_outbox (
	id bigserial PRIMARY KEY,
	event_id uuid NOT NULL DEFAULT gen_random_uuid(),
	topic text NOT NULL,
	key text,
	payload jsonb NOT NULL,
	created_at timestamptz NOT NULL DEFAULT now(),
	published_at timestamptz
);
CREATE INDEX app_outbox_unpublished ON app_outbox (id) WHERE published_at IS NULL;

-- the latencies of a run, copied from outbox_messages before retention
-- takes them
CREATE TABLE bench_latency (id bigint PRIMARY KEY, ms double precision NOT NULL);

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
