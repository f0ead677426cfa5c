/* outbox--1.2.sql */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION outbox" to load this file. \quit

--
-- The schema of version 1.2 in one piece; outbox--1.0.sql and the update
-- scripts reach the same one (sql/upgrade.sql proves it).  Sections: the
-- schema's owner, types, tables, the public API, the functions the worker
-- runs (which superusers may run by hand).  Nothing is granted to PUBLIC.
--
-- The extension's schema must be owned by the extension's owner or by a
-- superuser: whoever owns it could rename it and put look-alikes in its
-- place, which the extension's code would then run with its own rights.
--
DO $$
DECLARE
	schema_owner oid;
BEGIN
	SELECT CASE WHEN n.nspowner OPERATOR(pg_catalog.=) 'pg_database_owner'::pg_catalog.regrole
				THEN d.datdba ELSE n.nspowner END
	  INTO STRICT schema_owner
	  FROM pg_catalog.pg_namespace n, pg_catalog.pg_database d
	 WHERE n.oid OPERATOR(pg_catalog.=) '@extschema@'::pg_catalog.regnamespace
	   AND d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database();
	IF schema_owner OPERATOR(pg_catalog.<>) (SELECT e.extowner FROM pg_catalog.pg_extension e
											  WHERE e.extname OPERATOR(pg_catalog.=) 'outbox')
	   AND NOT (SELECT r.rolsuper FROM pg_catalog.pg_roles r
				 WHERE r.oid OPERATOR(pg_catalog.=) schema_owner) THEN
		RAISE EXCEPTION 'schema "%" of extension outbox is owned by role "%", which is neither the extension''s owner nor a superuser',
			'@extschema@', schema_owner::pg_catalog.regrole
			USING ERRCODE = 'object_not_in_prerequisite_state',
				  HINT = 'Give the schema to a superuser or to the extension''s owner (ALTER SCHEMA ... OWNER TO), or create the extension in a schema that one of them owns.';
	END IF;
END
$$;

--
-- Types
--

-- The states of an event.  pending -> published on delivery; on a refused
-- delivery failed (retried after next_attempt_at) and, after the last
-- attempt or an error retrying cannot fix, abandoned.  'processing' is not
-- used: claims are row locks held while the batch is in flight.
CREATE TYPE @extschema@.outbox_status AS ENUM (
	'pending', 'processing', 'published', 'failed', 'abandoned'
);

--
-- Tables
--

-- Every event, appended by outbox_enqueue to one of outbox_log_0 .. 3 and
-- never updated or deleted one by one: a table is emptied by TRUNCATE once
-- every event in it is published and past outbox.published_retention
-- (src/retention.c).  txid is the enqueuing transaction's, taken before
-- its id (src/enqueue.c).  The parent holds no rows.
CREATE TABLE @extschema@.outbox_log (
	id				bigint NOT NULL,
	txid			xid8 NOT NULL,
	event_id		uuid NOT NULL,
	topic			text NOT NULL,
	key				text,
	payload			bytea,
	headers			jsonb,
	created_at		timestamptz NOT NULL,
	CONSTRAINT outbox_log_tombstone_key CHECK (payload IS NOT NULL OR key IS NOT NULL)
);
COMMENT ON TABLE @extschema@.outbox_log IS
	'Every event, appended by outbox_enqueue to one of outbox_log_0 .. 3';

-- Insert-only and emptied by TRUNCATE: nothing for vacuum to do that is
-- worth a pass over the table.  (Anti-wraparound vacuum still runs if a
-- table lives that long.)
CREATE TABLE @extschema@.outbox_log_0 () INHERITS (@extschema@.outbox_log)
	WITH (autovacuum_enabled = false);
CREATE TABLE @extschema@.outbox_log_1 () INHERITS (@extschema@.outbox_log)
	WITH (autovacuum_enabled = false);
CREATE TABLE @extschema@.outbox_log_2 () INHERITS (@extschema@.outbox_log)
	WITH (autovacuum_enabled = false);
CREATE TABLE @extschema@.outbox_log_3 () INHERITS (@extschema@.outbox_log)
	WITH (autovacuum_enabled = false);
CREATE INDEX outbox_log_0_id ON @extschema@.outbox_log_0 (id);
CREATE INDEX outbox_log_0_txid ON @extschema@.outbox_log_0 (txid, id);
CREATE INDEX outbox_log_1_id ON @extschema@.outbox_log_1 (id);
CREATE INDEX outbox_log_1_txid ON @extschema@.outbox_log_1 (txid, id);
CREATE INDEX outbox_log_2_id ON @extschema@.outbox_log_2 (id);
CREATE INDEX outbox_log_2_txid ON @extschema@.outbox_log_2 (txid, id);
CREATE INDEX outbox_log_3_id ON @extschema@.outbox_log_3 (id);
CREATE INDEX outbox_log_3_txid ON @extschema@.outbox_log_3 (txid, id);

