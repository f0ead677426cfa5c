/* outbox--1.3.sql */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION outbox" to load this file. \quit

--
-- The schema of version 1.3 in one piece, the base of a fresh install of
-- every later version (outbox--1.3.sql, then outbox--1.3--1.4.sql and the
-- scripts after it).  outbox--1.0.sql followed by the update scripts
-- reaches the same schema: t/017_versions.pl compares the two, as
-- pg_dump --binary-upgrade --schema-only prints them.  Sections: the
-- schema's owner, types, tables, the public API (capture, topics,
-- monitoring), the functions the worker runs (which superusers may run by
-- hand).  Each object's rights and description stand beside it; nothing
-- is granted to PUBLIC: "by grant" in a description means superusers, the
-- extension's owner, and the roles a superuser grants it to.
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
COMMENT ON TYPE @extschema@.outbox_status IS
	'Status of an event: pending, published, failed (waits for its next attempt), abandoned; processing is not used';

--
-- Tables
--

-- Every event, appended by outbox_enqueue to one of outbox_log_0 .. 3 and
-- never updated or deleted one by one: a table is emptied by TRUNCATE once
-- every event in it is published and past outbox.published_retention
-- (src/queue/retention.c).  txid is the enqueuing transaction's, taken
-- before its id (src/queue/enqueue.c).  The parent holds no rows.
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
	'The log: every event, appended by outbox_enqueue to one of outbox_log_0 .. 3 and never updated; read it through outbox_messages. No right is needed to enqueue';

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
DO $$
BEGIN
	FOR t IN 0..3 LOOP
		EXECUTE pg_catalog.format('COMMENT ON TABLE @extschema@.%I IS %L', 'outbox_log_' || t,
			'A table of the log ring (outbox_log): outbox_enqueue appends, the rotation empties it by TRUNCATE');
	END LOOP;
END
$$;

-- one sequence numbers the events of the log and of the retry table
CREATE SEQUENCE @extschema@.outbox_event_id_seq;
COMMENT ON SEQUENCE @extschema@.outbox_event_id_seq IS
	'The events'' ids: their publish order';

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
COMMENT ON TABLE @extschema@.outbox_event_ids IS
	'Event ids given to outbox_enqueue, unique: a duplicate fails with 23505; kept while the event is';

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
COMMENT ON TABLE @extschema@.outbox_reader IS
	'One row: where the worker''s claim is in the log (the last id read, the transactions still running then) and which log table enqueue writes to';

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
-- table, which the worker takes a chunk at a time
-- (src/capture/snapshot.c).  trigger_args: the capture trigger's arguments
-- when it was asked for (a table captured otherwise since has its snapshot
-- cancelled); walk_columns: the key it reads the table in the order of;
-- last_key: the last key read, as text (NULL before the first chunk);
-- next_attempt_at: when a chunk that failed is tried again; key_types: the
-- type, collation and btree operator family of each walk column when the
-- snapshot was asked for (a chunk that finds another fails the snapshot);
-- failed: when the snapshot failed for good, last_error saying why;
-- chunk_rows: the rows of the next chunk (smaller after one ran out of
-- time; NULL: 1,000); chunk_started: noted, and committed, before a chunk
-- runs, cleared when it ends (a worker that stopped in a chunk leaves it).
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
	next_attempt_at	timestamptz,
	key_types		text[],
	failed			timestamptz,
	chunk_rows		integer,
	chunk_started	timestamptz
);
COMMENT ON TABLE @extschema@.outbox_snapshots_state IS
	'Snapshots asked for by outbox_attach, taken by the worker a chunk at a time';

-- Per-topic settings, and the Kafka clusters the worker publishes to
-- (src/format/topics.c).  A row per pattern: a topic name, or the start of
-- one followed by '*'.  A topic takes the row of the longest pattern that
-- matches it, whole; a column left NULL is the outbox.* setting.  format
-- is how a record is written: NULL, as given to outbox_enqueue(); 'avro',
-- a jsonb payload checked against value_schema and encoded at enqueue, in
-- the Schema Registry's wire format (the ids are the registry's);
-- 'cloudevents', the payload as given, with the ce_* headers of
-- CloudEvents' binary mode.  Dumped whole (below).
CREATE TABLE @extschema@.outbox_topic_settings (
	pattern				text PRIMARY KEY,
	brokers				text,
	properties_file		text,
	format				text,
	value_schema		jsonb,
	key_schema			jsonb,
	value_schema_id		integer,
	key_schema_id		integer,
	cloudevents_source	text,
	updated_at			timestamptz NOT NULL DEFAULT pg_catalog.now()
);
COMMENT ON TABLE @extschema@.outbox_topic_settings IS
	'The settings of topics by pattern (a topic, or a prefix and *): the longest match wins; NULL is the outbox.* setting. Written by outbox_set_topic().';
-- Owned by the bootstrap superuser, read by the extension's owner: the
-- brokers a row names are where the credentials of its properties file, or
-- of outbox.kafka_properties_file, go, which only superusers may choose;
-- the extension's owner need not stay a superuser. The grant comes after
-- the change of owner, which would take it along.
DO $$
BEGIN
	EXECUTE pg_catalog.format('ALTER TABLE @extschema@.outbox_topic_settings OWNER TO %I',
							  pg_catalog.pg_get_userbyid(10));
	EXECUTE pg_catalog.format('GRANT SELECT ON @extschema@.outbox_topic_settings TO %I',
							  CURRENT_USER);
END
$$;

-- Who attached each table, and when: written by outbox_attach and
-- outbox_attach_router, deleted by outbox_detach.  Tables attached before
-- 1.3 have no row.
CREATE TABLE @extschema@.outbox_attached (
	relid			oid PRIMARY KEY,
	attached_by		name NOT NULL,
	attached_at		timestamptz NOT NULL
);
COMMENT ON TABLE @extschema@.outbox_attached IS
	'Who attached each table and when, from 1.3 on (outbox_attachments shows it); written by the attach functions as the extension''s owner';

