--
-- ALTER EXTENSION outbox UPDATE from 1.0, through 1.1, to 1.4 (the scripts
-- kept in the repository): every row is kept with its state, the due ones
-- are claimed afterwards, their event ids stay taken, and every function
-- pins search_path but outbox_enqueue and the capture and router triggers,
-- which run with their caller's rights and resolve no name through it
-- (src/queue/enqueue.c, src/capture/).  This library serves 1.1 as it is,
-- and refuses, cleanly, to serve 1.0.
--
SELECT outbox_discard() >= 0 AS discarded;
DROP EXTENSION outbox;
CREATE EXTENSION outbox VERSION '1.0';
SELECT outbox_enqueue('up', 'x'::text);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM outbox_worker_status();
\echo :LAST_ERROR_SQLSTATE
-- rows in every state, written by hand
INSERT INTO outbox_messages (topic, key, payload)
	SELECT 'up', 'k' || i, convert_to('e' || i, 'UTF8') FROM generate_series(1, 5) i;
UPDATE outbox_messages
   SET status = 'published', attempts = 1, published_at = now(), kafka_partition = 0, kafka_offset = 10
 WHERE id = 1;
UPDATE outbox_messages
   SET status = 'failed', attempts = 1, last_error = 'Local: Message timed out', next_attempt_at = now()
 WHERE id = 2;
UPDATE outbox_messages
   SET status = 'abandoned', attempts = 1, last_error = 'Broker: Message size too large'
 WHERE id = 3;

-- the extension's functions, except aggregates, that do not pin search_path
CREATE VIEW unpinned AS
	SELECT p.oid::regprocedure AS function, p.prosecdef AS security_definer,
		   l.lanname AS language
	  FROM pg_proc p
	  JOIN pg_language l ON l.oid = p.prolang
	  JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
	  JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'outbox'
	 WHERE p.prokind <> 'a'
	   AND NOT coalesce('search_path=pg_catalog, pg_temp' = ANY (p.proconfig), false);
SELECT count(*) AS unpinned_in_1_0 FROM unpinned;

ALTER EXTENSION outbox UPDATE TO '1.1';
-- served as it is: enqueue and claim
SELECT outbox_enqueue('up', 'e6'::text, key => 'k6');
BEGIN;
SELECT id, key FROM outbox_claim(10);
ROLLBACK;

ALTER EXTENSION outbox UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'outbox';
SELECT id, key, status, attempts, last_error, kafka_offset
  FROM outbox_messages ORDER BY id;
-- the rows of 1.0 are in the retry table, the log starts after them
SELECT last_id FROM outbox_reader;
-- this session looked the log up at 1.1, before outbox_restored existed:
-- the trigger the update gave the log is still known for the log's own,
-- which enqueue does not fire (it marks rows written by hand)
BEGIN;
SET LOCAL track_functions = 'all';
SELECT outbox_enqueue('up', 'e7'::text, key => 'k7');
SELECT count(*) AS restored_calls FROM pg_stat_xact_user_functions
 WHERE funcname = 'outbox_restored';
COMMIT;
BEGIN;
SELECT id, key FROM outbox_claim(10);
ROLLBACK;
\set VERBOSITY terse
SELECT outbox_enqueue('up', 'again'::text, event_id => (SELECT event_id FROM outbox_messages WHERE id = 4));
\set VERBOSITY default
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM unpinned ORDER BY function::text;
SELECT prosecdef AS capture_is_security_definer FROM pg_proc WHERE proname = 'outbox_capture';
DROP VIEW unpinned;

