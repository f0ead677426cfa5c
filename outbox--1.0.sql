/* outbox--1.0.sql */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION outbox" to load this file. \quit

--
-- The states of an event.  pending -> published on delivery; on a refused
-- delivery failed (retried after next_attempt_at) and, after the last
-- attempt or an error retrying cannot fix, abandoned.  'processing' is not
-- used by this version: claims are row locks held while the batch is in
-- flight, so a dead worker's claims vanish with it.
--
CREATE TYPE @extschema@.outbox_status AS ENUM (
	'pending', 'processing', 'published', 'failed', 'abandoned'
);

CREATE TABLE @extschema@.outbox_messages (
	id				bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	event_id		uuid NOT NULL DEFAULT pg_catalog.gen_random_uuid() UNIQUE,
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
	CONSTRAINT outbox_messages_tombstone_key CHECK (payload IS NOT NULL OR key IS NOT NULL)
) WITH (autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_insert_scale_factor = 0.01);

COMMENT ON TABLE @extschema@.outbox_messages IS
	'Events waiting to be published to Kafka, and their outcome';

-- Due events in publish order.  Only unfinished rows are indexed, so the
-- index stays small however many published rows are kept.
CREATE INDEX outbox_messages_due ON @extschema@.outbox_messages (id)
	WHERE status IN ('pending', 'failed');

-- Abandoned rows (few), for cleanup and monitoring.  Published rows have no
-- index of their own: the cleanup finds old ones through the primary key.
CREATE INDEX outbox_messages_abandoned ON @extschema@.outbox_messages (topic)
	WHERE status = 'abandoned';

-- Failed events waiting for their retry hold back later events of the
-- same key; this index finds them.  It holds only failed rows.
CREATE INDEX outbox_messages_failed_key ON @extschema@.outbox_messages (topic, key, id)
	WHERE status IN ('failed', 'processing') AND key IS NOT NULL;

