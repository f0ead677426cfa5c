--
-- outbox.headers: headers from the transaction, for every event it
-- enqueues (outbox_enqueue and capture), merged under the call's own.
--
LOAD 'outbox';
CREATE EXTENSION IF NOT EXISTS outbox;
TRUNCATE outbox_log, outbox_retries, outbox_ledger, outbox_event_ids;
ALTER SEQUENCE outbox_event_id_seq RESTART WITH 1;
UPDATE outbox_reader SET last_id = 0, running = '{}', draining = '{}';
CREATE TABLE hdr_rows (id int PRIMARY KEY);
SELECT outbox_attach('hdr_rows', 'h.rows');

-- unset: no headers
SELECT outbox_enqueue('h', 'none'::text);

-- SET LOCAL: every event of the transaction; a header of the call wins
BEGIN;
SET LOCAL outbox.headers = '{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "tenant": "t1"}';
SELECT outbox_enqueue('h', 'local'::text);
SELECT outbox_enqueue('h', 'call wins'::text, headers => '{"tenant": "t2", "x": "y"}');
INSERT INTO hdr_rows VALUES (1);
COMMIT;

-- it ended with the transaction
SHOW outbox.headers;
SELECT outbox_enqueue('h', 'after commit'::text);
INSERT INTO hdr_rows VALUES (2);

-- a savepoint rolled back restores the previous value
BEGIN;
SET LOCAL outbox.headers = '{"a": "outer"}';
SAVEPOINT s;
SET LOCAL outbox.headers = '{"a": "inner"}';
ROLLBACK TO SAVEPOINT s;
SELECT outbox_enqueue('h', 'after savepoint'::text);
COMMIT;

-- SET lasts for the session; '' and '{}' mean none
SET outbox.headers = '{"session": "yes"}';
SELECT outbox_enqueue('h', 'session'::text);
SET outbox.headers = '{}';
SELECT outbox_enqueue('h', 'empty object'::text);
RESET outbox.headers;

SELECT id, topic,
	   CASE topic WHEN 'h.rows' THEN 'row ' || (convert_from(payload, 'UTF8')::jsonb -> 'after' ->> 'id')
			ELSE convert_from(payload, 'UTF8') END AS event,
	   headers
  FROM outbox_messages ORDER BY id;

-- bad values: the SET itself fails with 22023, and the value is unchanged
SET outbox.headers = '{"kept": "yes"}';
SET outbox.headers = 'not json';
\echo :LAST_ERROR_SQLSTATE
SET outbox.headers = '"a string"';
\echo :LAST_ERROR_SQLSTATE
SET outbox.headers = '["a", "b"]';
\echo :LAST_ERROR_SQLSTATE
SET outbox.headers = '{"n": 1}';
\echo :LAST_ERROR_SQLSTATE
SET outbox.headers = '{"nested": {"a": "b"}}';
\echo :LAST_ERROR_SQLSTATE
SET outbox.headers = '{"event_id": "mine"}';
\echo :LAST_ERROR_SQLSTATE
SET outbox.headers = '{"nul": "\u0000"}';
\echo :LAST_ERROR_SQLSTATE
-- nested a hundred thousand levels deep: refused as nested (22023) before
-- any parser recurses that deep
DO $$
BEGIN
	PERFORM set_config('outbox.headers',
					   repeat('{"a": ', 100000) || '"b"' || repeat('}', 100000), false);
EXCEPTION WHEN OTHERS THEN
	RAISE NOTICE 'refused with %', SQLSTATE;
END
$$;
SHOW outbox.headers;
-- braces and brackets inside strings are text
SET outbox.headers = '{"b": "{[\"{"}';
SHOW outbox.headers;
SET outbox.headers = '{"kept": "yes"}';
RESET outbox.headers;

-- any role may set it
CREATE ROLE outbox_hdr_user;
SET ROLE outbox_hdr_user;
SET outbox.headers = '{"who": "anyone"}';
SHOW outbox.headers;
RESET outbox.headers;
RESET ROLE;
DROP ROLE outbox_hdr_user;

DROP TABLE hdr_rows;
TRUNCATE outbox_log, outbox_retries, outbox_ledger, outbox_event_ids;
