--
-- What the router trigger keeps of its table between inserts in one
-- session (src/capture/router.c, trigger_cache.c): every insert after a
-- DDL, a re-attach, or the rollback of either, sees the table's columns
-- and the router's options as they are then.  The worker is off: the
-- records are read from outbox_messages.
--
CREATE EXTENSION IF NOT EXISTS outbox;
TRUNCATE outbox_log, outbox_retries, outbox_ledger, outbox_event_ids;

-- the last record: its topic, key, headers and value, and whether its
-- event_id is the id column's
CREATE FUNCTION last_record(OUT topic text, OUT key text, OUT headers jsonb, OUT value text,
							OUT event_id_is_id boolean)
LANGUAGE sql AS $$
	SELECT topic, key, headers, convert_from(payload, 'UTF8'), event_id::text = headers ->> 'id'
	  FROM outbox_messages ORDER BY id DESC LIMIT 1
$$;

-- an outbox table as Debezium's documentation has it
CREATE SCHEMA app;
CREATE TABLE app.outbox (id uuid PRIMARY KEY, aggregatetype varchar(255) NOT NULL,
	aggregateid varchar(255) NOT NULL, type varchar(255) NOT NULL, payload jsonb);
SELECT outbox_attach_router('app.outbox', header_columns => '{type:eventType}');
INSERT INTO app.outbox VALUES ('00000000-0000-4000-8000-000000000001', 'Order', '1', 'OrderCreated', '{"id": 1}');
SELECT * FROM last_record();

-- attached again with other options: the next insert takes them
SELECT outbox_attach_router('app.outbox', 'orders', route_by => NULL, expand_payload => true,
							key_converter => 'string');
INSERT INTO app.outbox VALUES ('00000000-0000-4000-8000-000000000002', 'Order', '2', 'OrderPaid', '{"id": 2}');
SELECT * FROM last_record();
SELECT outbox_attach_router('app.outbox', header_columns => '{type:eventType}');

-- two columns that swap names between two inserts of one transaction: the
-- second insert's key is the column now called aggregateid, its eventType
-- the column now called type
CREATE PROCEDURE swap_key_and_type() LANGUAGE sql AS $$
	ALTER TABLE app.outbox RENAME COLUMN aggregateid TO swap;
	ALTER TABLE app.outbox RENAME COLUMN type TO aggregateid;
	ALTER TABLE app.outbox RENAME COLUMN swap TO type;
$$;
BEGIN;
INSERT INTO app.outbox VALUES ('00000000-0000-4000-8000-000000000003', 'Order', '3', 'OrderShipped', '{}');
SELECT * FROM last_record();
CALL swap_key_and_type();
INSERT INTO app.outbox VALUES ('00000000-0000-4000-8000-000000000004', 'Order', 'OrderShipped', '4', '{}');
SELECT * FROM last_record();
COMMIT;

-- the same swap rolled back, in a transaction and in a subtransaction:
-- the next insert reads the columns by the names that stayed
BEGIN;
CALL swap_key_and_type();
INSERT INTO app.outbox VALUES ('00000000-0000-4000-8000-000000000005', 'Order', '5', 'OrderPacked', '{}');
SELECT * FROM last_record();
ROLLBACK;
INSERT INTO app.outbox VALUES ('00000000-0000-4000-8000-000000000005', 'Order', 'OrderPacked', '5', '{}');
SELECT * FROM last_record();
BEGIN;
SAVEPOINT s;
CALL swap_key_and_type();
INSERT INTO app.outbox VALUES ('00000000-0000-4000-8000-000000000006', 'Order', '6', 'OrderLost', '{}');
ROLLBACK TO SAVEPOINT s;
INSERT INTO app.outbox VALUES ('00000000-0000-4000-8000-000000000006', 'Order', 'OrderLost', '6', '{}');
SELECT * FROM last_record();
COMMIT;

-- attached again with other options in a subtransaction rolled back: the
-- options that stayed
BEGIN;
SAVEPOINT s;
SELECT outbox_attach_router('app.outbox', 'orders', route_by => NULL, key_column => NULL);
INSERT INTO app.outbox VALUES ('00000000-0000-4000-8000-000000000007', 'Order', 'OrderFound', '7', '{}');
SELECT * FROM last_record();
ROLLBACK TO SAVEPOINT s;
INSERT INTO app.outbox VALUES ('00000000-0000-4000-8000-000000000007', 'Order', 'OrderFound', '7', '{}');
SELECT * FROM last_record();
COMMIT;

