/* outbox--1.1--1.2.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION outbox UPDATE TO '1.2'" to load this file. \quit

--
-- 1.2 closes the ways in which a role could make the extension's code run
-- its own with more rights than it has, or keep the worker from working:
--
-- * The extension's schema must be owned by the extension's owner or by a
--   superuser: whoever owns it could rename it and put look-alikes in its
--   place.  The library checks it too, before every batch and every call
--   that touches the extension's tables.
-- * No SQL of the extension calls another of its functions by name at run
--   time: a role with CREATE on the schema could plant a closer overload,
--   or one that makes the call ambiguous.  The worker's state machine and
--   the operators' functions are C, and run statements on the extension's
--   tables and built-in functions only.
-- * The claim takes a lock that only the extension's code can take (a
--   sub-object of the extension), not an advisory lock that any role can
--   take.
-- * outbox_unread_events(r), given a made-up reader row, listed published
--   events: outbox_unread_topics() counts what is unread now, per topic,
--   and stops after a bound (an estimate beyond it).
--
-- The claim's lock writes nothing, and the claim counts the events whose
-- outcome is still to be recorded in memory, checked before commit: the
-- reader row is updated once a batch, no longer three times, and found by
-- where it was last written, whatever old versions a snapshot held
-- elsewhere keeps.
--
-- It also makes pg_dump keep the queue (the unpublished events, the retry
-- table, the event ids, the id sequence), refuses DROP EXTENSION while
-- events are not delivered (outbox_discard() gives them up on purpose),
-- and keeps keys of any length out of the retry table's index.
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

-- what 1.1 ran as SQL and 1.2 runs in C, or no longer needs
DROP VIEW @extschema@.outbox_stats;
DROP FUNCTION @extschema@.outbox_unread_events(@extschema@.outbox_reader);
DROP FUNCTION @extschema@.outbox_mark_logged(bigint[], integer[], bigint[], text[], timestamptz[], boolean);
DROP FUNCTION @extschema@.outbox_count_published(text[], timestamptz[]);
DROP FUNCTION @extschema@.outbox_copy_to_retries(bigint[]);
DROP FUNCTION @extschema@.outbox_count_recorded(bigint);
DROP FUNCTION @extschema@.outbox_lock_reader(boolean);
-- no search_path pinned on the statistics' sum (outbox--1.2.sql says why)
ALTER FUNCTION @extschema@.outbox_histogram_add(bigint[], bigint[]) RESET search_path;
DROP TRIGGER outbox_check_recorded ON @extschema@.outbox_reader;
DROP FUNCTION @extschema@.outbox_check_recorded();
ALTER TABLE @extschema@.outbox_reader DROP COLUMN unrecorded;

CREATE OR REPLACE FUNCTION @extschema@.outbox_mark_published(ids bigint[], partitions integer[],
	offsets bigint[], keep boolean)
RETURNS bigint
AS 'MODULE_PATHNAME', 'outbox_mark_published'
LANGUAGE C VOLATILE STRICT
SET search_path = pg_catalog, pg_temp;

CREATE OR REPLACE FUNCTION @extschema@.outbox_mark_failed(ids bigint[], errors text[],
	permanent boolean[], max_attempts integer, base_delay interval,
	max_delay interval, jitter double precision, dead_letter_topic text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'outbox_mark_failed'
LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;

CREATE OR REPLACE FUNCTION @extschema@.outbox_mark_released(ids bigint[])
RETURNS bigint
AS 'MODULE_PATHNAME', 'outbox_mark_released'
LANGUAGE C VOLATILE STRICT
SET search_path = pg_catalog, pg_temp;

CREATE OR REPLACE FUNCTION @extschema@.outbox_dead_letter(ids bigint[], dead_letter_topic text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'outbox_dead_letter'
LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;

CREATE OR REPLACE FUNCTION @extschema@.outbox_retry_delay(attempts integer, base_delay interval,
	max_delay interval, jitter double precision)
RETURNS interval
AS 'MODULE_PATHNAME', 'outbox_retry_delay'
LANGUAGE C VOLATILE STRICT
SET search_path = pg_catalog, pg_temp;

CREATE OR REPLACE FUNCTION @extschema@.outbox_purge_batch(published_retention interval,
	abandoned_retention interval, batch_size integer)
RETURNS bigint
AS 'MODULE_PATHNAME', 'outbox_purge_batch'
LANGUAGE C VOLATILE STRICT
SET search_path = pg_catalog, pg_temp;

CREATE OR REPLACE FUNCTION @extschema@.outbox_rotate(published_retention interval)
RETURNS bigint
AS 'MODULE_PATHNAME', 'outbox_rotate'
LANGUAGE C VOLATILE STRICT
SET search_path = pg_catalog, pg_temp;

CREATE OR REPLACE FUNCTION @extschema@.outbox_purge()
RETURNS bigint
AS 'MODULE_PATHNAME', 'outbox_purge'
LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;

CREATE OR REPLACE FUNCTION @extschema@.outbox_retry(id bigint)
RETURNS integer
AS 'MODULE_PATHNAME', 'outbox_retry'
LANGUAGE C VOLATILE STRICT
SET search_path = pg_catalog, pg_temp;

CREATE OR REPLACE FUNCTION @extschema@.outbox_retry_abandoned(topic text DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'outbox_retry_abandoned'
LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;

CREATE OR REPLACE FUNCTION @extschema@.outbox_abandon(id bigint)
RETURNS integer
AS 'MODULE_PATHNAME', 'outbox_abandon'
LANGUAGE C VOLATILE STRICT
SET search_path = pg_catalog, pg_temp;

-- Give up on every event not delivered yet, on purpose (what DROP
-- EXTENSION asks for before it drops undelivered events).
CREATE FUNCTION @extschema@.outbox_discard()
RETURNS bigint
AS 'MODULE_PATHNAME', 'outbox_discard'
LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION @extschema@.outbox_discard() FROM PUBLIC;

-- The unread events of the log per topic, counted up to a bound; past it
-- a row with topic NULL gives an upper bound of the rest (src/reader.c).
CREATE FUNCTION @extschema@.outbox_unread_topics()
RETURNS TABLE (topic text, unread bigint, oldest_created_at timestamptz)
AS 'MODULE_PATHNAME', 'outbox_unread_topics'
LANGUAGE C STABLE
SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION @extschema@.outbox_unread_topics() FROM PUBLIC;

-- Keys of any length: the index holds a hash of the key, not the key (a
-- 6,000-byte key did not fit in a btree entry, and its batch failed).
DROP INDEX @extschema@.outbox_retries_unfinished_key;
CREATE INDEX outbox_retries_unfinished_key ON @extschema@.outbox_retries
	(topic, pg_catalog.hashtextextended(key, 0), id)
	WHERE status OPERATOR(pg_catalog.=) ANY ('{pending,failed}') AND key IS NOT NULL;

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

-- Per topic, and in total (topic NULL): the queue now, and deliveries over
-- the last minute and hour.  The unread events of the log are counted up
-- to a bound; beyond it, the total is an estimate bounded from above.
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

--
-- Capture in Debezium's shapes, and snapshots on attach: outbox_attach
-- takes a format, a snapshot and tombstones (the three-argument calls of
-- 1.1 keep working, and the triggers 1.1 created keep theirs), and
-- outbox_attach_router publishes an outbox table as Debezium's outbox
-- event router does.  outbox_detach, now in C, removes either, and cancels
-- a snapshot in progress.
--

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

DROP FUNCTION @extschema@.outbox_attach(regclass, text, text[]);

-- Capturing row changes: outbox_attach('orders', 'orders.changes') makes
-- every change of orders an event (src/capture.c), in the extension's
-- envelope or, with format => 'debezium', as Debezium's PostgreSQL
-- connector writes it (src/debezium.c); snapshot => true also publishes
-- the rows the table has (src/snapshot.c).  The trigger runs with the
-- rights of the role that changed the row.
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
CREATE OR REPLACE FUNCTION @extschema@.outbox_detach(tbl regclass)
RETURNS void
AS 'MODULE_PATHNAME', 'outbox_detach'
LANGUAGE C VOLATILE STRICT
SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION @extschema@.outbox_detach(regclass) FROM PUBLIC;

-- The snapshots asked for: how far each has got, and when it finished.
CREATE VIEW @extschema@.outbox_snapshots AS
	SELECT s.relid::pg_catalog.regclass AS "table", s.rows_done, s.rows_estimated,
		   s.started, s.finished, s.format, s.topic, s.last_error
	  FROM @extschema@.outbox_snapshots_state s;

COMMENT ON VIEW @extschema@.outbox_snapshots IS
	'Snapshots of attached tables: rows published, rows estimated, start and finish';
