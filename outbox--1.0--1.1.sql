/* outbox--1.0--1.1.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION outbox UPDATE TO '1.1'" to load this file. \quit

--
-- 1.1 closes the ways in which code of another role could run with the
-- rights of the extension's owner or of the worker:
--
-- * Every function pins search_path, so that an operator, function or type
--   that a role plants in a schema on the caller's search_path (public,
--   say) is never resolved in its body.  The worker calls these functions
--   too.
-- * outbox_capture no longer runs as its owner: the envelope (row_to_json,
--   output functions, casts to json of the table's types) is built with
--   the rights of the role that changed the row; the event is stored as
--   outbox_enqueue stores it (src/trigger.c).
--
-- outbox_worker_status() returns a row per database, as 1.1 has a worker
-- per database.
--
-- It also changes the storage: events are appended to a log that
-- publishing does not rewrite, a batch's deliveries are one ledger row, and
-- only refused events (and those that wait behind them) are written again,
-- in a retry table; outbox_messages becomes a view of both.  A batch is
-- bounded by bytes too.
--

ALTER FUNCTION @extschema@.outbox_capture() SECURITY INVOKER;

-- outbox_enqueue inserts straight into the table (src/enqueue.c): it checks
-- no permission on the table, looks up no name through search_path and
-- evaluates nothing but built-in functions, so it needs neither its owner's
-- rights nor a pinned search_path, whose save and restore at every call
-- cost as much as the insert.  EXECUTE on it remains the right to enqueue.
ALTER FUNCTION @extschema@.outbox_enqueue(text, jsonb, text, jsonb, uuid)
	SECURITY INVOKER RESET search_path;
ALTER FUNCTION @extschema@.outbox_enqueue(text, text, text, jsonb, uuid)
	SECURITY INVOKER RESET search_path;
ALTER FUNCTION @extschema@.outbox_enqueue(text, bytea, text, jsonb, uuid)
	SECURITY INVOKER RESET search_path;

--
-- The event log (README, "Storage").  Events are appended to a ring of
-- four tables and never updated or deleted one by one: a batch's delivery
-- is one ledger row, and a table is emptied by TRUNCATE once every event
-- in it is finished and past outbox.published_retention.  Only the events
-- that Kafka refuses, and the later events of their keys, are copied to
-- outbox_retries and written again there.  outbox_messages is a view of
-- both.
--
-- The 1.0 table becomes the retry table, rows and states as they are: its
-- pending and failed events are published from there.
--
ALTER TABLE @extschema@.outbox_messages RENAME TO outbox_retries;
ALTER INDEX @extschema@.outbox_messages_pkey RENAME TO outbox_retries_pkey;
ALTER INDEX @extschema@.outbox_messages_event_id_key RENAME TO outbox_retries_event_id_key;
ALTER INDEX @extschema@.outbox_messages_due RENAME TO outbox_retries_due;
ALTER INDEX @extschema@.outbox_messages_abandoned RENAME TO outbox_retries_abandoned;
DROP INDEX @extschema@.outbox_messages_failed_key;
-- later events of a key wait while it has an unfinished event here
CREATE INDEX outbox_retries_unfinished_key ON @extschema@.outbox_retries (topic, key, id)
	WHERE status IN ('pending', 'failed') AND key IS NOT NULL;

-- one sequence numbers the events of the log and of the retry table
CREATE SEQUENCE @extschema@.outbox_event_id_seq;
SELECT pg_catalog.setval('@extschema@.outbox_event_id_seq', s.last_value, s.is_called)
  FROM @extschema@.outbox_messages_id_seq s;
ALTER TABLE @extschema@.outbox_retries ALTER COLUMN id DROP IDENTITY;
ALTER TABLE @extschema@.outbox_retries
	ALTER COLUMN id SET DEFAULT pg_catalog.nextval('@extschema@.outbox_event_id_seq'::pg_catalog.regclass);
-- rows are updated here: keep room for HOT updates, vacuum it often
ALTER TABLE @extschema@.outbox_retries SET (fillfactor = 80);

COMMENT ON TABLE @extschema@.outbox_retries IS
	'Events that Kafka refused, and the later events of their keys: the only events written again';

-- txid is the enqueuing transaction's, taken before its id (src/enqueue.c).
-- The parent holds no rows: outbox_enqueue writes to a child.
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

-- Caller-given event ids, so that a duplicate fails with 23505 without an
-- index on event_id in the log; kept while the event is.
CREATE TABLE @extschema@.outbox_event_ids (
	event_id		uuid PRIMARY KEY,
	id				bigint NOT NULL
);
INSERT INTO @extschema@.outbox_event_ids SELECT event_id, id FROM @extschema@.outbox_retries;

--
-- Where the worker is in the log, one row, updated in place (HOT) twice a
-- batch.  last_id: the highest id read.  running: transactions that were
-- in progress when last_id was read, and so may hold smaller unread ids;
-- once one ends its events are read by txid: draining holds those being
-- read, up to id drain_upto, after id drain_after.  unrecorded: events read
-- from the log by this transaction's claims whose outcome is not recorded
-- yet (0 at commit, or the commit fails).  current_log: the table that
-- outbox_enqueue writes to, since current_since.
--
CREATE TABLE @extschema@.outbox_reader (
	single			boolean PRIMARY KEY DEFAULT true CHECK (single),
	last_id			bigint NOT NULL,
	running			xid8[] NOT NULL DEFAULT '{}',
	draining		xid8[] NOT NULL DEFAULT '{}',
	drain_upto		bigint NOT NULL DEFAULT 0,
	drain_after		bigint NOT NULL DEFAULT 0,
	unrecorded		bigint NOT NULL DEFAULT 0,
	current_log		integer NOT NULL DEFAULT 0 CHECK (current_log BETWEEN 0 AND 3),
	current_since	timestamptz NOT NULL DEFAULT pg_catalog.now()
) WITH (fillfactor = 20);
-- every event of 1.0 is in outbox_retries: the log starts after them
INSERT INTO @extschema@.outbox_reader (last_id)
	SELECT CASE WHEN s.is_called THEN s.last_value ELSE 0 END
	  FROM @extschema@.outbox_event_id_seq s;

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
-- lz4 compresses the arrays at a fraction of pglz's CPU (pglz took a fifth
-- of the worker's CPU at full speed); a server built without lz4 keeps pglz
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

-- The transactions in progress in the current snapshot: its xip, and the
-- transactions that started before it and are newer than its xmax
-- (src/reader.c).
CREATE FUNCTION @extschema@.outbox_in_progress()
RETURNS xid8[]
AS 'MODULE_PATHNAME', 'outbox_in_progress'
LANGUAGE C VOLATILE STRICT
SET search_path = pg_catalog, pg_temp;

-- The log rows of the given ids, in id order, found with an index search
-- of each log table (src/reader.c): the planner has no statistics of the
-- log tables, which are never analyzed.
CREATE FUNCTION @extschema@.outbox_log_rows(ids bigint[])
RETURNS SETOF @extschema@.outbox_log
AS 'MODULE_PATHNAME', 'outbox_log_rows'
LANGUAGE C STABLE STRICT
SET search_path = pg_catalog, pg_temp;

-- The log events that reader r has not read yet (src/reader.c).
CREATE FUNCTION @extschema@.outbox_unread_events(r @extschema@.outbox_reader)
RETURNS TABLE (id bigint, topic text, created_at timestamptz)
AS 'MODULE_PATHNAME', 'outbox_unread_events'
LANGUAGE C STABLE STRICT
SET search_path = pg_catalog, pg_temp;

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

-- Serialises the claim with what moves events between the log and the
-- retry table.
CREATE FUNCTION @extschema@.outbox_lock_reader(wait boolean)
RETURNS boolean
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	IF wait THEN
		PERFORM pg_advisory_xact_lock(hashtext('outbox_claim'),
									  '@extschema@.outbox_reader'::regclass::oid::integer);
		RETURN true;
	END IF;
	RETURN pg_try_advisory_xact_lock(hashtext('outbox_claim'),
									 '@extschema@.outbox_reader'::regclass::oid::integer);
END
$$;

-- Copy log events into the retry table as pending (held back, or released
-- unsent), unless they are there already.  Returns how many it copied.
CREATE FUNCTION @extschema@.outbox_copy_to_retries(ids bigint[])
RETURNS bigint
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
	WITH copied AS (
		INSERT INTO @extschema@.outbox_retries (id, event_id, topic, key, payload, headers, created_at)
		SELECT l.id, l.event_id, l.topic, l.key, l.payload, l.headers, l.created_at
		  FROM @extschema@.outbox_log_rows(ids) l
		 WHERE NOT EXISTS (SELECT FROM @extschema@.outbox_retries m WHERE m.id = l.id)
		 ORDER BY l.id
		RETURNING 1
	)
	SELECT count(*) FROM copied
$$;

-- Count log events whose outcome this transaction recorded.
-- (The functions the worker runs per batch are PL/pgSQL, whose plans are
-- kept for the session: a SQL function with SET is parsed and planned at
-- each call.)
CREATE FUNCTION @extschema@.outbox_count_recorded(n bigint)
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	UPDATE @extschema@.outbox_reader
	   SET unrecorded = greatest(unrecorded - n, 0)
	 WHERE n > 0;
END
$$;

-- Claim up to batch_size due events, and at most about max_bytes of them:
-- first the due events of the retry table (locked until the end of the
-- transaction), then the next events of the log.  An event of the retry
-- table is claimed only if every earlier unfinished event of its key there
-- is claimed with it; an event of the log whose key has an unfinished
-- event in the retry table is copied there instead, to wait its turn.
-- The log is read in id order past last_id, with the snapshot's
-- transactions in progress: an event with a smaller id that one of them
-- commits later is read by its txid once it has ended, so none is skipped,
-- however late its transaction commits (src/reader.c).  Every log event
-- claimed must be recorded (outbox_mark_published, outbox_mark_failed,
-- outbox_mark_released) before the transaction commits.  One claim runs at
-- a time: a second claimer gets nothing until the first ends.  The
-- worker's own claim (src/claim.c).
DROP FUNCTION @extschema@.outbox_claim(integer);
CREATE FUNCTION @extschema@.outbox_claim(batch_size integer,
	max_bytes bigint DEFAULT 16777216)
RETURNS TABLE (id bigint, event_id uuid, topic text, key text,
			   payload bytea, headers jsonb)
AS 'MODULE_PATHNAME', 'outbox_claim'
LANGUAGE C VOLATILE STRICT
SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION @extschema@.outbox_claim(integer, bigint) FROM PUBLIC;

-- At commit: every log event claimed in this transaction has its outcome.
CREATE FUNCTION @extschema@.outbox_check_recorded()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	IF (SELECT s.unrecorded FROM @extschema@.outbox_reader s) <> 0 THEN
		RAISE EXCEPTION 'events claimed by outbox_claim() were not recorded'
			USING ERRCODE = 'object_not_in_prerequisite_state',
				  HINT = 'Record each claimed event with outbox_mark_published(), outbox_mark_failed() or outbox_mark_released() in the transaction that claimed it.';
	END IF;
	RETURN NULL;
END
$$;
CREATE CONSTRAINT TRIGGER outbox_check_recorded
	AFTER UPDATE ON @extschema@.outbox_reader
	DEFERRABLE INITIALLY DEFERRED
	FOR EACH ROW WHEN (NEW.unrecorded <> 0)
	EXECUTE FUNCTION @extschema@.outbox_check_recorded();

-- Count published events, of the given topics and creation times, in
-- outbox_publish_stats; returns how many.
CREATE FUNCTION @extschema@.outbox_count_published(topics text[], created_at timestamptz[])
RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	counted bigint;
BEGIN
	WITH done AS (
		SELECT d.topic, 1000 * date_part('epoch', clock_timestamp() - d.created_at) AS ms
		  FROM ROWS FROM (unnest(topics), unnest(created_at)) AS d(topic, created_at)
	), counted AS (
		INSERT INTO @extschema@.outbox_publish_stats AS s
			(topic, bucket, published, latency_ms_sum, latency_histogram)
		SELECT done.topic, date_bin('10 seconds', now(), 'epoch'),
			   count(*), sum(done.ms),
			   @extschema@.outbox_latency_histogram(array_agg(done.ms))
		  FROM done
		 GROUP BY done.topic
		ON CONFLICT (topic, bucket) DO UPDATE
		   SET published = s.published + excluded.published,
			   latency_ms_sum = s.latency_ms_sum + excluded.latency_ms_sum,
			   latency_histogram = @extschema@.outbox_histogram_add(s.latency_histogram,
																	excluded.latency_histogram)
	)
	SELECT count(*) INTO counted FROM done;
	RETURN counted;
END
$$;

-- Record deliveries of log events (ids in increasing order, with their
-- topics and creation times): one ledger row, none when keep is false
-- (outbox.published_retention = 0: nothing will show them), and their
-- count in outbox_publish_stats.  What the worker calls, with what it read
-- from the log at hand; returns how many.
CREATE FUNCTION @extschema@.outbox_mark_logged(ids bigint[], partitions integer[],
	offsets bigint[], topics text[], created_at timestamptz[], keep boolean)
RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	IF keep AND cardinality(ids) > 0 THEN
		INSERT INTO @extschema@.outbox_ledger (first_id, last_id, ids, partitions, offsets, published_at)
		VALUES (ids[1], ids[cardinality(ids)], ids, partitions, offsets, clock_timestamp());
	END IF;
	PERFORM @extschema@.outbox_count_recorded(cardinality(ids));
	RETURN @extschema@.outbox_count_published(topics, created_at);
END
$$;

-- Record deliveries.  Events of the log: outbox_mark_logged.  Events of
-- the retry table: published, or deleted when keep is false, and counted
-- in outbox_publish_stats.  Returns how many it recorded.
CREATE OR REPLACE FUNCTION @extschema@.outbox_mark_published(ids bigint[], partitions integer[],
	offsets bigint[], keep boolean)
RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	logged bigint;
	retried bigint;
BEGIN
	-- first the log, while the retry table still has the events it holds
	SELECT @extschema@.outbox_mark_logged(
			   coalesce(array_agg(l.id ORDER BY l.id), '{}'),
			   coalesce(array_agg(d.kafka_partition ORDER BY l.id), '{}'),
			   coalesce(array_agg(d.kafka_offset ORDER BY l.id), '{}'),
			   coalesce(array_agg(l.topic ORDER BY l.id), '{}'),
			   coalesce(array_agg(l.created_at ORDER BY l.id), '{}'), keep)
	  INTO logged
	  FROM @extschema@.outbox_log_rows(ids) l
	  JOIN ROWS FROM (unnest(ids), unnest(partitions), unnest(offsets))
		   AS d(id, kafka_partition, kafka_offset) ON d.id = l.id
	 WHERE NOT EXISTS (SELECT FROM @extschema@.outbox_retries m WHERE m.id = l.id);

	WITH delivered AS (
		SELECT u.id, u.kafka_partition, u.kafka_offset
		  FROM ROWS FROM (unnest(ids), unnest(partitions), unnest(offsets))
			   AS u(id, kafka_partition, kafka_offset)
	), kept AS (
		UPDATE @extschema@.outbox_retries m
		   SET status = 'published',
			   attempts = m.attempts + 1,
			   published_at = clock_timestamp(),
			   next_attempt_at = NULL,
			   kafka_partition = d.kafka_partition,
			   kafka_offset = d.kafka_offset
		  FROM delivered d
		 WHERE keep AND m.id = d.id
		RETURNING m.topic, m.created_at
	), deleted AS (
		DELETE FROM @extschema@.outbox_retries m
		 WHERE NOT keep AND m.id = ANY (ids)
		RETURNING m.topic, m.created_at
	)
	SELECT @extschema@.outbox_count_published(coalesce(array_agg(d.topic), '{}'),
											  coalesce(array_agg(d.created_at), '{}'))
	  INTO retried
	  FROM (SELECT k.topic, k.created_at FROM kept k
			UNION ALL SELECT x.topic, x.created_at FROM deleted x) d;
	RETURN logged + retried;
END
$$;

-- Record refused deliveries: failed with a backoff, or abandoned after the
-- last attempt or an error that retrying cannot fix.  Events of the log
-- are copied to the retry table first.  Abandoned events go to
-- dead_letter_topic unless it is empty.  Counts them in
-- outbox_publish_stats.
CREATE OR REPLACE FUNCTION @extschema@.outbox_mark_failed(ids bigint[], errors text[],
	permanent boolean[], max_attempts integer, base_delay interval,
	max_delay interval, jitter double precision, dead_letter_topic text)
RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	marked bigint;
	abandoned_ids bigint[];
BEGIN
	PERFORM @extschema@.outbox_count_recorded(@extschema@.outbox_copy_to_retries(ids));
	WITH done AS (
		UPDATE @extschema@.outbox_retries m
		   SET attempts = m.attempts + 1,
			   last_error = u.error,
			   status = CASE WHEN u.permanent OR m.attempts + 1 >= max_attempts
							 THEN 'abandoned' ELSE 'failed'
						END::@extschema@.outbox_status,
			   next_attempt_at = CASE WHEN u.permanent OR m.attempts + 1 >= max_attempts
									  THEN NULL
									  ELSE clock_timestamp()
										   + @extschema@.outbox_retry_delay(m.attempts + 1, base_delay,
																			max_delay, jitter)
								 END
		  FROM ROWS FROM (unnest(ids), unnest(errors), unnest(permanent))
			   AS u(id, error, permanent)
		 WHERE m.id = u.id
		RETURNING m.id, m.topic, m.status
	), counted AS (
		INSERT INTO @extschema@.outbox_publish_stats AS s (topic, bucket, failed, abandoned)
		SELECT d.topic, date_bin('10 seconds', now(), 'epoch'),
			   count(*) FILTER (WHERE d.status = 'failed'),
			   count(*) FILTER (WHERE d.status = 'abandoned')
		  FROM done d
		 GROUP BY d.topic
		ON CONFLICT (topic, bucket) DO UPDATE
		   SET failed = s.failed + excluded.failed,
			   abandoned = s.abandoned + excluded.abandoned
	)
	SELECT count(*), array_agg(d.id) FILTER (WHERE d.status = 'abandoned')
	  INTO marked, abandoned_ids
	  FROM done d;

	PERFORM @extschema@.outbox_dead_letter(abandoned_ids, dead_letter_topic);
	RETURN marked;
END
$$;

-- Record claimed events that were not sent (an outage, a shutdown): due
-- again, with no attempt counted.  Events of the log are copied to the
-- retry table.  Returns how many were released.
CREATE FUNCTION @extschema@.outbox_mark_released(ids bigint[])
RETURNS bigint
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
	SELECT @extschema@.outbox_count_recorded(@extschema@.outbox_copy_to_retries(ids));
	SELECT pg_catalog.cardinality(ids)::bigint
$$;

-- Send abandoned events to a dead-letter topic: each becomes a new event of
-- that topic, with the original key, payload and headers, plus headers
-- naming the original topic and event, its attempts and last error.
-- Events of the dead-letter topic itself are not sent again.  Dead letters
-- are few: they are stored in the retry table.
CREATE OR REPLACE FUNCTION @extschema@.outbox_dead_letter(ids bigint[], dead_letter_topic text)
RETURNS bigint
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
	WITH sent AS (
		INSERT INTO @extschema@.outbox_retries (topic, key, payload, headers)
		SELECT dead_letter_topic, m.key, m.payload,
			   coalesce(m.headers, '{}')
			   || jsonb_build_object('original_topic', m.topic,
									 'original_event_id', m.event_id::text,
									 'attempts', m.attempts::text,
									 'last_error', coalesce(m.last_error, ''))
		  FROM @extschema@.outbox_retries m
		 WHERE m.id = ANY (ids)
		   AND m.status = 'abandoned'
		   AND coalesce(dead_letter_topic, '') <> ''
		   AND m.topic <> dead_letter_topic
		 ORDER BY m.id
		RETURNING 1
	)
	SELECT count(*) FROM sent
$$;

--
-- Every event, as one table: the retry table's rows, and the log's others.
-- An event of the log is pending until read, then published (the claim
-- records every event it reads); a published one is shown while
-- outbox.published_retention lasts.
--
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

--
-- Retention.  The retry table is cleaned up row by row, as 1.0 did; the
-- log by outbox_rotate(), a table at a time.
--
CREATE OR REPLACE FUNCTION @extschema@.outbox_purge_batch(published_retention interval,
	abandoned_retention interval, batch_size integer)
RETURNS bigint
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
	WITH published AS (
		DELETE FROM @extschema@.outbox_retries
		 WHERE id IN (SELECT m.id FROM @extschema@.outbox_retries m
					   WHERE m.status = 'published'
						 AND m.published_at < now() - published_retention
					   LIMIT batch_size
						 FOR UPDATE SKIP LOCKED)
		RETURNING 1
	), abandoned AS (
		DELETE FROM @extschema@.outbox_retries
		 WHERE id IN (SELECT id FROM @extschema@.outbox_retries
					   WHERE status = 'abandoned'
						 AND created_at < now() - abandoned_retention
					   LIMIT batch_size
						 FOR UPDATE SKIP LOCKED)
		RETURNING 1
	), stats AS (
		DELETE FROM @extschema@.outbox_publish_stats
		 WHERE bucket < now() - interval '2 hours'
	)
	SELECT (SELECT count(*) FROM published) + (SELECT count(*) FROM abandoned)
$$;

-- Move outbox_enqueue on to the next log table once the current one has
-- taken events for half the retention (10 s at least) and the next is
-- empty; empty by TRUNCATE every other table whose events are all read and
-- were published longer than published_retention ago.  Returns how many
-- events it removed.
CREATE FUNCTION @extschema@.outbox_rotate(published_retention interval)
RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	r @extschema@.outbox_reader;
	tbl text;
	removable boolean;
	next_empty boolean;
	removed bigint := 0;
	n bigint;
BEGIN
	PERFORM @extschema@.outbox_lock_reader(true);
	SELECT * INTO STRICT r FROM @extschema@.outbox_reader;

	FOR t IN 0..3 LOOP
		CONTINUE WHEN t = r.current_log;
		tbl := format('@extschema@.%I', 'outbox_log_' || t);
		-- a transaction that wrote to it and is still open holds a lock
		BEGIN
			EXECUTE format('LOCK TABLE %s IN ACCESS EXCLUSIVE MODE NOWAIT', tbl);
		EXCEPTION WHEN lock_not_available THEN
			CONTINUE;
		END;
		-- every event read and recorded, the last delivery past retention
		EXECUTE format($q$
			WITH b AS (SELECT min(id) AS first_id, max(id) AS last_id FROM %s)
			SELECT b.last_id IS NOT NULL
			   AND b.last_id <= $1.last_id
			   AND NOT EXISTS (SELECT FROM %s l WHERE l.txid = ANY ($1.running || $1.draining))
			   AND coalesce((SELECT max(g.published_at) FROM @extschema@.outbox_ledger g
							  WHERE int8range(g.first_id, g.last_id, '[]')
									&& int8range(b.first_id, b.last_id, '[]')),
							'-infinity') < now() - $2
			  FROM b$q$, tbl, tbl)
		   INTO STRICT removable USING r, published_retention;
		IF removable THEN
			EXECUTE format('SELECT count(*) FROM %s', tbl) INTO STRICT n;
			EXECUTE format('TRUNCATE %s', tbl);
			removed := removed + n;
		END IF;
	END LOOP;

	-- what no longer describes a stored event
	DELETE FROM @extschema@.outbox_ledger g
	 WHERE g.last_id < coalesce((SELECT min(l.id) FROM @extschema@.outbox_log l), 9223372036854775807);
	DELETE FROM @extschema@.outbox_event_ids e
	 WHERE e.id < coalesce(least((SELECT min(l.id) FROM @extschema@.outbox_log l),
								 (SELECT min(m.id) FROM @extschema@.outbox_retries m)),
						   9223372036854775807);

	IF r.current_since < now() - greatest(published_retention / 2, interval '10 seconds') THEN
		tbl := format('@extschema@.%I', 'outbox_log_' || (r.current_log + 1) % 4);
		EXECUTE format('SELECT NOT EXISTS (SELECT FROM %s)', tbl) INTO STRICT next_empty;
		IF next_empty THEN
			UPDATE @extschema@.outbox_reader
			   SET current_log = (r.current_log + 1) % 4, current_since = now();
		END IF;
	END IF;
	RETURN removed;
END
$$;

-- Run the cleanup now, with the retention settings in force; returns how
-- many events it removed.
CREATE OR REPLACE FUNCTION @extschema@.outbox_purge()
RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	published_retention interval := coalesce(current_setting('outbox.published_retention', true), '7d')::interval;
	abandoned_retention interval := coalesce(current_setting('outbox.abandoned_retention', true), '30d')::interval;
	removed bigint;
	total bigint := 0;
BEGIN
	LOOP
		removed := @extschema@.outbox_purge_batch(published_retention, abandoned_retention, 10000);
		total := total + removed;
		EXIT WHEN removed = 0;
	END LOOP;
	RETURN total + @extschema@.outbox_rotate(published_retention);
END
$$;

--
-- Retry and replay: failed and abandoned events are in the retry table.
--
CREATE OR REPLACE FUNCTION @extschema@.outbox_retry(id bigint)
RETURNS integer
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
	WITH retried AS (
		UPDATE @extschema@.outbox_retries m
		   SET status = 'pending', attempts = 0, next_attempt_at = NULL
		 WHERE m.id = outbox_retry.id AND m.status IN ('failed', 'abandoned')
		RETURNING 1
	)
	SELECT count(*)::integer FROM retried
$$;

CREATE OR REPLACE FUNCTION @extschema@.outbox_retry_abandoned(topic text DEFAULT NULL)
RETURNS bigint
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
	WITH retried AS (
		UPDATE @extschema@.outbox_retries m
		   SET status = 'pending', attempts = 0, next_attempt_at = NULL
		 WHERE m.status = 'abandoned'
		   AND (outbox_retry_abandoned.topic IS NULL OR m.topic = outbox_retry_abandoned.topic)
		RETURNING 1
	)
	SELECT count(*) FROM retried
$$;

-- A pending event still in the log is copied to the retry table first,
-- while no claim runs, so that the claim passes over it.
CREATE OR REPLACE FUNCTION @extschema@.outbox_abandon(id bigint)
RETURNS integer
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	abandoned integer;
BEGIN
	PERFORM @extschema@.outbox_lock_reader(true);
	PERFORM @extschema@.outbox_copy_to_retries(ARRAY[l.id])
	   FROM @extschema@.outbox_log_rows(ARRAY[$1]) l, @extschema@.outbox_reader r
	  WHERE @extschema@.outbox_unread(l.id, l.txid, r);
	UPDATE @extschema@.outbox_retries m
	   SET status = 'abandoned', next_attempt_at = NULL,
		   last_error = coalesce(m.last_error, 'abandoned by outbox_abandon()')
	 WHERE m.id = $1 AND m.status IN ('pending', 'failed');
	GET DIAGNOSTICS abandoned = ROW_COUNT;
	IF abandoned > 0 THEN
		PERFORM @extschema@.outbox_dead_letter(ARRAY[$1],
			current_setting('outbox.dead_letter_topic', true));
	END IF;
	RETURN abandoned;
END
$$;

-- The queue now counts the unread events of the log too.
DROP VIEW @extschema@.outbox_stats;
CREATE VIEW @extschema@.outbox_stats AS
	WITH queue AS (
		SELECT m.topic,
			   pg_catalog.count(*) FILTER (WHERE m.status = 'pending') AS pending,
			   pg_catalog.count(*) FILTER (WHERE m.status = 'failed') AS failed,
			   0::bigint AS abandoned,
			   pg_catalog.min(m.created_at) FILTER (WHERE m.next_attempt_at IS NULL
														 OR m.next_attempt_at <= pg_catalog.now()) AS oldest_due
		  FROM @extschema@.outbox_retries m
		 WHERE m.status IN ('pending', 'failed')
		 GROUP BY m.topic
		UNION ALL
		SELECT m.topic, 0, 0, pg_catalog.count(*), NULL
		  FROM @extschema@.outbox_retries m
		 WHERE m.status = 'abandoned'
		 GROUP BY m.topic
		UNION ALL
		-- unread events of the log
		SELECT u.topic, pg_catalog.count(*), 0, 0, pg_catalog.min(u.created_at)
		  FROM @extschema@.outbox_reader r
		 CROSS JOIN LATERAL @extschema@.outbox_unread_events(r) u
		 WHERE NOT EXISTS (SELECT FROM @extschema@.outbox_retries m WHERE m.id = u.id)
		 GROUP BY u.topic
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
		   coalesce(pg_catalog.sum(p.pending), 0)::bigint AS pending,
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
		   @extschema@.outbox_histogram_quantile(@extschema@.outbox_histogram_sum(p.histogram), 0.99)::numeric AS latency_p99_ms
	  FROM per_topic p
	 GROUP BY GROUPING SETS ((p.topic), ())
	 ORDER BY p.topic NULLS LAST;

COMMENT ON VIEW @extschema@.outbox_stats IS
	'Queue and delivery health per topic, and in total (topic NULL)';

REVOKE ALL ON FUNCTION @extschema@.outbox_in_progress() FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.outbox_log_rows(bigint[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.outbox_count_published(text[], timestamptz[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.outbox_mark_logged(bigint[], integer[], bigint[], text[], timestamptz[], boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.outbox_unread_events(@extschema@.outbox_reader) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.outbox_unread(bigint, xid8, @extschema@.outbox_reader) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.outbox_lock_reader(boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.outbox_copy_to_retries(bigint[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.outbox_count_recorded(bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.outbox_check_recorded() FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.outbox_mark_released(bigint[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.outbox_rotate(interval) FROM PUBLIC;
ALTER FUNCTION @extschema@.outbox_retry_delay(integer, interval, interval, double precision)
	SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION @extschema@.outbox_latency_histogram(double precision[])
	SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION @extschema@.outbox_histogram_add(bigint[], bigint[])
	SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION @extschema@.outbox_histogram_quantile(bigint[], double precision)
	SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION @extschema@.outbox_attach(regclass, text, text[])
	SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION @extschema@.outbox_detach(regclass)
	SET search_path = pg_catalog, pg_temp;
-- The workers, one row per database served or waiting for a worker, from
-- shared memory: never waits for the table, answers from any database.
DROP FUNCTION @extschema@.outbox_worker_status();
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