-- a column renamed away, then back: no such column, then the column again
ALTER TABLE app.outbox RENAME COLUMN type TO kind;
INSERT INTO app.outbox VALUES ('00000000-0000-4000-8000-000000000008', 'Order', 'OrderRenamed', '8', '{}');
\echo :LAST_ERROR_SQLSTATE
ALTER TABLE app.outbox RENAME COLUMN kind TO type;
INSERT INTO app.outbox VALUES ('00000000-0000-4000-8000-000000000008', 'Order', 'OrderRenamed', '8', '{}');
SELECT * FROM last_record();

-- a column dropped and added again under its name, at another place
ALTER TABLE app.outbox DROP COLUMN aggregateid, ADD COLUMN aggregateid varchar(255);
INSERT INTO app.outbox VALUES ('00000000-0000-4000-8000-000000000009', 'Order', 'OrderMoved', '{}', '9');
SELECT * FROM last_record();

-- the id retyped: a text id has an event_id of its own, a uuid is its event_id
ALTER TABLE app.outbox ALTER COLUMN id TYPE text;
INSERT INTO app.outbox VALUES ('00000000-0000-4000-8000-00000000000a', 'Order', 'OrderText', '{}', '10');
SELECT * FROM last_record();
ALTER TABLE app.outbox ALTER COLUMN id TYPE uuid USING id::uuid;
INSERT INTO app.outbox VALUES ('00000000-0000-4000-8000-00000000000b', 'Order', 'OrderUuid', '{}', '11');
SELECT * FROM last_record();

-- a header column retyped to one whose text reads the session's settings:
-- written with those the router pins (UTC), whatever the session's
SET TimeZone = 'America/New_York';
ALTER TABLE app.outbox ALTER COLUMN type TYPE tstzrange
	USING tstzrange('2024-01-01 00:00:00+00', '2024-01-02 00:00:00+00');
INSERT INTO app.outbox VALUES ('00000000-0000-4000-8000-00000000000c', 'Order',
	tstzrange('2024-01-01 00:00:00+00', '2024-01-02 00:00:00+00'), '{}', '12');
SELECT * FROM last_record();
RESET TimeZone;

-- a timestamp column attached, then retyped to text: each insert fails
ALTER TABLE app.outbox ALTER COLUMN type TYPE text, ADD COLUMN created timestamp;
SELECT outbox_attach_router('app.outbox', timestamp_column => 'created');
INSERT INTO app.outbox VALUES ('00000000-0000-4000-8000-00000000000d', 'Order', 'OrderDated', '{}', '13',
	'2024-01-01 00:00:00');
SELECT topic, key, created_at = '2024-01-01 00:00:00+00' AS created_at_is_column
  FROM outbox_messages ORDER BY id DESC LIMIT 1;
ALTER TABLE app.outbox ALTER COLUMN created TYPE text;
INSERT INTO app.outbox VALUES ('00000000-0000-4000-8000-00000000000e', 'Order', 'OrderDated', '{}', '14',
	'2024-01-01 00:00:00');
\echo :LAST_ERROR_SQLSTATE

-- dropped and made again with the same name: its own trigger
DROP TABLE app.outbox;
CREATE TABLE app.outbox (id uuid PRIMARY KEY, payload jsonb, aggregateid text, aggregatetype text);
SELECT outbox_attach_router('app.outbox');
INSERT INTO app.outbox VALUES ('00000000-0000-4000-8000-00000000000f', '{"again": true}', '15', 'Order');
SELECT * FROM last_record();

SELECT outbox_detach('app.outbox');

--
-- From 1.4 the trigger runs with the search_path of the session that
-- inserts: the text of an object's name (reg* types), in the topic, the
-- key or a header, is as under the path 1.3 pinned for the whole function
-- (pg_catalog, pg_temp), whatever the session's
--
SELECT proconfig FROM pg_proc WHERE oid = 'outbox_router()'::regprocedure;
CREATE TABLE app.things ();
CREATE TYPE app.mood AS ENUM ('ok');
CREATE TABLE app.refs (id uuid PRIMARY KEY, rel regclass NOT NULL, types regtype[],
	payload jsonb);
SELECT outbox_attach_router('app.refs', 'refs.${routedByValue}', 'rel', 'types',
							header_columns => '{rel:rel,types:types}');
