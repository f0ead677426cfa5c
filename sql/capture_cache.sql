--
-- What the capture trigger keeps of a table between changes in one session
-- (src/capture/tables.c): every change after a DDL, a re-attach or a
-- snapshot request sees them, without a new session.  The worker is off:
-- the events are read from outbox_messages.
--
CREATE EXTENSION IF NOT EXISTS outbox;
TRUNCATE outbox_log, outbox_retries, outbox_ledger, outbox_event_ids;

-- the last event: its topic, key, the names its source gives, its after
CREATE FUNCTION last_event(OUT topic text, OUT key text, OUT source text, OUT after jsonb)
LANGUAGE sql AS $$
	SELECT m.topic, m.key, concat_ws('.', j.p #>> '{source,name}', j.p #>> '{source,schema}',
									j.p #>> '{source,table}'), j.p -> 'after'
	  FROM outbox_messages m, LATERAL (SELECT convert_from(m.payload, 'UTF8')::jsonb AS p) j
	 ORDER BY m.id DESC LIMIT 1
$$;

CREATE SCHEMA shop;
CREATE TABLE shop.orders (id int PRIMARY KEY, customer text, total int);
SELECT outbox_attach('shop.orders', 'app', format => 'debezium');
INSERT INTO shop.orders VALUES (1, 'ann', 10);
SELECT * FROM last_event();

-- attached again with other options: the next change takes them
SELECT outbox_attach('shop.orders', 'other', format => 'debezium');
INSERT INTO shop.orders VALUES (2, 'bob', 20);
SELECT * FROM last_event();
SELECT outbox_attach('shop.orders', 'orders.plain', ARRAY['customer']);
INSERT INTO shop.orders VALUES (3, 'cy', 30);
SELECT topic, key FROM last_event();

-- a key column renamed: the trigger's argument names a column no more
ALTER TABLE shop.orders RENAME COLUMN customer TO client;
INSERT INTO shop.orders VALUES (4, 'di', 40);
ALTER TABLE shop.orders RENAME COLUMN client TO customer;

-- the primary key moved to another column
SELECT outbox_attach('shop.orders', 'app', format => 'debezium');
INSERT INTO shop.orders VALUES (5, 'eve', 50);
SELECT key FROM last_event();
ALTER TABLE shop.orders DROP CONSTRAINT orders_pkey, ADD PRIMARY KEY (customer);
INSERT INTO shop.orders VALUES (6, 'flo', 60);
SELECT key FROM last_event();

-- a column added, one dropped
ALTER TABLE shop.orders ADD COLUMN note text DEFAULT 'new', DROP COLUMN total;
INSERT INTO shop.orders VALUES (7, 'gus');
SELECT * FROM last_event();

-- the table renamed, then its schema (which invalidates no table)
ALTER TABLE shop.orders RENAME TO sales;
INSERT INTO shop.sales VALUES (8, 'hal');
SELECT topic, source FROM last_event();
ALTER SCHEMA shop RENAME TO store;
INSERT INTO store.sales VALUES (9, 'ida');
SELECT topic, source FROM last_event();

-- a rename rolled back, in a transaction and in a subtransaction: the
-- next change has the name that stayed
BEGIN;
ALTER TABLE store.sales RENAME TO gone;
INSERT INTO store.gone VALUES (10, 'jo');
SELECT topic FROM last_event();
ROLLBACK;
INSERT INTO store.sales VALUES (10, 'jo');
SELECT topic FROM last_event();
BEGIN;
SAVEPOINT s;
ALTER TABLE store.sales RENAME TO gone;
INSERT INTO store.gone VALUES (11, 'kim');
ROLLBACK TO SAVEPOINT s;
INSERT INTO store.sales VALUES (11, 'kim');
SELECT topic, key FROM last_event();
COMMIT;

-- dropped and made again with the same name
DROP TABLE store.sales;
CREATE TABLE store.sales (id int PRIMARY KEY, amount int);
SELECT outbox_attach('store.sales', 'outbox.sales');
INSERT INTO store.sales VALUES (10, 100);
SELECT topic, key, convert_from(payload, 'UTF8')::jsonb -> 'after' AS after
  FROM outbox_messages ORDER BY id DESC LIMIT 1;

-- a snapshot asked for after the session's last change: a row the
-- snapshot will read is left to it (no change event)
SELECT count(*) AS events FROM outbox_messages \gset
BEGIN;
SELECT outbox_attach('store.sales', 'outbox.sales', snapshot => true);
INSERT INTO store.sales VALUES (11, 110);
SELECT count(*) - :events AS new_events FROM outbox_messages;
ROLLBACK;
INSERT INTO store.sales VALUES (11, 110);
SELECT count(*) - :events AS new_events FROM outbox_messages;

-- the same, asked for on a partitioned table while its partition was
-- written to
CREATE TABLE store.parts (id int PRIMARY KEY, v int) PARTITION BY RANGE (id);
CREATE TABLE store.parts_low PARTITION OF store.parts FOR VALUES FROM (0) TO (100);
SELECT outbox_attach('store.parts', 'outbox.parts');
INSERT INTO store.parts_low VALUES (1, 1);
SELECT count(*) AS events FROM outbox_messages \gset
BEGIN;
SELECT outbox_attach('store.parts', 'outbox.parts', snapshot => true);
INSERT INTO store.parts_low VALUES (2, 2);
SELECT count(*) - :events AS new_events FROM outbox_messages;
ROLLBACK;
INSERT INTO store.parts_low VALUES (2, 2);
SELECT count(*) - :events AS new_events FROM outbox_messages;
SELECT outbox_detach('store.parts');

-- the same, the key of a type that the session's search_path names
-- unqualified: the key is the one the snapshot noted, the row left to it
CREATE DOMAIN store.ident AS int;
CREATE TABLE store.items (id store.ident PRIMARY KEY, v int);
SELECT outbox_attach('store.items', 'outbox.items');
INSERT INTO store.items VALUES (1, 1);
SELECT count(*) AS events FROM outbox_messages \gset
BEGIN;
SELECT outbox_attach('store.items', 'outbox.items', snapshot => true);
SET LOCAL search_path = store, public;
INSERT INTO items VALUES (2, 2);
UPDATE items SET v = 3 WHERE id = 1;
SELECT count(*) - :events AS new_events FROM public.outbox_messages;
ROLLBACK;
SELECT outbox_detach('store.items');

-- the text of an object's name is qualified as with the search_path the
-- trigger had before 1.4 (pg_catalog, pg_temp), whatever the session's
CREATE TABLE store.refs (id int PRIMARY KEY, rel regclass, types regtype[], n int);
SELECT outbox_attach('store.refs', 'app', format => 'debezium');
SET search_path = store, public;
INSERT INTO refs VALUES (1, 'refs', ARRAY['int4'::regtype], 1);
SELECT after FROM last_event();
SELECT outbox_attach('store.refs', 'outbox.refs');
INSERT INTO refs VALUES (2, 'refs', ARRAY['int4'::regtype], 2);
SELECT convert_from(payload, 'UTF8')::jsonb -> 'after' AS after
  FROM outbox_messages ORDER BY id DESC LIMIT 1;
RESET search_path;

-- the trigger function pins no search_path of its own from 1.4
SELECT proconfig FROM pg_proc WHERE oid = 'outbox_capture()'::regprocedure;

SELECT outbox_detach('store.refs');
SELECT outbox_detach('store.sales');
DROP SCHEMA store CASCADE;
DROP FUNCTION last_event();
TRUNCATE outbox_log, outbox_retries, outbox_ledger, outbox_event_ids;
