--
-- Privileges: nothing for PUBLIC; EXECUTE on outbox_enqueue lets a role
-- enqueue without touching outbox_messages.  And the extension's schema.
--
CREATE EXTENSION IF NOT EXISTS outbox;
TRUNCATE outbox_log, outbox_retries, outbox_ledger, outbox_event_ids;
CREATE ROLE outbox_app LOGIN;
CREATE ROLE outbox_nobody LOGIN;
GRANT USAGE ON SCHEMA public TO outbox_app, outbox_nobody;
GRANT EXECUTE ON FUNCTION outbox_enqueue(text, jsonb, text, jsonb, uuid) TO outbox_app;

-- nothing is granted to PUBLIC
SELECT p.proname, has_function_privilege('outbox_nobody', p.oid, 'EXECUTE') AS can_execute
  FROM pg_proc p WHERE p.proname LIKE 'outbox\_%' ORDER BY 1, 2;
SELECT c.relname, has_table_privilege('outbox_nobody', c.oid, 'SELECT, INSERT, UPDATE, DELETE, TRUNCATE') AS any_table_privilege
  FROM pg_class c WHERE c.relname LIKE 'outbox\_%' AND c.relkind IN ('r', 'v', 'S') ORDER BY 1;

SET ROLE outbox_nobody;
SELECT outbox_enqueue('orders', '{"id": 1}'::jsonb);
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;

SET ROLE outbox_app;
SELECT outbox_enqueue('orders', '{"id": 1}'::jsonb, key => '1') > 0 AS enqueued;
-- the jsonb variant only was granted
SELECT outbox_enqueue('orders', 'text'::text);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM outbox_messages;
\echo :LAST_ERROR_SQLSTATE
-- the rows are reached only through the extension's functions
INSERT INTO outbox_log_0 (id, txid, event_id, topic, payload, created_at)
	VALUES (1, '1', gen_random_uuid(), 'orders', 'x', now());
\echo :LAST_ERROR_SQLSTATE
INSERT INTO outbox_retries (topic, payload) VALUES ('orders', 'x');
\echo :LAST_ERROR_SQLSTATE
UPDATE outbox_retries SET status = 'published';
\echo :LAST_ERROR_SQLSTATE
DELETE FROM outbox_ledger;
\echo :LAST_ERROR_SQLSTATE
UPDATE outbox_reader SET last_id = 0;
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM outbox_claim(10);
\echo :LAST_ERROR_SQLSTATE
-- a search_path of the caller's cannot redirect the definer's work
CREATE FUNCTION pg_temp.gen_random_uuid() RETURNS uuid LANGUAGE sql
	AS $$ SELECT '00000000-0000-0000-0000-000000000000'::uuid $$;
SET search_path = pg_temp, public;
SELECT outbox_enqueue('orders', '{"id": 2}'::jsonb) > 0 AS enqueued;
RESET search_path;
RESET ROLE;
SELECT key, convert_from(payload, 'UTF8') AS payload,
	   event_id <> '00000000-0000-0000-0000-000000000000' AS real_event_id
  FROM outbox_messages ORDER BY id;

-- the log is read by index scans, not SQL: the right to run them is not
-- the right to read the log, which is checked for the caller
GRANT EXECUTE ON FUNCTION outbox_claim(integer, bigint), outbox_log_rows(bigint[]) TO outbox_nobody;
SET ROLE outbox_nobody;
SELECT * FROM outbox_log_rows(ARRAY[1]);
\echo :LAST_ERROR_SQLSTATE
BEGIN;
SELECT * FROM outbox_claim(10);
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
RESET ROLE;
REVOKE EXECUTE ON FUNCTION outbox_claim(integer, bigint), outbox_log_rows(bigint[]) FROM outbox_nobody;

-- a monitoring role reads outbox_stats with the rights docs/operations.md lists,
-- and none on the log, whose events it counts without reading them
GRANT SELECT ON outbox_stats TO outbox_nobody;
GRANT EXECUTE ON FUNCTION outbox_unread_topics(), outbox_histogram_sum(bigint[]),
	outbox_histogram_quantile(bigint[], double precision) TO outbox_nobody;
SET ROLE outbox_nobody;
SELECT topic, pending FROM outbox_stats;
SELECT * FROM outbox_log_0;
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
REVOKE SELECT ON outbox_stats FROM outbox_nobody;
REVOKE EXECUTE ON FUNCTION outbox_unread_topics(), outbox_histogram_sum(bigint[]),
	outbox_histogram_quantile(bigint[], double precision) FROM outbox_nobody;

-- the objects go in the schema named at CREATE EXTENSION
SELECT outbox_discard() AS discarded;
DROP EXTENSION outbox;
CREATE SCHEMA "Events";
CREATE EXTENSION outbox SCHEMA "Events";
SELECT "Events".outbox_enqueue('orders', 'in another schema'::text) > 0 AS enqueued;
SELECT convert_from(payload, 'UTF8') AS payload FROM "Events".outbox_messages;
SELECT to_regclass('public.outbox_messages') AS not_in_public;
SELECT "Events".outbox_discard() AS discarded;
DROP EXTENSION outbox;
DROP SCHEMA "Events";
CREATE EXTENSION outbox;

DROP OWNED BY outbox_app, outbox_nobody;
DROP ROLE outbox_app;
DROP ROLE outbox_nobody;