SET search_path = pg_catalog, pg_temp;
SELECT 'app.things'::regclass::text AS pinned_rel, 'app.mood'::regtype::text AS pinned_mood \gset
RESET search_path;
SET search_path = app, public;
INSERT INTO refs VALUES ('00000000-0000-4000-8000-000000000010', 'things', ARRAY['mood'::regtype, 'int4'::regtype], '{}');
SELECT 'things'::regclass::text AS rel_in_session;
RESET search_path;
SELECT topic, key, headers, headers ->> 'rel' = :'pinned_rel' AS rel_as_pinned,
	   (headers ->> 'types')::jsonb = jsonb_build_array(:'pinned_mood', 'integer') AS types_as_pinned
  FROM outbox_messages ORDER BY id DESC LIMIT 1;

--
-- A table owner with CREATE on the extension's schema (public here) who
-- plants functions and operators named like built-ins there, and whose
-- schema comes before pg_catalog in the inserting session's search_path:
-- none of its code runs in the trigger, whoever inserts, and the records
-- are those of the pinned path
--
CREATE ROLE outbox_planter;
GRANT CREATE ON SCHEMA public TO outbox_planter;
GRANT USAGE ON SCHEMA app TO outbox_planter;
ALTER TABLE app.refs OWNER TO outbox_planter;
SET ROLE outbox_planter;
CREATE FUNCTION public.planted() RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION 'planted code ran as %', current_user;
END
$$;
CREATE FUNCTION public.now() RETURNS timestamptz LANGUAGE sql AS 'SELECT NULL::timestamptz WHERE public.planted()';
CREATE FUNCTION public.nextval(regclass) RETURNS bigint LANGUAGE sql AS 'SELECT 0::bigint WHERE public.planted()';
CREATE FUNCTION public.quote_ident(text) RETURNS text LANGUAGE sql AS 'SELECT $1 WHERE public.planted()';
CREATE FUNCTION public.jsonb_build_object(text, text) RETURNS jsonb LANGUAGE sql AS 'SELECT NULL::jsonb WHERE public.planted()';
CREATE FUNCTION public.planted_eq(text, text) RETURNS boolean LANGUAGE sql AS 'SELECT public.planted()';
CREATE FUNCTION public.planted_eq(bytea, bytea) RETURNS boolean LANGUAGE sql AS 'SELECT public.planted()';
CREATE FUNCTION public.planted_eq(uuid, uuid) RETURNS boolean LANGUAGE sql AS 'SELECT public.planted()';
CREATE OPERATOR public.= (LEFTARG = text, RIGHTARG = text, FUNCTION = public.planted_eq);
CREATE OPERATOR public.= (LEFTARG = bytea, RIGHTARG = bytea, FUNCTION = public.planted_eq);
CREATE OPERATOR public.= (LEFTARG = uuid, RIGHTARG = uuid, FUNCTION = public.planted_eq);
CREATE DOMAIN public.text AS pg_catalog.text CHECK (public.planted());
CREATE DOMAIN public.jsonb AS pg_catalog.jsonb CHECK (public.planted());
-- the trap is set: an unqualified name under that path is the planted one
SET search_path = public, pg_catalog;
SELECT now();
SELECT 'a'::text;
RESET search_path;
RESET ROLE;
-- inserted by a superuser, then by the owner
SET search_path = public, app, pg_catalog;
INSERT INTO app.refs VALUES ('00000000-0000-4000-8000-000000000011', 'app.things', ARRAY['app.mood'::regtype], '{"by": "superuser"}');
SET ROLE outbox_planter;
INSERT INTO app.refs VALUES ('00000000-0000-4000-8000-000000000012', 'app.things', ARRAY['app.mood'::regtype], '{"by": "owner"}');
RESET ROLE;
RESET search_path;
SELECT topic, key, headers, convert_from(payload, 'UTF8') AS value,
	   headers ->> 'rel' = :'pinned_rel' AS rel_as_pinned
  FROM outbox_messages ORDER BY id DESC LIMIT 2;
DROP OWNED BY outbox_planter;
DROP ROLE outbox_planter;
DROP TABLE app.things;
DROP TYPE app.mood;
DROP SCHEMA app CASCADE;
DROP FUNCTION last_record();
DROP PROCEDURE swap_key_and_type();
TRUNCATE outbox_log, outbox_retries, outbox_ledger, outbox_event_ids;