--
-- A router attached at 1.2 keeps what 1.2 did after the update (its
-- trigger's stored options): the key as a string, the payload expanded, a
-- null payload a tombstone, an id that must hold a UUID.  Attached again at
-- 1.3, it takes Debezium's defaults.
--
SELECT outbox_discard() >= 0 AS discarded;
DROP EXTENSION outbox;
CREATE EXTENSION outbox VERSION '1.2';
CREATE TABLE legacy_events (id text, aggregatetype text NOT NULL, aggregateid text,
	type text, payload jsonb);
SELECT outbox_attach_router('legacy_events');
INSERT INTO legacy_events VALUES
	('4d47e190-0402-4048-bc2c-89dd54343cdc', 'order', '1', 'OrderCreated', '{"id": 1, "n": null}');
ALTER EXTENSION outbox UPDATE;
INSERT INTO legacy_events VALUES
	('5e58f2a1-0402-4048-bc2c-89dd54343cdc', 'order', '1', 'OrderPaid', '{"id": 1, "n": null}'),
	('6f69a3b2-0402-4048-bc2c-89dd54343cdc', 'order', '1', 'OrderDeleted', NULL);
\set VERBOSITY terse
INSERT INTO legacy_events VALUES ('e-1', 'order', '2', 'OrderCreated', '{}');
\set VERBOSITY default
SELECT outbox_attach_router('legacy_events');
INSERT INTO legacy_events VALUES
	('e-1', 'order', '2', 'OrderCreated', '{"id": 2, "n": null}'),
	('e-1', 'order', '2', 'OrderDeleted', NULL);
SELECT topic, key, convert_from(payload, 'UTF8') AS value, headers ->> 'id' AS id,
	   event_id::text = headers ->> 'id' AS event_id_is_id
  FROM outbox_messages ORDER BY id;
DROP TABLE legacy_events;

-- A router attached at 1.3 goes on as it was; the update to 1.4 replaces
-- outbox_attach_router() (a new argument, converter) and outbox_attach()
-- (replace_null_with_default), and says who loses EXECUTE on them
SELECT outbox_discard() >= 0 AS discarded;
DROP EXTENSION outbox;
CREATE EXTENSION outbox VERSION '1.3';
CREATE ROLE outbox_router_admin;
GRANT EXECUTE ON FUNCTION outbox_attach_router TO outbox_router_admin;
GRANT EXECUTE ON FUNCTION outbox_attach TO outbox_router_admin;
CREATE TABLE older_events (id uuid PRIMARY KEY, aggregatetype text NOT NULL,
	aggregateid text NOT NULL, payload jsonb);
SELECT outbox_attach_router('older_events');
INSERT INTO older_events VALUES ('7a7ab4c3-0402-4048-bc2c-89dd54343cdc', 'order', '3', '{"id": 3}');
-- outbox_router() pins search_path at 1.3, and no longer from 1.4: a
-- regclass header is written as under the pinned path at both (the
-- library pins it itself around such a column's text)
SELECT proconfig AS router_config_at_1_3 FROM pg_proc WHERE oid = 'outbox_router()'::regprocedure;
CREATE TABLE ref_events (id uuid PRIMARY KEY, aggregatetype text NOT NULL,
	aggregateid text NOT NULL, payload jsonb, rel regclass);
SELECT outbox_attach_router('ref_events', header_columns => '{rel:rel}');
INSERT INTO ref_events VALUES ('8c8cc5d4-0402-4048-bc2c-89dd54343cdc', 'ref', '1', '{}', 'ref_events');
-- a router trigger with the AvroConverter made by hand at 1.3, whose
-- outbox_schema_ids has the unique key that sessions wait on: refused
CREATE TABLE avro_at_1_3 (id uuid, payload jsonb);
CREATE TRIGGER outbox_router AFTER INSERT ON avro_at_1_3 FOR EACH ROW
	EXECUTE FUNCTION outbox_router('topic=t.avro', 'id=id', 'payload=payload', 'converter=avro');
\set VERBOSITY terse
INSERT INTO avro_at_1_3 VALUES ('9c9cd6e5-0402-4048-bc2c-89dd54343cdc', '{}');
\set VERBOSITY default
\echo :LAST_ERROR_SQLSTATE
DROP TABLE avro_at_1_3;
ALTER EXTENSION outbox UPDATE;
SELECT has_function_privilege('outbox_router_admin', 'outbox_attach_router(regclass, text, text, text, text, text, text, text[], boolean, text, boolean, boolean, text)', 'EXECUTE') AS still_granted;
INSERT INTO older_events VALUES ('8b8bc5d4-0402-4048-bc2c-89dd54343cdc', 'order', '3', '{"id": 4}');
SELECT proconfig AS router_config_at_1_4 FROM pg_proc WHERE oid = 'outbox_router()'::regprocedure;
INSERT INTO ref_events VALUES ('9d9dd6e5-0402-4048-bc2c-89dd54343cdc', 'ref', '2', '{}', 'ref_events');
SELECT topic, key, convert_from(payload, 'UTF8') AS value, headers ->> 'id' AS id,
	   headers ->> 'rel' AS rel
  FROM outbox_messages ORDER BY id;
DROP TABLE older_events, ref_events;
DROP ROLE outbox_router_admin;