-- one sequence numbers the events of the log and of the retry table
CREATE SEQUENCE @extschema@.outbox_event_id_seq;

-- Events that Kafka refused, and the later events of their keys (copied
-- from the log to wait their turn), events claimed and not sent, and dead
-- letters: the only events written again.
CREATE TABLE @extschema@.outbox_retries (
	id				bigint NOT NULL DEFAULT pg_catalog.nextval('@extschema@.outbox_event_id_seq'::pg_catalog.regclass),
	event_id		uuid NOT NULL DEFAULT pg_catalog.gen_random_uuid(),
	topic			text NOT NULL,
	key				text,
	payload			bytea,
	headers			jsonb,
	status			@extschema@.outbox_status NOT NULL DEFAULT 'pending',
	attempts		integer NOT NULL DEFAULT 0,
	next_attempt_at	timestamptz,
	last_error		text,
	created_at		timestamptz NOT NULL DEFAULT pg_catalog.now(),
	published_at	timestamptz,
	kafka_partition	integer,
	kafka_offset	bigint,
	CONSTRAINT outbox_retries_pkey PRIMARY KEY (id),
	CONSTRAINT outbox_retries_event_id_key UNIQUE (event_id),
	CONSTRAINT outbox_messages_tombstone_key CHECK (payload IS NOT NULL OR key IS NOT NULL)
) WITH (autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_insert_scale_factor = 0.01,
		fillfactor = 80);
COMMENT ON TABLE @extschema@.outbox_retries IS
	'Events that Kafka refused, and the later events of their keys: the only events written again';
-- due events in publish order
CREATE INDEX outbox_retries_due ON @extschema@.outbox_retries (id)
	WHERE status IN ('pending', 'failed');
-- abandoned events, for cleanup and monitoring
CREATE INDEX outbox_retries_abandoned ON @extschema@.outbox_retries (topic)
	WHERE status = 'abandoned';
-- later events of a key wait while it has an unfinished event here; the
-- index holds a hash of the key, so that keys of any length fit
CREATE INDEX outbox_retries_unfinished_key ON @extschema@.outbox_retries
	(topic, pg_catalog.hashtextextended(key, 0), id)
	WHERE status OPERATOR(pg_catalog.=) ANY ('{pending,failed}') AND key IS NOT NULL;

-- Caller-given event ids, so that a duplicate fails with 23505 without an
-- index on event_id in the log; kept while the event is.
CREATE TABLE @extschema@.outbox_event_ids (
	event_id		uuid PRIMARY KEY,
	id				bigint NOT NULL
);

--
-- Where the claim is in the log, one row, updated in place (HOT) once a
-- batch.  last_id: the highest id read.  running: transactions that were
-- in progress when last_id was read, and so may hold smaller unread ids;
-- once one ends its events are read by txid: draining holds those being
-- read, up to id drain_upto, after id drain_after.  current_log: the table
-- that outbox_enqueue writes to, since current_since.
--
CREATE TABLE @extschema@.outbox_reader (
	single			boolean PRIMARY KEY DEFAULT true CHECK (single),
	last_id			bigint NOT NULL,
	running			xid8[] NOT NULL DEFAULT '{}',
	draining		xid8[] NOT NULL DEFAULT '{}',
	drain_upto		bigint NOT NULL DEFAULT 0,
	drain_after		bigint NOT NULL DEFAULT 0,
	current_log		integer NOT NULL DEFAULT 0 CHECK (current_log BETWEEN 0 AND 3),
	current_since	timestamptz NOT NULL DEFAULT pg_catalog.now()
) WITH (fillfactor = 20);
INSERT INTO @extschema@.outbox_reader (last_id) VALUES (0);

-- One row per batch published from the log: its ids and where Kafka put
-- them, in id order.  Found by id through the range of the batch.
CREATE TABLE @extschema@.outbox_ledger (
	first_id		bigint NOT NULL,
	last_id			bigint NOT NULL,
	ids				bigint[] NOT NULL,
	partitions		integer[] NOT NULL,
	offsets			bigint[] NOT NULL,
	published_at	timestamptz NOT NULL
);
-- lz4 compresses the arrays at a fraction of pglz's CPU; a server built
-- without lz4 keeps pglz
DO $$
BEGIN
	ALTER TABLE @extschema@.outbox_ledger
		ALTER COLUMN ids SET COMPRESSION lz4,
		ALTER COLUMN partitions SET COMPRESSION lz4,
		ALTER COLUMN offsets SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported THEN
	NULL;
