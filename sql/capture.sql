--
-- outbox_capture / outbox_attach / outbox_detach: row changes as events.
--
CREATE EXTENSION IF NOT EXISTS outbox;
TRUNCATE outbox_log, outbox_retries, outbox_ledger, outbox_event_ids;

-- the envelope without its time-dependent parts
CREATE FUNCTION envelope(payload bytea) RETURNS jsonb LANGUAGE sql
	AS $$ SELECT convert_from(payload, 'UTF8')::jsonb #- '{source,ts_ms}' #- '{source,txid}' $$;

CREATE TABLE orders (id int PRIMARY KEY, customer text, total numeric, note text);
SELECT outbox_attach('orders', 'orders.changes');
SELECT tgname, pg_get_triggerdef(oid) FROM pg_trigger
 WHERE tgrelid = 'orders'::regclass ORDER BY tgname;

-- every operation, in the changing transaction
INSERT INTO orders VALUES (1, 'ann', 9.99, 'say "hi"'), (2, 'bob', NULL, NULL);
UPDATE orders SET total = 12.50 WHERE id = 1;
DELETE FROM orders WHERE id = 2;
BEGIN;
INSERT INTO orders VALUES (3, 'rolled back', 0, NULL);
ROLLBACK;
SELECT id, topic, key, envelope(payload) FROM outbox_messages ORDER BY id;

-- source.txid is the changing transaction's, ts_ms the time of the change
BEGIN;
INSERT INTO orders VALUES (4, 'cy', 1, NULL), (5, 'di', 2, NULL);
SELECT txid_current() AS tx, floor(extract(epoch FROM now()) * 1000)::bigint AS started_ms \gset
COMMIT;
SELECT count(*) AS events,
	   bool_and((convert_from(payload, 'UTF8')::jsonb #>> '{source,txid}')::bigint = :tx) AS same_txid,
	   bool_and((convert_from(payload, 'UTF8')::jsonb #>> '{source,ts_ms}')::bigint
				BETWEEN :started_ms AND ceil(extract(epoch FROM clock_timestamp()) * 1000)::bigint) AS ts_ms_now
  FROM outbox_messages WHERE key IN ('4', '5');

-- TRUNCATE is published, not ignored
TRUNCATE orders;
SELECT key, envelope(payload) FROM outbox_messages ORDER BY id DESC LIMIT 1;

-- composite primary key: a JSON array of the key columns' texts
TRUNCATE outbox_log, outbox_retries, outbox_ledger, outbox_event_ids;
CREATE TABLE lines (order_id int, line int, sku text, PRIMARY KEY (order_id, line));
SELECT outbox_attach('lines', 'lines');
INSERT INTO lines VALUES (7, 1, 'x'), (7, 2, 'y');
-- key columns given: they replace the primary key; attaching again replaces
SELECT outbox_attach('orders', 'orders.by-customer', ARRAY['customer', 'note']);
INSERT INTO orders VALUES (6, 'ann', 1, 'a "quoted", note'), (8, 'bob', 1, NULL);
SELECT outbox_attach('orders', 'orders.by-customer', ARRAY['customer']);
INSERT INTO orders VALUES (9, 'eve', 1, NULL), (10, NULL, 1, NULL);
-- no primary key, no key columns: no key
CREATE TABLE notes (body text);
SELECT outbox_attach('notes', 'notes');
INSERT INTO notes VALUES ('n');
SELECT topic, key, envelope(payload) -> 'after' AS after FROM outbox_messages ORDER BY id;

-- detach drops both triggers
SELECT outbox_detach('orders');
SELECT count(*) AS triggers FROM pg_trigger WHERE tgrelid = 'orders'::regclass;
INSERT INTO orders VALUES (11, 'gone', 0, NULL);
SELECT count(*) AS events FROM outbox_messages WHERE topic LIKE 'orders%' AND key IN ('11', 'gone');
SELECT outbox_detach('orders');

-- a role that may write orders, and nothing of the outbox, is captured too
SELECT outbox_attach('orders', 'orders.changes');
CREATE ROLE outbox_clerk;
GRANT INSERT ON orders TO outbox_clerk;
SET ROLE outbox_clerk;
INSERT INTO orders VALUES (12, 'clerk', 0, NULL);
RESET ROLE;
SELECT key FROM outbox_messages WHERE key = '12';
DROP OWNED BY outbox_clerk;
DROP ROLE outbox_clerk;

-- called wrongly
SELECT outbox_attach('orders', 'bad topic');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_attach('orders', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_attach('orders', 'orders', ARRAY['nope']);
\echo :LAST_ERROR_SQLSTATE
CREATE VIEW orders_view AS SELECT * FROM orders;
SELECT outbox_attach('orders_view', 'orders');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_attach('no_such_table', 'orders');
\echo :LAST_ERROR_SQLSTATE
-- a trigger defined by hand: what firing it says
CREATE TABLE wrong (id int PRIMARY KEY);
CREATE FUNCTION fire(definition text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE 'CREATE TRIGGER hand_made ' || definition;
	BEGIN
		INSERT INTO wrong VALUES (1);
	EXCEPTION WHEN OTHERS THEN
		DROP TRIGGER hand_made ON wrong;
		RETURN SQLSTATE || ': ' || SQLERRM;
	END;
	RAISE EXCEPTION 'the trigger fired without error';
END
$$;
SELECT fire('BEFORE INSERT ON wrong FOR EACH ROW EXECUTE FUNCTION outbox_capture(''t'')') AS before_row;
SELECT fire('AFTER INSERT ON wrong FOR EACH STATEMENT EXECUTE FUNCTION outbox_capture(''t'')') AS per_statement;
SELECT fire('AFTER INSERT ON wrong FOR EACH ROW EXECUTE FUNCTION outbox_capture()') AS no_topic;
SELECT fire('AFTER INSERT ON wrong FOR EACH ROW EXECUTE FUNCTION outbox_capture(''t'', ''nope'')') AS bad_key;
SELECT fire('AFTER INSERT ON wrong FOR EACH ROW EXECUTE FUNCTION outbox_capture(''a/b'')') AS bad_topic;
SELECT outbox_capture();
\echo :LAST_ERROR_SQLSTATE
-- the error's context names the trigger and its table
CREATE TRIGGER hand_made AFTER INSERT ON wrong FOR EACH ROW EXECUTE FUNCTION outbox_capture();
INSERT INTO wrong VALUES (1);
DROP TRIGGER hand_made ON wrong;
SELECT count(*) AS nothing_stored FROM wrong;

DROP TABLE orders, lines, notes, wrong CASCADE;
DROP FUNCTION envelope(bytea), fire(text);