-- The schema ids the Schema Registry gave the change events in Avro
-- (outbox_attach(..., converter => 'avro'), src/capture/debezium_avro.c),
-- so that a session asks the registry only for a schema it never
-- registered (a table changed by DDL), not at its first change of a table.
-- fingerprint: SHA-256 of the registry's URL, the subject and the schema's
-- text.  A cache: not dumped, rows may go (they are asked for again).
CREATE TABLE @extschema@.outbox_schema_ids (
	fingerprint		bytea NOT NULL,
	subject			text NOT NULL,
	schema_id		integer NOT NULL,
	registered_at	timestamptz NOT NULL DEFAULT pg_catalog.now(),
	CONSTRAINT outbox_schema_ids_pkey PRIMARY KEY (fingerprint)
);
COMMENT ON TABLE @extschema@.outbox_schema_ids IS
	'The ids the Schema Registry gave the schemas of change events in Avro, by fingerprint of registry, subject and schema: a cache, read and written by the capture trigger as the extension''s owner';

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
SELECT pg_catalog.pg_extension_config_dump('@extschema@.outbox_topic_settings', '');

--
-- Public API
--

-- Store an event in the caller's transaction; one C function serves the
-- three payload types.  It inserts the row itself, checks no permission on
-- the table, looks up no name through search_path and evaluates nothing
-- but built-in functions (src/queue/enqueue.c), so it needs neither its
-- owner's rights nor a pinned search_path, whose save and restore at every
-- call cost as much as the insert.  EXECUTE on it is the right to enqueue.
CREATE FUNCTION @extschema@.outbox_enqueue(topic text, payload jsonb,
	key text DEFAULT NULL, headers jsonb DEFAULT NULL, event_id uuid DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'outbox_enqueue'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
REVOKE ALL ON FUNCTION @extschema@.outbox_enqueue(text, jsonb, text, jsonb, uuid) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.outbox_enqueue(text, jsonb, text, jsonb, uuid) IS
	'Store an event in the current transaction, published once it commits: topic, payload (jsonb, as PostgreSQL prints it), key (NULL: none), headers (a JSON object of strings), event_id (NULL: a new uuid); returns its id. By grant: grant all three overloads to an application role';

CREATE FUNCTION @extschema@.outbox_enqueue(topic text, payload text,
	key text DEFAULT NULL, headers jsonb DEFAULT NULL, event_id uuid DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'outbox_enqueue'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
REVOKE ALL ON FUNCTION @extschema@.outbox_enqueue(text, text, text, jsonb, uuid) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.outbox_enqueue(text, text, text, jsonb, uuid) IS
	'Store an event in the current transaction, published once it commits: topic, payload (text, as UTF-8; an untyped literal), key (NULL: none), headers (a JSON object of strings), event_id (NULL: a new uuid); returns its id. By grant: grant all three overloads to an application role';

CREATE FUNCTION @extschema@.outbox_enqueue(topic text, payload bytea,
	key text DEFAULT NULL, headers jsonb DEFAULT NULL, event_id uuid DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'outbox_enqueue'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
REVOKE ALL ON FUNCTION @extschema@.outbox_enqueue(text, bytea, text, jsonb, uuid) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.outbox_enqueue(text, bytea, text, jsonb, uuid) IS
	'Store an event in the current transaction, published once it commits: topic, payload (bytea, as given), key (NULL: none), headers (a JSON object of strings), event_id (NULL: a new uuid); returns its id. By grant: grant all three overloads to an application role';

-- Capturing row changes: outbox_attach('orders', 'orders.changes') makes
-- every change of orders an event (src/capture/), in the extension's
-- envelope or, with format => 'debezium', as Debezium's PostgreSQL
-- connector writes it, with its settings as options: decimal_handling
-- (decimal.handling.mode), tombstones (tombstones.on.delete),
-- skipped_operations (skipped.operations), schemas_enable (the JSON
-- converter's schemas.enable), converter (json, or avro: Confluent's
-- AvroConverter with the Schema Registry); NULL gives the connector's
-- default.  snapshot => true also publishes the rows the table has.  The
-- trigger runs with the rights of the role that changed the row.
CREATE FUNCTION @extschema@.outbox_capture()
RETURNS trigger
AS 'MODULE_PATHNAME', 'outbox_capture'
LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION @extschema@.outbox_capture() FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.outbox_capture() IS
	'Trigger function of outbox_attach: each changed row becomes an event; its arguments are the topic, format and keys. Runs with the rights of the role that changed the row';

CREATE FUNCTION @extschema@.outbox_attach(tbl regclass, topic text,
	key_columns text[] DEFAULT NULL, format text DEFAULT 'outbox',
	snapshot boolean DEFAULT false, tombstones boolean DEFAULT NULL,
	decimal_handling text DEFAULT NULL, skipped_operations text DEFAULT NULL,
	schemas_enable boolean DEFAULT NULL, converter text DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'outbox_attach'
LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION @extschema@.outbox_attach(regclass, text, text[], text, boolean, boolean, text, text, boolean, text) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.outbox_attach(regclass, text, text[], text, boolean, boolean, text, text, boolean, text) IS
	'Capture the changes of table tbl as events on topic (the prefix, format debezium), keyed by key_columns (else the primary key); format outbox or debezium; snapshot: publish its rows too; with format debezium, the connector''s settings tombstones (tombstones.on.delete), decimal_handling (precise, string, double), skipped_operations (skipped.operations), schemas_enable (the JSON converter''s), converter (json, or avro: Confluent''s AvroConverter, the schemas registered at outbox.schema_registry_url), NULL for the connector''s default. By grant, with the table''s TRIGGER privilege (SELECT for a snapshot)';

-- An outbox table in the shape that Debezium's outbox event router reads:
-- each insert becomes the record the router writes with Debezium's
-- defaults and the JSON converter (the payload as a JSON string, keys as
-- JSON), its converters' settings as options (src/capture/router.c).
CREATE FUNCTION @extschema@.outbox_router()
RETURNS trigger
AS 'MODULE_PATHNAME', 'outbox_router'
LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION @extschema@.outbox_router() FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.outbox_router() IS
	'Trigger function of outbox_attach_router: each inserted row becomes the record Debezium''s outbox event router writes. Runs with the rights of the role that inserted';

CREATE FUNCTION @extschema@.outbox_attach_router(tbl regclass,
	topic_pattern text DEFAULT 'outbox.event.${routedByValue}',
	route_by text DEFAULT 'aggregatetype', key_column text DEFAULT 'aggregateid',
	id_column text DEFAULT 'id', payload_column text DEFAULT 'payload',
	timestamp_column text DEFAULT NULL, header_columns text[] DEFAULT NULL,
	expand_payload boolean DEFAULT false, key_converter text DEFAULT 'json',
	schemas_enable boolean DEFAULT false,
	tombstone_on_empty_payload boolean DEFAULT false)
RETURNS void
AS 'MODULE_PATHNAME', 'outbox_attach_router'
LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION @extschema@.outbox_attach_router(regclass, text, text, text, text, text, text, text[], boolean, text, boolean, boolean) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.outbox_attach_router(regclass, text, text, text, text, text, text, text[], boolean, text, boolean, boolean) IS
	'Publish each row inserted into outbox table tbl as Debezium''s outbox event router does: topic_pattern with ${routedByValue} from column route_by, key_column, id_column (header id), payload_column, timestamp_column, header_columns (column:header); the converters'' settings expand_payload, key_converter (json or string), schemas_enable, tombstone_on_empty_payload. By grant, with the table''s TRIGGER privilege';

-- Drop the triggers of outbox_attach and outbox_attach_router, and cancel
-- a snapshot in progress.
CREATE FUNCTION @extschema@.outbox_detach(tbl regclass)
RETURNS void
AS 'MODULE_PATHNAME', 'outbox_detach'
LANGUAGE C VOLATILE STRICT
SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION @extschema@.outbox_detach(regclass) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.outbox_detach(regclass) IS
	'Drop the triggers of outbox_attach or outbox_attach_router from table tbl, and cancel its snapshot. By grant, with the table''s TRIGGER privilege';

-- Operators' outcomes by hand (src/queue/operator.c).
CREATE FUNCTION @extschema@.outbox_retry(id bigint)
RETURNS integer
AS 'MODULE_PATHNAME', 'outbox_retry'
LANGUAGE C VOLATILE STRICT
SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION @extschema@.outbox_retry(bigint) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.outbox_retry(bigint) IS
	'Make the failed or abandoned event id pending again, due now, its attempts reset; returns 1, or 0 if it was neither. By grant';

CREATE FUNCTION @extschema@.outbox_retry_abandoned(topic text DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'outbox_retry_abandoned'
LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION @extschema@.outbox_retry_abandoned(text) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.outbox_retry_abandoned(text) IS
	'Make every abandoned event (of topic, if not NULL) pending again; returns how many. By grant';

CREATE FUNCTION @extschema@.outbox_abandon(id bigint)
RETURNS integer
AS 'MODULE_PATHNAME', 'outbox_abandon'
LANGUAGE C VOLATILE STRICT
SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION @extschema@.outbox_abandon(bigint) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.outbox_abandon(bigint) IS
	'Give up the pending or failed event id, releasing the later events of its key (waits for its batch in flight); returns 1, or 0. READ COMMITTED only. By grant';

-- Give up on every event not delivered yet, on purpose (what DROP
-- EXTENSION asks for before it drops undelivered events).
CREATE FUNCTION @extschema@.outbox_discard()
RETURNS bigint
AS 'MODULE_PATHNAME', 'outbox_discard'
LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION @extschema@.outbox_discard() FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.outbox_discard() IS
	'Give up every undelivered event, none to the dead-letter topic; returns how many. READ COMMITTED only. By grant';

-- The retention cleanup, now, with the settings in force
-- (src/queue/retention.c).
CREATE FUNCTION @extschema@.outbox_purge()
RETURNS bigint
AS 'MODULE_PATHNAME', 'outbox_purge'
LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION @extschema@.outbox_purge() FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.outbox_purge() IS
	'Run the retention cleanup now (outbox.published_retention, outbox.abandoned_retention); returns how many rows went. By grant';

--
-- Topics: their settings (outbox_topic_settings), and the Schema Registry
-- of outbox.schema_registry_url (src/kafka/registry.c)
--

CREATE FUNCTION @extschema@.outbox_set_topic(pattern text, brokers text DEFAULT NULL,
											 properties_file text DEFAULT NULL,
											 format text DEFAULT NULL,
											 value_schema jsonb DEFAULT NULL,
											 key_schema jsonb DEFAULT NULL,
											 cloudevents_source text DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'outbox_set_topic'
LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION @extschema@.outbox_set_topic(text, text, text, text, jsonb, jsonb, text) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.outbox_set_topic(text, text, text, text, jsonb, jsonb, text) IS
	'Set the settings of the topics a pattern matches: the cluster their events go to (brokers, properties file; NULL for the outbox.* setting) and the format of their records (NULL: as given; avro with its schemas; cloudevents with its source). Superusers only.';

CREATE FUNCTION @extschema@.outbox_reset_topic(pattern text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'outbox_reset_topic'
LANGUAGE C VOLATILE STRICT
SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION @extschema@.outbox_reset_topic(text) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.outbox_reset_topic(text) IS
	'Remove the settings of a pattern; false if it had none. Superusers only';

CREATE FUNCTION @extschema@.outbox_topic(topic text, OUT pattern text, OUT brokers text,
										 OUT properties_file text, OUT format text,
										 OUT value_schema_id integer, OUT key_schema_id integer,
										 OUT cloudevents_source text)
RETURNS record
AS 'MODULE_PATHNAME', 'outbox_topic'
LANGUAGE C STABLE STRICT
SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION @extschema@.outbox_topic(text) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.outbox_topic(text) IS
	'The settings a topic''s events are published with: the pattern whose row it takes, the brokers and the properties file, the format and its schema ids or source. By grant';

CREATE VIEW @extschema@.outbox_topics AS
	SELECT s.pattern, s.brokers, s.properties_file, s.format, s.value_schema,
		   s.key_schema, s.value_schema_id, s.key_schema_id, s.cloudevents_source,
		   s.updated_at
	  FROM @extschema@.outbox_topic_settings s;
COMMENT ON VIEW @extschema@.outbox_topics IS
	'The settings of topics by pattern, as outbox_set_topic() set them; NULL is the outbox.* setting.';

CREATE FUNCTION @extschema@.outbox_registry_check()
RETURNS text
AS 'MODULE_PATHNAME', 'outbox_registry_check'
LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION @extschema@.outbox_registry_check() FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.outbox_registry_check() IS
	'Whether the schema registry of outbox.schema_registry_url answers: its URL and compatibility level, else an error that says why not. By grant';

--
-- Monitoring
--

-- The histogram of a set of latencies, in milliseconds, and the sum of two
-- histograms (src/queue/histogram.c).
CREATE FUNCTION @extschema@.outbox_latency_histogram(latencies_ms double precision[])
RETURNS bigint[]
AS 'MODULE_PATHNAME', 'outbox_latency_histogram'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION @extschema@.outbox_latency_histogram(double precision[]) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.outbox_latency_histogram(double precision[]) IS
	'The latency histogram (128 buckets, bucket floor(4 * log2(1 + ms))) of latencies_ms. For the worker and tests; by grant';

-- No search_path pinned: it is C that adds two arrays, looks up no name
-- and runs nothing else, and a pin is a setting saved and restored at each
-- of the rows that a scrape of the statistics sums (twice its cost).
CREATE FUNCTION @extschema@.outbox_histogram_add(a bigint[], b bigint[])
RETURNS bigint[]
AS 'MODULE_PATHNAME', 'outbox_histogram_add'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
REVOKE ALL ON FUNCTION @extschema@.outbox_histogram_add(bigint[], bigint[]) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.outbox_histogram_add(bigint[], bigint[]) IS
	'Two latency histograms a and b added bucket by bucket; the step of outbox_histogram_sum. By grant (a monitoring role needs outbox_histogram_sum)';

CREATE AGGREGATE @extschema@.outbox_histogram_sum(bigint[]) (
	SFUNC = @extschema@.outbox_histogram_add,
	STYPE = bigint[],
	INITCOND = '{}'
);
REVOKE ALL ON FUNCTION @extschema@.outbox_histogram_sum(bigint[]) FROM PUBLIC;
COMMENT ON AGGREGATE @extschema@.outbox_histogram_sum(bigint[]) IS
	'The sum of latency histograms. By grant: a monitoring role reading outbox_stats or outbox_publish_stats';

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
COMMENT ON FUNCTION @extschema@.outbox_histogram_quantile(bigint[], double precision) IS
	'The latency (ms) below which a fraction q of a histogram''s deliveries fall, within 19%. By grant: a monitoring role';

-- The unread events of the log per topic, counted up to a bound; past it
-- a row with topic NULL gives an upper bound of the rest
-- (src/queue/reader.c).
CREATE FUNCTION @extschema@.outbox_unread_topics()
RETURNS TABLE (topic text, unread bigint, oldest_created_at timestamptz)
AS 'MODULE_PATHNAME', 'outbox_unread_topics'
LANGUAGE C STABLE
SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION @extschema@.outbox_unread_topics() FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.outbox_unread_topics() IS
	'The log''s unread events per topic (topic, unread, oldest_created_at), counted up to 10,000; past that a row with topic NULL bounds the rest. By grant: a monitoring role';

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
	'Queue and delivery health per topic, and in total (topic NULL). By grant: a monitoring role, with EXECUTE on outbox_unread_topics(), outbox_histogram_sum and outbox_histogram_quantile';

-- The snapshots asked for: how far each has got, and its status: running,
-- finished, or failed (last_error says why; asking again starts over).
CREATE VIEW @extschema@.outbox_snapshots AS
	SELECT s.relid::pg_catalog.regclass AS "table", s.rows_done, s.rows_estimated,
		   s.started, s.finished, s.format, s.topic, s.last_error,
		   CASE WHEN s.failed IS NOT NULL THEN 'failed'
				WHEN s.finished IS NOT NULL THEN 'finished'
				ELSE 'running' END AS status
	  FROM @extschema@.outbox_snapshots_state s;
COMMENT ON VIEW @extschema@.outbox_snapshots IS
	'Snapshots of attached tables: rows published, rows estimated, start and finish, format, topic, last_error, status (running, finished, failed). By grant';

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
COMMENT ON FUNCTION @extschema@.outbox_worker_status() IS
	'One row per database served or waiting to be, from shared memory: database, pid, state, state_since, started_at, brokers_up, published, failed, last_batch_at, last_error (another database''s for superusers and pg_monitor only). Needs the library preloaded. By grant: a monitoring role';

-- The Kafka clusters each running worker publishes to, from shared
-- memory (src/launcher/status.c).
CREATE FUNCTION @extschema@.outbox_cluster_status(
	OUT database name, OUT brokers text, OUT state text, OUT state_since timestamptz,
	OUT brokers_up integer, OUT published bigint, OUT failed bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'outbox_cluster_status'
LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION @extschema@.outbox_cluster_status() FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.outbox_cluster_status() IS
	'A row per Kafka cluster each running worker publishes to: state up, unreachable (its topics'' events wait) or closed (idle), broker connections up, events published and failed since the worker started; another database''s rows for superusers and pg_monitor only. By grant';

-- One row per signal of the database's publishing, worst first in
-- attention: status ok, warning or critical; detail says what and where;
-- since, when it began (NULL where that is not known).  The thresholds
-- are the settings outbox.health_backlog_warning and _critical, read here
-- with their defaults where the library is not loaded.  Where the library
-- is not preloaded no worker runs, and outbox_worker_status() is not
-- called (the gate of the worker CTE).
CREATE VIEW @extschema@.outbox_health AS
	WITH settings AS (
		SELECT pg_catalog.current_setting('outbox.max_workers', true) IS NOT NULL AS preloaded,
			   coalesce(pg_catalog.current_setting('outbox.health_backlog_warning', true), '60')::pg_catalog.interval AS backlog_warning,
			   coalesce(pg_catalog.current_setting('outbox.health_backlog_critical', true), '300')::pg_catalog.interval AS backlog_critical,
			   coalesce(pg_catalog.current_setting('outbox.max_workers', true), '8')::integer AS max_workers,
			   coalesce(pg_catalog.current_setting('outbox.brokers', true), 'localhost:9092') AS brokers,
			   coalesce(pg_catalog.current_setting('outbox.standby_slots', true), '') AS standby_slots
	), workers AS MATERIALIZED (
		SELECT w.*
		  FROM @extschema@.outbox_worker_status() w
		 WHERE (SELECT s.preloaded FROM settings s)
	), mine AS (
		SELECT w.*
		  FROM workers w
		 WHERE w.database OPERATOR(pg_catalog.=) pg_catalog.current_database() OR w.database IS NULL
	), down AS (
		SELECT pg_catalog.string_agg(c.brokers, '; ' ORDER BY c.brokers) AS clusters,
			   pg_catalog.min(c.state_since) AS since
		  FROM @extschema@.outbox_cluster_status() c
		 WHERE (SELECT s.preloaded FROM settings s)
		   AND c.database OPERATOR(pg_catalog.=) pg_catalog.current_database()
		   AND c.state OPERATOR(pg_catalog.=) 'unreachable'
	), oldest AS (
		SELECT d.topic, d.created_at
		  FROM (SELECT m.topic, m.created_at
				  FROM @extschema@.outbox_retries m
				 WHERE m.status OPERATOR(pg_catalog.=) ANY ('{pending,failed}')
				   AND (m.next_attempt_at IS NULL OR m.next_attempt_at OPERATOR(pg_catalog.<=) pg_catalog.now())
				UNION ALL
				SELECT u.topic, u.oldest_created_at
				  FROM @extschema@.outbox_unread_topics() u
				 WHERE u.oldest_created_at IS NOT NULL) AS d
		 ORDER BY d.created_at
		 LIMIT 1
	), failing AS (
		SELECT m.topic, pg_catalog.count(*) AS events, pg_catalog.min(m.created_at) AS since,
			   (pg_catalog.array_agg(m.last_error ORDER BY m.id DESC))[1] AS last_error
		  FROM @extschema@.outbox_retries m
		 WHERE m.status OPERATOR(pg_catalog.=) 'failed'
		 GROUP BY m.topic
	), abandoned AS (
		SELECT pg_catalog.sum(s.abandoned) AS last_hour, pg_catalog.min(s.bucket) AS since,
			   pg_catalog.string_agg(DISTINCT s.topic, ', ') AS topics
		  FROM @extschema@.outbox_publish_stats s
		 WHERE s.abandoned OPERATOR(pg_catalog.>) 0
		   AND s.bucket OPERATOR(pg_catalog.>) (pg_catalog.now() OPERATOR(pg_catalog.-) interval '1 hour')
	), missing_slots AS (
		SELECT pg_catalog.string_agg(pg_catalog.quote_ident(pg_catalog.btrim(l.slot)), ', ') AS slots
		  FROM settings s,
			   pg_catalog.unnest(pg_catalog.string_to_array(s.standby_slots, ',')) AS l(slot)
		 WHERE pg_catalog.btrim(l.slot) OPERATOR(pg_catalog.<>) ''
		   AND NOT EXISTS (SELECT FROM pg_catalog.pg_replication_slots r
							WHERE r.slot_name OPERATOR(pg_catalog.=) pg_catalog.btrim(l.slot)::name)
	), signals AS (
		SELECT 1 AS ord, 'worker' AS signal,
			   CASE WHEN w.state IS NULL THEN 'critical'
					WHEN w.state OPERATOR(pg_catalog.=) ANY ('{idle,publishing,parked,"broker unreachable","waiting for standby",standby}') THEN 'ok'
					WHEN w.state OPERATOR(pg_catalog.=) ANY ('{starting,disabled,"waiting for restore","waiting for worker slot"}') THEN 'warning'
					ELSE 'critical' END AS status,
			   CASE WHEN w.state IS NOT NULL THEN w.state OPERATOR(pg_catalog.||) coalesce(': ' OPERATOR(pg_catalog.||) w.last_error, '')
					WHEN NOT s.preloaded THEN 'no worker runs: outbox is not in shared_preload_libraries'
					ELSE 'no worker serves this database: it is not in outbox.databases' END AS detail,
			   w.state_since AS since
		  FROM settings s LEFT JOIN mine w ON true
		UNION ALL
		SELECT 2, 'brokers',
			   CASE WHEN w.state OPERATOR(pg_catalog.=) 'broker unreachable' OR d.clusters IS NOT NULL
					THEN 'critical' ELSE 'ok' END,
			   CASE WHEN w.state OPERATOR(pg_catalog.=) 'broker unreachable'
					THEN pg_catalog.format('no broker of %s answers: %s', s.brokers, w.last_error)
					WHEN d.clusters IS NOT NULL
					THEN pg_catalog.format('no broker of cluster %s answers: its topics wait', d.clusters)
					WHEN w.brokers_up IS NULL THEN pg_catalog.format('%s: no producer now', s.brokers)
					ELSE pg_catalog.format('%s: %s brokers up', s.brokers, w.brokers_up) END,
			   CASE WHEN w.state OPERATOR(pg_catalog.=) 'broker unreachable' THEN w.state_since
					ELSE d.since END
		  FROM settings s CROSS JOIN down d LEFT JOIN mine w ON true
		UNION ALL
		SELECT 3, 'backlog age',
			   CASE WHEN o.created_at IS NULL THEN 'ok'
					WHEN pg_catalog.now() OPERATOR(pg_catalog.-) o.created_at OPERATOR(pg_catalog.>) s.backlog_critical THEN 'critical'
					WHEN pg_catalog.now() OPERATOR(pg_catalog.-) o.created_at OPERATOR(pg_catalog.>) s.backlog_warning THEN 'warning'
					ELSE 'ok' END,
			   CASE WHEN o.created_at IS NULL THEN 'no event is due'
					ELSE pg_catalog.format('the oldest due event, of topic %s, is %s old',
										   o.topic, pg_catalog.to_char(pg_catalog.now() OPERATOR(pg_catalog.-) o.created_at, 'HH24:MI:SS')) END,
			   o.created_at
		  FROM settings s LEFT JOIN oldest o ON true
		UNION ALL
		SELECT 4, 'failing topics',
			   CASE WHEN pg_catalog.count(f.topic) OPERATOR(pg_catalog.>) 0 THEN 'critical' ELSE 'ok' END,
			   coalesce(pg_catalog.string_agg(pg_catalog.format('topic %s: %s events failing: %s', f.topic, f.events, f.last_error),
											  '; ' ORDER BY f.topic),
						'no topic is failing'),
			   pg_catalog.min(f.since)
		  FROM failing f
		UNION ALL
		SELECT 5, 'abandoned events',
			   CASE WHEN a.last_hour OPERATOR(pg_catalog.>) 0 THEN 'warning' ELSE 'ok' END,
			   CASE WHEN a.last_hour OPERATOR(pg_catalog.>) 0
					THEN pg_catalog.format('%s events abandoned in the last hour, of topics %s', a.last_hour, a.topics)
					ELSE 'no event abandoned in the last hour' END,
			   a.since
		  FROM abandoned a
		UNION ALL
		SELECT 6, 'snapshots',
			   CASE WHEN pg_catalog.count(n.last_error) OPERATOR(pg_catalog.>) 0 THEN 'warning' ELSE 'ok' END,
			   CASE WHEN pg_catalog.count(n.last_error) OPERATOR(pg_catalog.>) 0
					THEN pg_catalog.string_agg(pg_catalog.format('snapshot of %s: %s', n.relid::pg_catalog.regclass, n.last_error), '; ')
					ELSE pg_catalog.format('%s in progress', pg_catalog.count(*)) END,
			   pg_catalog.min(n.started) FILTER (WHERE n.last_error IS NOT NULL)
		  FROM @extschema@.outbox_snapshots_state n
		 WHERE n.finished IS NULL
		UNION ALL
		SELECT 7, 'worker slots',
			   CASE WHEN pg_catalog.min(w.state_since) FILTER (WHERE w.state OPERATOR(pg_catalog.=) 'waiting for worker slot')
						 OPERATOR(pg_catalog.<) (pg_catalog.now() OPERATOR(pg_catalog.-) s.backlog_warning) THEN 'critical'
					WHEN pg_catalog.count(*) FILTER (WHERE w.state OPERATOR(pg_catalog.=) 'waiting for worker slot') OPERATOR(pg_catalog.>) 0 THEN 'warning'
					WHEN pg_catalog.count(w.pid) OPERATOR(pg_catalog.>=) s.max_workers THEN 'warning'
					ELSE 'ok' END,
			   pg_catalog.format('%s of outbox.max_workers = %s in use', pg_catalog.count(w.pid), s.max_workers)
			   OPERATOR(pg_catalog.||)
			   coalesce('; waiting for one: ' OPERATOR(pg_catalog.||)
						pg_catalog.string_agg(pg_catalog.format('%I (%s)', w.database, w.last_error), ', ')
						FILTER (WHERE w.state OPERATOR(pg_catalog.=) 'waiting for worker slot'), ''),
			   pg_catalog.min(w.state_since) FILTER (WHERE w.state OPERATOR(pg_catalog.=) 'waiting for worker slot')
		  FROM settings s LEFT JOIN workers w ON true
		 GROUP BY s.max_workers, s.backlog_warning
		UNION ALL
		SELECT 8, 'standby gate',
			   CASE WHEN s.standby_slots OPERATOR(pg_catalog.=) '' THEN 'ok'
					WHEN m.slots IS NOT NULL THEN 'critical'
					WHEN w.state OPERATOR(pg_catalog.=) 'waiting for standby' THEN 'warning'
					ELSE 'ok' END,
			   CASE WHEN s.standby_slots OPERATOR(pg_catalog.=) '' THEN 'outbox.standby_slots is not set'
					WHEN m.slots IS NOT NULL THEN 'replication slots of outbox.standby_slots that do not exist: ' OPERATOR(pg_catalog.||) m.slots
					WHEN w.state OPERATOR(pg_catalog.=) 'waiting for standby' THEN w.last_error
					ELSE 'the standbys of ' OPERATOR(pg_catalog.||) s.standby_slots OPERATOR(pg_catalog.||) ' keep up' END,
			   CASE WHEN w.state OPERATOR(pg_catalog.=) 'waiting for standby' THEN w.state_since END
		  FROM settings s CROSS JOIN missing_slots m LEFT JOIN mine w ON true
		UNION ALL
		SELECT 9, 'version',
			   CASE WHEN e.extversion OPERATOR(pg_catalog.=) a.default_version THEN 'ok' ELSE 'warning' END,
			   CASE WHEN e.extversion OPERATOR(pg_catalog.=) a.default_version
					THEN pg_catalog.format('outbox %s', e.extversion)
					ELSE pg_catalog.format('outbox %s, and the installed scripts are at %s: ALTER EXTENSION outbox UPDATE',
										   e.extversion, a.default_version) END,
			   NULL::timestamptz
		  FROM pg_catalog.pg_extension e
		  LEFT JOIN pg_catalog.pg_available_extensions a ON a.name OPERATOR(pg_catalog.=) e.extname
		 WHERE e.extname OPERATOR(pg_catalog.=) 'outbox'
	)
	SELECT g.signal, g.status, g.detail, g.since
	  FROM signals g
	 ORDER BY g.ord;
REVOKE ALL ON @extschema@.outbox_health FROM PUBLIC;
COMMENT ON VIEW @extschema@.outbox_health IS
	'One row per signal (worker, brokers, backlog age, failing topics, abandoned events, snapshots, worker slots, standby gate, version): status ok, warning or critical, detail, since. A reader also needs EXECUTE on outbox_worker_status(), outbox_cluster_status() and outbox_unread_topics()';

-- The tables attached, from their triggers: kind capture (outbox_attach)
-- or router (outbox_attach_router), the format of their records, the
-- topic (capture in the outbox format), the prefix of the topics
-- (<prefix>.<schema>.<table>, the debezium format) or the pattern
-- (router), the other options as the trigger's name=value arguments.
CREATE VIEW @extschema@.outbox_attachments AS
	WITH attachments AS (
		SELECT t.tgrelid, t.tgname,
			   -- each argument ends with a zero byte
			   ARRAY(SELECT pg_catalog.convert_from(pg_catalog.substr(t.tgargs, b.start,
																	 b.stop OPERATOR(pg_catalog.-) b.start),
													pg_catalog.getdatabaseencoding())
					   FROM (SELECT z.i AS stop,
									coalesce(pg_catalog.lag(z.i) OVER (ORDER BY z.i), 0) OPERATOR(pg_catalog.+) 1 AS start
							   FROM pg_catalog.generate_series(1, pg_catalog.length(t.tgargs)) AS z(i)
							  WHERE pg_catalog.get_byte(t.tgargs, z.i OPERATOR(pg_catalog.-) 1) OPERATOR(pg_catalog.=) 0) AS b
					  ORDER BY b.stop) AS args
		  FROM pg_catalog.pg_trigger t
		 WHERE (t.tgname OPERATOR(pg_catalog.=) 'outbox_capture'
				AND t.tgfoid OPERATOR(pg_catalog.=) '@extschema@.outbox_capture()'::pg_catalog.regprocedure)
			OR (t.tgname OPERATOR(pg_catalog.=) 'outbox_router'
				AND t.tgfoid OPERATOR(pg_catalog.=) '@extschema@.outbox_router()'::pg_catalog.regprocedure)
	), parsed AS (
		SELECT a.tgrelid,
			   CASE WHEN a.tgname OPERATOR(pg_catalog.=) 'outbox_router' THEN 'router' ELSE 'capture' END AS kind,
			   CASE WHEN a.tgname OPERATOR(pg_catalog.=) 'outbox_router' THEN 'debezium router'
					WHEN 'format=debezium' OPERATOR(pg_catalog.=) ANY (a.args) THEN 'debezium'
					ELSE 'outbox' END AS format,
			   a.args
		  FROM attachments a
	)
	SELECT p.tgrelid::pg_catalog.regclass AS "table", p.kind, p.format,
		   CASE WHEN p.format OPERATOR(pg_catalog.=) 'outbox' THEN p.args[1]
				ELSE (SELECT pg_catalog.substr(o, 7) FROM pg_catalog.unnest(p.args) AS o
					   WHERE pg_catalog.starts_with(o, 'topic=') LIMIT 1) END AS topic,
		   CASE WHEN p.format OPERATOR(pg_catalog.=) 'outbox'
				THEN ARRAY(SELECT 'key=' OPERATOR(pg_catalog.||) k
							 FROM pg_catalog.unnest(p.args[2:]) WITH ORDINALITY AS x(k, n) ORDER BY x.n)
				ELSE ARRAY(SELECT o FROM pg_catalog.unnest(p.args) WITH ORDINALITY AS x(o, n)
							WHERE NOT pg_catalog.starts_with(o, 'topic=')
							  AND o OPERATOR(pg_catalog.<>) 'format=debezium'
							ORDER BY x.n) END AS options,
		   w.attached_by, w.attached_at
	  FROM parsed p
	  LEFT JOIN @extschema@.outbox_attached w ON w.relid OPERATOR(pg_catalog.=) p.tgrelid
	 ORDER BY p.tgrelid::pg_catalog.regclass::text;
REVOKE ALL ON @extschema@.outbox_attachments FROM PUBLIC;
COMMENT ON VIEW @extschema@.outbox_attachments IS
	'The tables attached: kind capture or router, format, topic (the prefix, or the router''s pattern), options, attached_by, attached_at. Read by whom it is granted to (nothing to PUBLIC)';

--
-- The functions the worker runs (src/queue/: claim.c, record.c,
-- retention.c), for SQL; they run statements on the extension's tables and
-- built-in functions only.
--

-- The transactions in progress in the current snapshot: its xip, and the
-- transactions that started before it and are newer than its xmax
-- (src/queue/reader.c).
CREATE FUNCTION @extschema@.outbox_in_progress()
RETURNS xid8[]
AS 'MODULE_PATHNAME', 'outbox_in_progress'
LANGUAGE C VOLATILE STRICT
SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION @extschema@.outbox_in_progress() FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.outbox_in_progress() IS
	'The transactions in progress in the current snapshot, as the claim sees them. The worker''s; by grant, for tests and repairs';

-- The log rows of the given ids, in id order, found with an index search
-- of each log table (src/queue/reader.c).
CREATE FUNCTION @extschema@.outbox_log_rows(ids bigint[])
RETURNS SETOF @extschema@.outbox_log
AS 'MODULE_PATHNAME', 'outbox_log_rows'
LANGUAGE C STABLE STRICT
SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION @extschema@.outbox_log_rows(bigint[]) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.outbox_log_rows(bigint[]) IS
	'The log''s rows of the events ids. The worker''s; by grant, for tests and repairs';

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
COMMENT ON FUNCTION @extschema@.outbox_unread(bigint, xid8, @extschema@.outbox_reader) IS
	'Whether the log''s event id of transaction txid is unread for the reader row r. The worker''s; by grant, for tests and repairs';

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
	'Every event, one row each: id, event_id, topic, key, payload, headers, status, attempts, next_attempt_at, last_error, created_at, published_at, kafka_partition, kafka_offset. By grant';

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
COMMENT ON FUNCTION @extschema@.outbox_claim(integer, bigint) IS
	'Claim the next due events, at most batch_size and max_bytes; the transaction must record each outcome before it commits. The worker''s; by grant, for tests and repairs';

-- Record deliveries: one ledger row for the log's events (none unless
-- keep), the retry table's published (deleted unless keep).
CREATE FUNCTION @extschema@.outbox_mark_published(ids bigint[], partitions integer[],
	offsets bigint[], keep boolean)
RETURNS bigint
AS 'MODULE_PATHNAME', 'outbox_mark_published'
LANGUAGE C VOLATILE STRICT
SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION @extschema@.outbox_mark_published(bigint[], integer[], bigint[], boolean) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.outbox_mark_published(bigint[], integer[], bigint[], boolean) IS
	'Record the claimed events ids as delivered at partitions and offsets; keep: keep them as published. The worker''s; by grant, for tests and repairs';

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
COMMENT ON FUNCTION @extschema@.outbox_mark_failed(bigint[], text[], boolean[], integer, interval, interval, double precision, text) IS
	'Record the claimed events ids as refused with errors (permanent: abandon at once), with the retry policy and the dead-letter topic. The worker''s; by grant, for tests and repairs';

-- Record claimed events that were not sent: due again, no attempt counted.
CREATE FUNCTION @extschema@.outbox_mark_released(ids bigint[])
RETURNS bigint
AS 'MODULE_PATHNAME', 'outbox_mark_released'
LANGUAGE C VOLATILE STRICT
SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION @extschema@.outbox_mark_released(bigint[]) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.outbox_mark_released(bigint[]) IS
	'Release the claimed events ids unsent, due again, no attempt counted. The worker''s; by grant, for tests and repairs';

-- The delay before attempt number attempts + 1: base * 2^(attempts - 1),
-- capped at max_delay, spread by +/- jitter.
CREATE FUNCTION @extschema@.outbox_retry_delay(attempts integer, base_delay interval,
	max_delay interval, jitter double precision)
RETURNS interval
AS 'MODULE_PATHNAME', 'outbox_retry_delay'
LANGUAGE C VOLATILE STRICT
SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION @extschema@.outbox_retry_delay(integer, interval, interval, double precision) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.outbox_retry_delay(integer, interval, interval, double precision) IS
	'The delay before the next attempt after attempts failures: base_delay doubled, at most max_delay, spread by jitter. By grant';

-- Copy abandoned events to the dead-letter topic, with headers naming the
-- original topic and event, its attempts and last error.
CREATE FUNCTION @extschema@.outbox_dead_letter(ids bigint[], dead_letter_topic text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'outbox_dead_letter'
LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION @extschema@.outbox_dead_letter(bigint[], text) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.outbox_dead_letter(bigint[], text) IS
	'Copy the abandoned events ids to dead_letter_topic, with their original topic, id, attempts and error as headers. The worker''s; by grant, for tests and repairs';

-- One batch of the retention cleanup of the retry table.
CREATE FUNCTION @extschema@.outbox_purge_batch(published_retention interval,
	abandoned_retention interval, batch_size integer)
RETURNS bigint
AS 'MODULE_PATHNAME', 'outbox_purge_batch'
LANGUAGE C VOLATILE STRICT
SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION @extschema@.outbox_purge_batch(interval, interval, integer) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.outbox_purge_batch(interval, interval, integer) IS
	'Delete up to batch_size rows of the retry table past their retention; returns how many. The worker''s; by grant';

-- Move enqueue on to the next log table when it is time, and empty by
-- TRUNCATE the tables whose events are all published and past the
-- retention; returns how many events it removed.
CREATE FUNCTION @extschema@.outbox_rotate(published_retention interval)
RETURNS bigint
AS 'MODULE_PATHNAME', 'outbox_rotate'
LANGUAGE C VOLATILE STRICT
SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION @extschema@.outbox_rotate(interval) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.outbox_rotate(interval) IS
	'Rotate the log ring: empty a table whose events are all published and past published_retention. The worker''s; by grant';

-- A restore writes the log by hand (COPY), which the worker waits out, and
-- each restored row takes the restoring transaction as its txid
-- (src/queue/restore.c).  ALWAYS: also under session_replication_role =
-- replica.
CREATE FUNCTION @extschema@.outbox_restored()
RETURNS trigger
AS 'MODULE_PATHNAME', 'outbox_restored'
LANGUAGE C
SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION @extschema@.outbox_restored() FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.outbox_restored() IS
	'Trigger function on the log tables that notes a restore in progress (pg_restore); the extension''s own, nothing else calls it';
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

-- Enqueue keeps the settings of topics for the session, to know a topic's
-- format without reading the table at each event; each statement that
-- writes the table makes every session read it again (src/format/topics.c).
CREATE FUNCTION @extschema@.outbox_topic_settings_changed()
RETURNS trigger
AS 'MODULE_PATHNAME', 'outbox_topic_settings_changed'
LANGUAGE C
SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION @extschema@.outbox_topic_settings_changed() FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.outbox_topic_settings_changed() IS
	'The trigger of outbox_topic_settings: the settings that sessions keep for outbox_enqueue are read again after a change. Nothing else calls it.';
CREATE TRIGGER outbox_topic_settings_changed
	AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON @extschema@.outbox_topic_settings
	FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.outbox_topic_settings_changed();
-- ALWAYS: also under session_replication_role = replica (a restore, a
-- subscription that applies the table), or sessions keep stale settings.
ALTER TABLE @extschema@.outbox_topic_settings
	ENABLE ALWAYS TRIGGER outbox_topic_settings_changed;