END
$$;
CREATE INDEX outbox_ledger_ids ON @extschema@.outbox_ledger
	USING gist (pg_catalog.int8range(first_id, last_id, '[]'));
COMMENT ON TABLE @extschema@.outbox_ledger IS
	'Where each batch published from the log went: one row per batch';

-- Publishing statistics: one row per topic and 10-second bucket, written by
-- the worker with each batch's outcomes; older than two hours, summed into
-- the topic's row of bucket -infinity, so that totals only grow.
-- latency_histogram counts deliveries per bucket b = floor(4 * log2(1 +
-- latency in ms)), 0..127.
CREATE TABLE @extschema@.outbox_publish_stats (
	topic				text NOT NULL,
	bucket				timestamptz NOT NULL,
	published			bigint NOT NULL DEFAULT 0,
	failed				bigint NOT NULL DEFAULT 0,
	abandoned			bigint NOT NULL DEFAULT 0,
	latency_ms_sum		double precision NOT NULL DEFAULT 0,
	latency_histogram	bigint[] NOT NULL DEFAULT '{}',
	PRIMARY KEY (topic, bucket)
);
COMMENT ON TABLE @extschema@.outbox_publish_stats IS
	'Delivery outcomes and latencies per topic and 10-second bucket, kept 2 hours';

-- Snapshots asked for by outbox_attach(..., snapshot => true), one row per
-- table, which the worker takes a chunk at a time (src/snapshot.c).
-- trigger_args: the capture trigger's arguments when it was asked for (a
-- table captured otherwise since has its snapshot cancelled);
-- walk_columns: the key it reads the table in the order of; last_key: the
-- last key read, as text (NULL before the first chunk); next_attempt_at:
-- when a chunk that failed is tried again.
CREATE TABLE @extschema@.outbox_snapshots_state (
	relid			oid PRIMARY KEY,
	topic			text NOT NULL,
	format			text NOT NULL,
	trigger_args	text[] NOT NULL,
	walk_columns	text[] NOT NULL,
	last_key		text[],
	rows_done		bigint NOT NULL DEFAULT 0,
	rows_estimated	bigint,
	started			timestamptz NOT NULL DEFAULT pg_catalog.now(),
	finished		timestamptz,
	last_error		text,
	next_attempt_at	timestamptz
);
COMMENT ON TABLE @extschema@.outbox_snapshots_state IS
	'Snapshots asked for by outbox_attach, taken by the worker a chunk at a time';

--
-- pg_dump keeps the queue: the events of the log that were not read when
-- the dump was taken (in its snapshot, with the reader row), every row of
-- the retry table, the caller-given event ids and the id sequence.  The
-- reader starts again from the restored events; published ones are not
-- dumped, so they are not published again.
--
DO $$
BEGIN
	FOR t IN 0..3 LOOP
		PERFORM pg_catalog.pg_extension_config_dump(
			pg_catalog.format('@extschema@.%I', 'outbox_log_' || t)::pg_catalog.regclass, $filter$
	WHERE id OPERATOR(pg_catalog.>) (SELECT r.last_id FROM @extschema@.outbox_reader r)
	   OR txid OPERATOR(pg_catalog.=) ANY ((SELECT r.running FROM @extschema@.outbox_reader r)::pg_catalog.xid8[])
	   OR (txid OPERATOR(pg_catalog.=) ANY ((SELECT r.draining FROM @extschema@.outbox_reader r)::pg_catalog.xid8[])
		   AND id OPERATOR(pg_catalog.>) (SELECT r.drain_after FROM @extschema@.outbox_reader r)
		   AND id OPERATOR(pg_catalog.<=) (SELECT r.drain_upto FROM @extschema@.outbox_reader r))
$filter$);
	END LOOP;
END
$$;
SELECT pg_catalog.pg_extension_config_dump('@extschema@.outbox_retries', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.outbox_event_ids', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.outbox_event_id_seq', '');

--
-- Public API
--