--
-- outbox_enqueue: store an event in the caller's transaction.  One C
-- function serves the three payload types.
--
CREATE FUNCTION @extschema@.outbox_enqueue(topic text, payload jsonb,
	key text DEFAULT NULL, headers jsonb DEFAULT NULL, event_id uuid DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'outbox_enqueue'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;

CREATE FUNCTION @extschema@.outbox_enqueue(topic text, payload text,
	key text DEFAULT NULL, headers jsonb DEFAULT NULL, event_id uuid DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'outbox_enqueue'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;

CREATE FUNCTION @extschema@.outbox_enqueue(topic text, payload bytea,
	key text DEFAULT NULL, headers jsonb DEFAULT NULL, event_id uuid DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'outbox_enqueue'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;

REVOKE ALL ON FUNCTION @extschema@.outbox_enqueue(text, jsonb, text, jsonb, uuid) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.outbox_enqueue(text, text, text, jsonb, uuid) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.outbox_enqueue(text, bytea, text, jsonb, uuid) FROM PUBLIC;

--
-- The worker's state machine, in SQL so that it can be tested without a
-- worker.  The worker calls these inside one transaction per batch.
--

-- Claim up to batch_size due events in id order and lock them until the
-- end of the transaction.  An event is held back while an earlier event of
-- the same topic and key waits for its retry.  One claim runs at a time
-- (an advisory lock): a second claimer gets nothing until the first ends,
-- so no later event of a key is ever claimed beside an earlier one that is
-- in flight elsewhere.
CREATE FUNCTION @extschema@.outbox_claim(batch_size integer)
RETURNS TABLE (id bigint, event_id uuid, topic text, key text,
			   payload bytea, headers jsonb)
LANGUAGE sql VOLATILE
AS $$
	SELECT m.id, m.event_id, m.topic, m.key, m.payload, m.headers
	  FROM @extschema@.outbox_messages m
	 WHERE m.status IN ('pending', 'failed')
	   AND (m.next_attempt_at IS NULL OR m.next_attempt_at <= pg_catalog.now())
	   AND (m.key IS NULL OR NOT EXISTS (
			SELECT 1
			  FROM @extschema@.outbox_messages e
			 WHERE e.topic = m.topic AND e.key = m.key AND e.id < m.id
			   AND e.status IN ('failed', 'processing') AND e.key IS NOT NULL
			   AND (e.status = 'processing' OR e.next_attempt_at > pg_catalog.now())))
	   AND (SELECT pg_catalog.pg_try_advisory_xact_lock(
					pg_catalog.hashtext('outbox_claim'),
					'@extschema@.outbox_messages'::pg_catalog.regclass::pg_catalog.oid::integer))
	 ORDER BY m.id
	 LIMIT batch_size
	   FOR UPDATE OF m SKIP LOCKED
$$;

-- The delay before attempt number attempts + 1: base * 2^(attempts - 1),
-- capped at max_delay, spread by +/- jitter.
CREATE FUNCTION @extschema@.outbox_retry_delay(attempts integer, base_delay interval,
	max_delay interval, jitter double precision)
RETURNS interval
LANGUAGE sql VOLATILE
AS $$
	SELECT pg_catalog.make_interval(secs =>
		LEAST(pg_catalog.date_part('epoch', base_delay)
							* pg_catalog.power(2::double precision,
											   LEAST(GREATEST(attempts - 1, 0), 60)),
						 pg_catalog.date_part('epoch', max_delay))
		* (1 + jitter * (2 * pg_catalog.random() - 1)))
$$;

--
-- Publishing statistics: one row per topic and 10-second bucket, written by
-- the worker with each batch's outcomes, so that rates and latencies do not
-- depend on how long published rows are kept.  latency_histogram counts
-- deliveries per bucket b = floor(4 * log2(1 + latency in ms)), 0..127.
--
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

-- The histogram of a set of latencies, in milliseconds, and the sum of two
-- histograms (src/stats.c).
CREATE FUNCTION @extschema@.outbox_latency_histogram(latencies_ms double precision[])
RETURNS bigint[]
AS 'MODULE_PATHNAME', 'outbox_latency_histogram'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION @extschema@.outbox_histogram_add(a bigint[], b bigint[])
RETURNS bigint[]
AS 'MODULE_PATHNAME', 'outbox_histogram_add'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE AGGREGATE @extschema@.outbox_histogram_sum(bigint[]) (
	SFUNC = @extschema@.outbox_histogram_add,
	STYPE = bigint[],
	INITCOND = '{}'
);

-- The latency (ms) below which a fraction q of a histogram's deliveries
-- fall: the upper bound of its bucket, within 19% of the exact value.
CREATE FUNCTION @extschema@.outbox_histogram_quantile(histogram bigint[], q double precision)
RETURNS double precision
LANGUAGE sql IMMUTABLE
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

-- Send abandoned events to a dead-letter topic: each becomes a new event of
-- that topic, with the original key, payload and headers, plus headers
-- naming the original topic and event, its attempts and last error.
-- Events of the dead-letter topic itself are not sent again.
CREATE FUNCTION @extschema@.outbox_dead_letter(ids bigint[], dead_letter_topic text)
RETURNS bigint
LANGUAGE sql VOLATILE
AS $$
	WITH sent AS (
		INSERT INTO @extschema@.outbox_messages (topic, key, payload, headers)
		SELECT dead_letter_topic, m.key, m.payload,
			   coalesce(m.headers, '{}')
			   || pg_catalog.jsonb_build_object('original_topic', m.topic,
												'original_event_id', m.event_id::text,
												'attempts', m.attempts::text,
												'last_error', coalesce(m.last_error, ''))
		  FROM @extschema@.outbox_messages m
		 WHERE m.id = ANY (ids)
		   AND m.status = 'abandoned'
		   AND coalesce(dead_letter_topic, '') <> ''
		   AND m.topic <> dead_letter_topic
		 ORDER BY m.id
		RETURNING 1
	)
	SELECT pg_catalog.count(*) FROM sent
$$;

-- Record deliveries: published, or deleted at once when keep is false
-- (outbox.published_retention = 0).  Counts them in outbox_publish_stats.
CREATE FUNCTION @extschema@.outbox_mark_published(ids bigint[], partitions integer[],
	offsets bigint[], keep boolean)
RETURNS bigint
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
	marked bigint;
BEGIN
	WITH kept AS (
		UPDATE @extschema@.outbox_messages m
		   SET status = 'published',
			   attempts = m.attempts + 1,
			   published_at = pg_catalog.clock_timestamp(),
			   next_attempt_at = NULL,
			   kafka_partition = u.kafka_partition,
			   kafka_offset = u.kafka_offset
		  FROM ROWS FROM (pg_catalog.unnest(ids), pg_catalog.unnest(partitions), pg_catalog.unnest(offsets))
			   AS u(id, kafka_partition, kafka_offset)
		 WHERE keep AND m.id = u.id
		RETURNING m.topic, m.created_at
	), deleted AS (
		DELETE FROM @extschema@.outbox_messages m
		 WHERE NOT keep AND m.id = ANY (ids)
		RETURNING m.topic, m.created_at
	), done AS (
		SELECT d.topic,
			   1000 * pg_catalog.date_part('epoch', pg_catalog.clock_timestamp() - d.created_at) AS ms
		  FROM (SELECT * FROM kept UNION ALL SELECT * FROM deleted) AS d
	), counted AS (
		INSERT INTO @extschema@.outbox_publish_stats AS s
			(topic, bucket, published, latency_ms_sum, latency_histogram)
		SELECT done.topic, pg_catalog.date_bin('10 seconds', pg_catalog.now(), 'epoch'),
			   pg_catalog.count(*), pg_catalog.sum(done.ms),
			   @extschema@.outbox_latency_histogram(pg_catalog.array_agg(done.ms))
		  FROM done
		 GROUP BY done.topic
		ON CONFLICT (topic, bucket) DO UPDATE
		   SET published = s.published + excluded.published,
			   latency_ms_sum = s.latency_ms_sum + excluded.latency_ms_sum,
			   latency_histogram = @extschema@.outbox_histogram_add(s.latency_histogram,
																	excluded.latency_histogram)
	)
	SELECT pg_catalog.count(*) INTO marked FROM done;
	RETURN marked;
END
$$;

-- Record refused deliveries: failed with a backoff, or abandoned after the
-- last attempt or an error that retrying cannot fix.  Abandoned events go
-- to dead_letter_topic unless it is empty.  Counts them in
-- outbox_publish_stats.
CREATE FUNCTION @extschema@.outbox_mark_failed(ids bigint[], errors text[],
	permanent boolean[], max_attempts integer, base_delay interval,
	max_delay interval, jitter double precision, dead_letter_topic text)
RETURNS bigint
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
	marked bigint;
	abandoned_ids bigint[];
BEGIN
	WITH done AS (
		UPDATE @extschema@.outbox_messages m
		   SET attempts = m.attempts + 1,
			   last_error = u.error,
			   status = CASE WHEN u.permanent OR m.attempts + 1 >= max_attempts
							 THEN 'abandoned' ELSE 'failed'
						END::@extschema@.outbox_status,
			   next_attempt_at = CASE WHEN u.permanent OR m.attempts + 1 >= max_attempts
									  THEN NULL
									  ELSE pg_catalog.clock_timestamp()
										   + @extschema@.outbox_retry_delay(m.attempts + 1, base_delay,
																			max_delay, jitter)
								 END
		  FROM ROWS FROM (pg_catalog.unnest(ids), pg_catalog.unnest(errors), pg_catalog.unnest(permanent))
			   AS u(id, error, permanent)
		 WHERE m.id = u.id
		RETURNING m.id, m.topic, m.status
	), counted AS (
		INSERT INTO @extschema@.outbox_publish_stats AS s (topic, bucket, failed, abandoned)
		SELECT d.topic, pg_catalog.date_bin('10 seconds', pg_catalog.now(), 'epoch'),
			   pg_catalog.count(*) FILTER (WHERE d.status = 'failed'),
			   pg_catalog.count(*) FILTER (WHERE d.status = 'abandoned')
		  FROM done d
		 GROUP BY d.topic
		ON CONFLICT (topic, bucket) DO UPDATE
		   SET failed = s.failed + excluded.failed,
			   abandoned = s.abandoned + excluded.abandoned
	)
	SELECT pg_catalog.count(*), pg_catalog.array_agg(d.id) FILTER (WHERE d.status = 'abandoned')
	  INTO marked, abandoned_ids
	  FROM done d;

	PERFORM @extschema@.outbox_dead_letter(abandoned_ids, dead_letter_topic);
	RETURN marked;
END
$$;

--
-- Retention: delete published and abandoned rows older than their
-- retention, at most batch_size of each, and statistics older than 2 hours.
-- Returns how many events it removed.  The worker calls it in a transaction
-- of its own until it removes less than a batch.
--
-- Published rows are found through the primary key, oldest first, without
-- an index of their own (one less index entry to write per delivery): ids
-- follow created_at, and a row created after the cutoff cannot have been
-- published before it, so the scan stops at the first such row.
--
CREATE FUNCTION @extschema@.outbox_purge_batch(published_retention interval,
	abandoned_retention interval, batch_size integer)
RETURNS bigint
LANGUAGE sql VOLATILE
AS $$
	WITH published AS (
		DELETE FROM @extschema@.outbox_messages
		 WHERE id IN (SELECT m.id FROM @extschema@.outbox_messages m
					   WHERE m.id < coalesce((SELECT y.id FROM @extschema@.outbox_messages y
											   WHERE y.created_at >= pg_catalog.now() - published_retention
											   ORDER BY y.id LIMIT 1),
											 9223372036854775807)
						 AND m.status = 'published'
						 AND m.published_at < pg_catalog.now() - published_retention
					   ORDER BY m.id
					   LIMIT batch_size
						 FOR UPDATE SKIP LOCKED)
		RETURNING 1
	), abandoned AS (
		DELETE FROM @extschema@.outbox_messages
		 WHERE id IN (SELECT id FROM @extschema@.outbox_messages
					   WHERE status = 'abandoned'
						 AND created_at < pg_catalog.now() - abandoned_retention
					   LIMIT batch_size
						 FOR UPDATE SKIP LOCKED)
		RETURNING 1
	), stats AS (
		DELETE FROM @extschema@.outbox_publish_stats
		 WHERE bucket < pg_catalog.now() - interval '2 hours'
	)
	SELECT (SELECT pg_catalog.count(*) FROM published) + (SELECT pg_catalog.count(*) FROM abandoned)
$$;

-- Run the cleanup now, with the retention settings in force; returns how
-- many events it removed.
CREATE FUNCTION @extschema@.outbox_purge()
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
	RETURN total;
END
$$;

--
-- Retry and replay.
--

-- Put a failed or abandoned event back in the queue, attempts reset; due
-- at once.  Returns 1, or 0 if the event is not failed or abandoned.
CREATE FUNCTION @extschema@.outbox_retry(id bigint)
RETURNS integer
LANGUAGE sql VOLATILE
AS $$
	WITH retried AS (
		UPDATE @extschema@.outbox_messages m
		   SET status = 'pending', attempts = 0, next_attempt_at = NULL
		 WHERE m.id = outbox_retry.id AND m.status IN ('failed', 'abandoned')
		RETURNING 1
	)
	SELECT pg_catalog.count(*)::integer FROM retried
$$;

-- Put every abandoned event (of one topic, or of all) back in the queue.
-- Returns how many.
CREATE FUNCTION @extschema@.outbox_retry_abandoned(topic text DEFAULT NULL)
RETURNS bigint
LANGUAGE sql VOLATILE
AS $$
	WITH retried AS (
		UPDATE @extschema@.outbox_messages m
		   SET status = 'pending', attempts = 0, next_attempt_at = NULL
		 WHERE m.status = 'abandoned'
		   AND (outbox_retry_abandoned.topic IS NULL OR m.topic = outbox_retry_abandoned.topic)
		RETURNING 1
	)
	SELECT pg_catalog.count(*) FROM retried
$$;

-- Give up on a pending or failed event on purpose: it becomes abandoned
-- (and goes to the dead-letter topic, if one is set), which releases the
-- later events of its key.  Returns 1, or 0 if it was not pending or failed.
CREATE FUNCTION @extschema@.outbox_abandon(id bigint)
RETURNS integer
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
	abandoned integer;
BEGIN
	UPDATE @extschema@.outbox_messages m
	   SET status = 'abandoned', next_attempt_at = NULL,
		   last_error = coalesce(m.last_error, 'abandoned by outbox_abandon()')
	 WHERE m.id = $1 AND m.status IN ('pending', 'failed');
	GET DIAGNOSTICS abandoned = ROW_COUNT;
	IF abandoned > 0 THEN
		PERFORM @extschema@.outbox_dead_letter(ARRAY[$1],
			pg_catalog.current_setting('outbox.dead_letter_topic', true));
	END IF;
	RETURN abandoned;
END
$$;

--
-- Capturing row changes: outbox_attach('orders', 'orders.changes') makes
-- every change of orders an event (see src/trigger.c for the envelope).
--
CREATE FUNCTION @extschema@.outbox_capture()
RETURNS trigger
AS 'MODULE_PATHNAME', 'outbox_capture'
LANGUAGE C VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;

CREATE FUNCTION @extschema@.outbox_attach(tbl regclass, topic text,
	key_columns text[] DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'outbox_attach'
LANGUAGE C VOLATILE;

CREATE FUNCTION @extschema@.outbox_detach(tbl regclass)
RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
	EXECUTE pg_catalog.format('DROP TRIGGER IF EXISTS outbox_capture ON %s', tbl);
	EXECUTE pg_catalog.format('DROP TRIGGER IF EXISTS outbox_capture_truncate ON %s', tbl);
END
$$;

--
-- Monitoring.
--

-- Per topic, and in total (topic NULL): the queue now, and deliveries over
-- the last minute and hour.
CREATE VIEW @extschema@.outbox_stats AS
	WITH queue AS (
		SELECT m.topic,
			   pg_catalog.count(*) FILTER (WHERE m.status = 'pending') AS pending,
			   pg_catalog.count(*) FILTER (WHERE m.status = 'failed') AS failed,
			   0::bigint AS abandoned,
			   pg_catalog.min(m.created_at) FILTER (WHERE m.next_attempt_at IS NULL
														 OR m.next_attempt_at <= pg_catalog.now()) AS oldest_due
		  FROM @extschema@.outbox_messages m
		 WHERE m.status IN ('pending', 'failed')
		 GROUP BY m.topic
		UNION ALL
		SELECT m.topic, 0, 0, pg_catalog.count(*), NULL
		  FROM @extschema@.outbox_messages m
		 WHERE m.status = 'abandoned'
		 GROUP BY m.topic
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

-- The worker, from shared memory: never waits for the table.
CREATE FUNCTION @extschema@.outbox_worker_status(
	OUT pid integer, OUT state text, OUT state_since timestamptz,
	OUT started_at timestamptz, OUT brokers_up integer,
	OUT published bigint, OUT failed bigint,
	OUT last_batch_at timestamptz, OUT last_error text)
RETURNS record
AS 'MODULE_PATHNAME', 'outbox_worker_status'
LANGUAGE C VOLATILE;

REVOKE ALL ON FUNCTION @extschema@.outbox_claim(integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.outbox_retry_delay(integer, interval, interval, double precision) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.outbox_mark_published(bigint[], integer[], bigint[], boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.outbox_mark_failed(bigint[], text[], boolean[], integer, interval, interval, double precision, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.outbox_dead_letter(bigint[], text) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.outbox_latency_histogram(double precision[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.outbox_histogram_add(bigint[], bigint[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.outbox_histogram_sum(bigint[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.outbox_histogram_quantile(bigint[], double precision) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.outbox_purge_batch(interval, interval, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.outbox_purge() FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.outbox_retry(bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.outbox_retry_abandoned(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.outbox_abandon(bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.outbox_capture() FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.outbox_attach(regclass, text, text[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.outbox_detach(regclass) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.outbox_worker_status() FROM PUBLIC;