-- Store an event in the caller's transaction; one C function serves the
-- three payload types.  It inserts the row itself, checks no permission on
-- the table, looks up no name through search_path and evaluates nothing
-- but built-in functions (src/enqueue.c), so it needs neither its owner's
-- rights nor a pinned search_path, whose save and restore at every call
-- cost as much as the insert.  EXECUTE on it is the right to enqueue.
CREATE FUNCTION @extschema@.outbox_enqueue(topic text, payload jsonb,
	key text DEFAULT NULL, headers jsonb DEFAULT NULL, event_id uuid DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'outbox_enqueue'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
REVOKE ALL ON FUNCTION @extschema@.outbox_enqueue(text, jsonb, text, jsonb, uuid) FROM PUBLIC;

CREATE FUNCTION @extschema@.outbox_enqueue(topic text, payload text,
	key text DEFAULT NULL, headers jsonb DEFAULT NULL, event_id uuid DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'outbox_enqueue'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
REVOKE ALL ON FUNCTION @extschema@.outbox_enqueue(text, text, text, jsonb, uuid) FROM PUBLIC;

CREATE FUNCTION @extschema@.outbox_enqueue(topic text, payload bytea,
	key text DEFAULT NULL, headers jsonb DEFAULT NULL, event_id uuid DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'outbox_enqueue'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
REVOKE ALL ON FUNCTION @extschema@.outbox_enqueue(text, bytea, text, jsonb, uuid) FROM PUBLIC;

-- Capturing row changes: outbox_attach('orders', 'orders.changes') makes
-- every change of orders an event (src/capture.c), in the extension's
-- envelope or, with format => 'debezium', as Debezium's PostgreSQL
-- connector writes it (src/debezium.c); snapshot => true also publishes
-- the rows the table has (src/snapshot.c).  The trigger runs with the
-- rights of the role that changed the row.
CREATE FUNCTION @extschema@.outbox_capture()
RETURNS trigger
AS 'MODULE_PATHNAME', 'outbox_capture'
LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION @extschema@.outbox_capture() FROM PUBLIC;

CREATE FUNCTION @extschema@.outbox_attach(tbl regclass, topic text,
	key_columns text[] DEFAULT NULL, format text DEFAULT 'outbox',
	snapshot boolean DEFAULT false, tombstones boolean DEFAULT false)
RETURNS void
AS 'MODULE_PATHNAME', 'outbox_attach'
LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION @extschema@.outbox_attach(regclass, text, text[], text, boolean, boolean) FROM PUBLIC;

-- An outbox table in the shape that Debezium's outbox event router reads:
-- each insert becomes the event the router would write (src/router.c).
CREATE FUNCTION @extschema@.outbox_router()
RETURNS trigger
AS 'MODULE_PATHNAME', 'outbox_router'
LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION @extschema@.outbox_router() FROM PUBLIC;

CREATE FUNCTION @extschema@.outbox_attach_router(tbl regclass,
	topic_pattern text DEFAULT 'outbox.event.${routedByValue}',
	route_by text DEFAULT 'aggregatetype', key_column text DEFAULT 'aggregateid',
	id_column text DEFAULT 'id', payload_column text DEFAULT 'payload',
	timestamp_column text DEFAULT NULL, header_columns text[] DEFAULT NULL,
	expand_payload boolean DEFAULT true)
RETURNS void
AS 'MODULE_PATHNAME', 'outbox_attach_router'
LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION @extschema@.outbox_attach_router(regclass, text, text, text, text, text, text, text[], boolean) FROM PUBLIC;

-- Drop the triggers of outbox_attach and outbox_attach_router, and cancel
-- a snapshot in progress.
CREATE FUNCTION @extschema@.outbox_detach(tbl regclass)
RETURNS void
AS 'MODULE_PATHNAME', 'outbox_detach'
LANGUAGE C VOLATILE STRICT
SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION @extschema@.outbox_detach(regclass) FROM PUBLIC;

-- Operators' outcomes by hand (src/record.c).
CREATE FUNCTION @extschema@.outbox_retry(id bigint)
RETURNS integer
AS 'MODULE_PATHNAME', 'outbox_retry'
LANGUAGE C VOLATILE STRICT
SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION @extschema@.outbox_retry(bigint) FROM PUBLIC;

CREATE FUNCTION @extschema@.outbox_retry_abandoned(topic text DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'outbox_retry_abandoned'
LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION @extschema@.outbox_retry_abandoned(text) FROM PUBLIC;

CREATE FUNCTION @extschema@.outbox_abandon(id bigint)
RETURNS integer
AS 'MODULE_PATHNAME', 'outbox_abandon'
LANGUAGE C VOLATILE STRICT
SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION @extschema@.outbox_abandon(bigint) FROM PUBLIC;

-- Give up on every event not delivered yet, on purpose (what DROP
-- EXTENSION asks for before it drops undelivered events).
CREATE FUNCTION @extschema@.outbox_discard()
RETURNS bigint
AS 'MODULE_PATHNAME', 'outbox_discard'
LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION @extschema@.outbox_discard() FROM PUBLIC;

-- The retention cleanup, now, with the settings in force (src/retention.c).
CREATE FUNCTION @extschema@.outbox_purge()
RETURNS bigint
AS 'MODULE_PATHNAME', 'outbox_purge'
LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION @extschema@.outbox_purge() FROM PUBLIC;

--
-- Monitoring
--

-- The histogram of a set of latencies, in milliseconds, and the sum of two
-- histograms (src/histogram.c).
CREATE FUNCTION @extschema@.outbox_latency_histogram(latencies_ms double precision[])
RETURNS bigint[]
AS 'MODULE_PATHNAME', 'outbox_latency_histogram'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION @extschema@.outbox_latency_histogram(double precision[]) FROM PUBLIC;

-- No search_path pinned: it is C that adds two arrays, looks up no name
-- and runs nothing else, and a pin is a setting saved and restored at each
-- of the rows that a scrape of the statistics sums (twice its cost).
CREATE FUNCTION @extschema@.outbox_histogram_add(a bigint[], b bigint[])
RETURNS bigint[]
AS 'MODULE_PATHNAME', 'outbox_histogram_add'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
REVOKE ALL ON FUNCTION @extschema@.outbox_histogram_add(bigint[], bigint[]) FROM PUBLIC;

CREATE AGGREGATE @extschema@.outbox_histogram_sum(bigint[]) (
	SFUNC = @extschema@.outbox_histogram_add,
	STYPE = bigint[],
	INITCOND = '{}'
);
REVOKE ALL ON FUNCTION @extschema@.outbox_histogram_sum(bigint[]) FROM PUBLIC;

-- The latency (ms) below which a fraction q of a histogram's deliveries
-- fall: the upper bound of its bucket, within 19% of the exact value.
CREATE FUNCTION @extschema@.outbox_histogram_quantile(histogram bigint[], q double precision)
RETURNS double precision
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
	SELECT pg_catalog.round((pg_catalog.power(2, b / 4.0) - 1)::numeric, 1)::double precision
	  FROM (SELECT i AS b,
				   pg_catalog.sum(n) OVER (ORDER BY i) AS cumulative,
				   pg_catalog.sum(n) OVER () AS total
			  FROM pg_catalog.unnest(histogram) WITH ORDINALITY AS h(n, i)) AS s
	 WHERE total > 0 AND cumulative >= q * total
	 ORDER BY b
	 LIMIT 1
$$;
REVOKE ALL ON FUNCTION @extschema@.outbox_histogram_quantile(bigint[], double precision) FROM PUBLIC;

-- The unread events of the log per topic, counted up to a bound; past it
-- a row with topic NULL gives an upper bound of the rest (src/reader.c).
CREATE FUNCTION @extschema@.outbox_unread_topics()
RETURNS TABLE (topic text, unread bigint, oldest_created_at timestamptz)
AS 'MODULE_PATHNAME', 'outbox_unread_topics'
LANGUAGE C STABLE
SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION @extschema@.outbox_unread_topics() FROM PUBLIC;

CREATE VIEW @extschema@.outbox_stats AS
	WITH unread AS MATERIALIZED (
		SELECT u.topic, u.unread, u.oldest_created_at
		  FROM @extschema@.outbox_unread_topics() u
	), queue AS (
		SELECT m.topic,
			   pg_catalog.count(*) FILTER (WHERE m.status OPERATOR(pg_catalog.=) 'pending') AS pending,
			   pg_catalog.count(*) FILTER (WHERE m.status OPERATOR(pg_catalog.=) 'failed') AS failed,
			   0::bigint AS abandoned,
			   pg_catalog.min(m.created_at) FILTER (WHERE m.next_attempt_at IS NULL
														 OR m.next_attempt_at <= pg_catalog.now()) AS oldest_due
		  FROM @extschema@.outbox_retries m
		 WHERE m.status OPERATOR(pg_catalog.=) ANY ('{pending,failed}')
		 GROUP BY m.topic
		UNION ALL
		SELECT m.topic, 0, 0, pg_catalog.count(*), NULL
		  FROM @extschema@.outbox_retries m
		 WHERE m.status OPERATOR(pg_catalog.=) 'abandoned'
		 GROUP BY m.topic
		UNION ALL
		SELECT u.topic, u.unread, 0, 0, u.oldest_created_at
		  FROM unread u
		 WHERE u.topic IS NOT NULL
	), recent AS (
		SELECT s.topic,
			   pg_catalog.sum(s.published) FILTER (WHERE s.bucket > pg_catalog.now() - interval '1 minute') AS published_last_minute,
			   pg_catalog.sum(s.published) AS published,
			   pg_catalog.sum(s.failed) AS failed,
			   pg_catalog.sum(s.abandoned) AS abandoned,
			   pg_catalog.sum(s.latency_ms_sum) AS latency_ms_sum,
			   @extschema@.outbox_histogram_sum(s.latency_histogram) AS histogram
		  FROM @extschema@.outbox_publish_stats s
		 WHERE s.bucket > pg_catalog.now() - interval '1 hour'
		 GROUP BY s.topic
	), per_topic AS (
		SELECT t.topic,
			   coalesce(pg_catalog.sum(q.pending), 0) AS pending,
			   coalesce(pg_catalog.sum(q.failed), 0) AS failed,
			   coalesce(pg_catalog.sum(q.abandoned), 0) AS abandoned,
			   pg_catalog.min(q.oldest_due) AS oldest_due,
			   coalesce(pg_catalog.max(r.published_last_minute), 0) AS published_last_minute,
			   coalesce(pg_catalog.max(r.published), 0) AS published_last_hour,
			   coalesce(pg_catalog.max(r.failed), 0) AS failed_attempts_last_hour,
			   coalesce(pg_catalog.max(r.abandoned), 0) AS abandoned_last_hour,
			   pg_catalog.max(r.latency_ms_sum) AS latency_ms_sum,
			   @extschema@.outbox_histogram_sum(r.histogram) AS histogram
		  FROM (SELECT queue.topic FROM queue UNION SELECT recent.topic FROM recent) AS t
		  LEFT JOIN queue q ON q.topic = t.topic
		  LEFT JOIN recent r ON r.topic = t.topic
		 GROUP BY t.topic
	)
	SELECT p.topic,
		   (coalesce(pg_catalog.sum(p.pending), 0)
			+ CASE WHEN GROUPING(p.topic) = 1
				   THEN (SELECT coalesce(pg_catalog.sum(u.unread), 0) FROM unread u WHERE u.topic IS NULL)
				   ELSE 0 END)::bigint AS pending,
		   coalesce(pg_catalog.sum(p.failed), 0)::bigint AS failed,
		   coalesce(pg_catalog.sum(p.abandoned), 0)::bigint AS abandoned,
		   pg_catalog.date_trunc('milliseconds', pg_catalog.now() - pg_catalog.min(p.oldest_due)) AS oldest_due_age,
		   coalesce(pg_catalog.sum(p.published_last_minute), 0)::bigint AS published_last_minute,
		   coalesce(pg_catalog.sum(p.published_last_hour), 0)::bigint AS published_last_hour,
		   coalesce(pg_catalog.sum(p.failed_attempts_last_hour), 0)::bigint AS failed_attempts_last_hour,
		   coalesce(pg_catalog.sum(p.abandoned_last_hour), 0)::bigint AS abandoned_last_hour,
		   pg_catalog.round(pg_catalog.sum(p.failed_attempts_last_hour + p.abandoned_last_hour)::numeric
							/ NULLIF(pg_catalog.sum(p.published_last_hour + p.failed_attempts_last_hour
													 + p.abandoned_last_hour), 0), 4) AS retry_rate,
		   pg_catalog.round((pg_catalog.sum(p.latency_ms_sum)
							 / NULLIF(pg_catalog.sum(p.published_last_hour), 0))::numeric, 1) AS latency_avg_ms,
		   @extschema@.outbox_histogram_quantile(@extschema@.outbox_histogram_sum(p.histogram),
												 0.99::double precision)::numeric AS latency_p99_ms
	  FROM per_topic p
	 GROUP BY GROUPING SETS ((p.topic), ())
	 ORDER BY p.topic NULLS LAST;

COMMENT ON VIEW @extschema@.outbox_stats IS
	'Queue and delivery health per topic, and in total (topic NULL)';

-- The snapshots asked for: how far each has got, and when it finished.
CREATE VIEW @extschema@.outbox_snapshots AS
	SELECT s.relid::pg_catalog.regclass AS "table", s.rows_done, s.rows_estimated,
		   s.started, s.finished, s.format, s.topic, s.last_error
	  FROM @extschema@.outbox_snapshots_state s;

COMMENT ON VIEW @extschema@.outbox_snapshots IS
	'Snapshots of attached tables: rows published, rows estimated, start and finish';

-- The workers, one row per database served or waiting for a worker, from
-- shared memory: never waits for the tables, answers from any database.
CREATE FUNCTION @extschema@.outbox_worker_status(
	OUT database name, OUT pid integer, OUT state text,
	OUT state_since timestamptz, OUT started_at timestamptz,
	OUT brokers_up integer, OUT published bigint, OUT failed bigint,
	OUT last_batch_at timestamptz, OUT last_error text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'outbox_worker_status'
LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION @extschema@.outbox_worker_status() FROM PUBLIC;

--
-- The functions the worker runs (src/claim.c, record.c, retention.c),
-- for SQL; they run statements on the extension's tables and built-in
-- functions only.
--

-- The transactions in progress in the current snapshot: its xip, and the
-- transactions that started before it and are newer than its xmax
-- (src/reader.c).
CREATE FUNCTION @extschema@.outbox_in_progress()
RETURNS xid8[]
AS 'MODULE_PATHNAME', 'outbox_in_progress'
LANGUAGE C VOLATILE STRICT
SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION @extschema@.outbox_in_progress() FROM PUBLIC;

-- The log rows of the given ids, in id order, found with an index search
-- of each log table (src/reader.c).
CREATE FUNCTION @extschema@.outbox_log_rows(ids bigint[])
RETURNS SETOF @extschema@.outbox_log
AS 'MODULE_PATHNAME', 'outbox_log_rows'
LANGUAGE C STABLE STRICT
SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION @extschema@.outbox_log_rows(bigint[]) FROM PUBLIC;

-- Is the log row (id, txid) still unread at reader state r?
CREATE FUNCTION @extschema@.outbox_unread(id bigint, txid xid8, r @extschema@.outbox_reader)
RETURNS boolean
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
	SELECT id > r.last_id
		OR txid = ANY (r.running)
		OR (txid = ANY (r.draining) AND id > r.drain_after AND id <= r.drain_upto)
$$;
REVOKE ALL ON FUNCTION @extschema@.outbox_unread(bigint, xid8, @extschema@.outbox_reader) FROM PUBLIC;

-- Every event, as one table: the retry table's rows, and the log's others.
-- An event of the log is pending until read, then published (the claim
-- records every event it reads); a published one is shown while
-- outbox.published_retention lasts.
CREATE VIEW @extschema@.outbox_messages AS
	SELECT m.id, m.event_id, m.topic, m.key, m.payload, m.headers, m.status,
		   m.attempts, m.next_attempt_at, m.last_error, m.created_at,
		   m.published_at, m.kafka_partition, m.kafka_offset
	  FROM @extschema@.outbox_retries m
	UNION ALL
	SELECT l.id, l.event_id, l.topic, l.key, l.payload, l.headers,
		   CASE WHEN u.unread THEN 'pending' ELSE 'published' END::@extschema@.outbox_status,
		   CASE WHEN u.unread THEN 0 ELSE 1 END,
		   NULL::timestamptz, NULL::text, l.created_at,
		   p.published_at, p.kafka_partition, p.kafka_offset
	  FROM @extschema@.outbox_log l
	 CROSS JOIN @extschema@.outbox_reader r
	 CROSS JOIN LATERAL (SELECT @extschema@.outbox_unread(l.id, l.txid, r) AS unread) u
	  LEFT JOIN LATERAL (
			SELECT b.published_at, b.partitions[i.i] AS kafka_partition,
				   b.offsets[i.i] AS kafka_offset
			  FROM @extschema@.outbox_ledger b
			 CROSS JOIN LATERAL pg_catalog.array_position(b.ids, l.id) AS i(i)
			 WHERE pg_catalog.int8range(b.first_id, b.last_id, '[]') OPERATOR(pg_catalog.@>) l.id
			   AND i.i IS NOT NULL
			 LIMIT 1) p ON NOT u.unread
	 WHERE NOT EXISTS (SELECT FROM @extschema@.outbox_retries m WHERE m.id = l.id)
	   AND (u.unread
			OR p.published_at >= pg_catalog.now()
			   - coalesce(pg_catalog.current_setting('outbox.published_retention', true), '7d')::interval);

COMMENT ON VIEW @extschema@.outbox_messages IS
	'Events waiting to be published to Kafka, and their outcome';

-- Claim up to batch_size due events, and at most about max_bytes of them:
-- the due events of the retry table, then the next events of the log.
-- Every log event claimed must be recorded (outbox_mark_published,
-- outbox_mark_failed, outbox_mark_released) before the transaction
-- commits.  One claim runs at a time.
CREATE FUNCTION @extschema@.outbox_claim(batch_size integer,
	max_bytes bigint DEFAULT 16777216)
RETURNS TABLE (id bigint, event_id uuid, topic text, key text,
			   payload bytea, headers jsonb)
AS 'MODULE_PATHNAME', 'outbox_claim'
LANGUAGE C VOLATILE STRICT
SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION @extschema@.outbox_claim(integer, bigint) FROM PUBLIC;

-- Record deliveries: one ledger row for the log's events (none unless
-- keep), the retry table's published (deleted unless keep).
CREATE FUNCTION @extschema@.outbox_mark_published(ids bigint[], partitions integer[],
	offsets bigint[], keep boolean)
RETURNS bigint
AS 'MODULE_PATHNAME', 'outbox_mark_published'
LANGUAGE C VOLATILE STRICT
SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION @extschema@.outbox_mark_published(bigint[], integer[], bigint[], boolean) FROM PUBLIC;

-- Record refused deliveries: failed with a backoff, or abandoned after the
-- last attempt or an error that retrying cannot fix, and then copied to
-- the dead-letter topic.
CREATE FUNCTION @extschema@.outbox_mark_failed(ids bigint[], errors text[],
	permanent boolean[], max_attempts integer, base_delay interval,
	max_delay interval, jitter double precision, dead_letter_topic text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'outbox_mark_failed'
LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION @extschema@.outbox_mark_failed(bigint[], text[], boolean[], integer, interval, interval, double precision, text) FROM PUBLIC;

-- Record claimed events that were not sent: due again, no attempt counted.
CREATE FUNCTION @extschema@.outbox_mark_released(ids bigint[])
RETURNS bigint
AS 'MODULE_PATHNAME', 'outbox_mark_released'
LANGUAGE C VOLATILE STRICT
SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION @extschema@.outbox_mark_released(bigint[]) FROM PUBLIC;

-- The delay before attempt number attempts + 1: base * 2^(attempts - 1),
-- capped at max_delay, spread by +/- jitter.
CREATE FUNCTION @extschema@.outbox_retry_delay(attempts integer, base_delay interval,
	max_delay interval, jitter double precision)
RETURNS interval
AS 'MODULE_PATHNAME', 'outbox_retry_delay'
LANGUAGE C VOLATILE STRICT
SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION @extschema@.outbox_retry_delay(integer, interval, interval, double precision) FROM PUBLIC;

-- Copy abandoned events to the dead-letter topic, with headers naming the
-- original topic and event, its attempts and last error.
CREATE FUNCTION @extschema@.outbox_dead_letter(ids bigint[], dead_letter_topic text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'outbox_dead_letter'
LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION @extschema@.outbox_dead_letter(bigint[], text) FROM PUBLIC;

-- One batch of the retention cleanup of the retry table.
CREATE FUNCTION @extschema@.outbox_purge_batch(published_retention interval,
	abandoned_retention interval, batch_size integer)
RETURNS bigint
AS 'MODULE_PATHNAME', 'outbox_purge_batch'
LANGUAGE C VOLATILE STRICT
SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION @extschema@.outbox_purge_batch(interval, interval, integer) FROM PUBLIC;

-- Move enqueue on to the next log table when it is time, and empty by
-- TRUNCATE the tables whose events are all published and past the
-- retention; returns how many events it removed.
CREATE FUNCTION @extschema@.outbox_rotate(published_retention interval)
RETURNS bigint
AS 'MODULE_PATHNAME', 'outbox_rotate'
LANGUAGE C VOLATILE STRICT
SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION @extschema@.outbox_rotate(interval) FROM PUBLIC;

-- A restore writes the log by hand (COPY), which the worker waits out, and
-- each restored row takes the restoring transaction as its txid
-- (src/restore.c).  ALWAYS: also under session_replication_role = replica.
CREATE FUNCTION @extschema@.outbox_restored()
RETURNS trigger
AS 'MODULE_PATHNAME', 'outbox_restored'
LANGUAGE C 
SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION @extschema@.outbox_restored() FROM PUBLIC;
DO $$
BEGIN
	FOR t IN 0..3 LOOP
		EXECUTE pg_catalog.format($sql$
			CREATE TRIGGER outbox_restored BEFORE INSERT ON @extschema@.%1$I
				FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.outbox_restored();
			CREATE TRIGGER outbox_restored_row BEFORE INSERT ON @extschema@.%1$I
				FOR EACH ROW EXECUTE FUNCTION @extschema@.outbox_restored();
			ALTER TABLE @extschema@.%1$I ENABLE ALWAYS TRIGGER outbox_restored,
				ENABLE ALWAYS TRIGGER outbox_restored_row$sql$, 'outbox_log_' || t);
	END LOOP;
END
$$;
