--
-- The reference in the catalog: a description on every object of the
-- extension; docs/reference.md names them all; outbox_attachments;
-- outbox_health where no worker publishes; what an application role needs
-- to read its events' status.
--

-- every function, view, table, sequence and type of the extension says
-- what it is (psql's \df+, \dv+, \dt+): none is missing
SELECT pg_describe_object(d.classid, d.objid, 0) AS undescribed
  FROM pg_depend d
 WHERE d.refclassid = 'pg_extension'::regclass
   AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'outbox')
   AND d.deptype = 'e'
   AND obj_description(d.objid, d.classid::regclass::name) IS NULL
 ORDER BY 1;
-- and each function's says who may call it
SELECT p.oid::regprocedure AS unsaid
  FROM pg_proc p
  JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
 WHERE d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'outbox')
   AND obj_description(p.oid, 'pg_proc') !~* '(by grant|Runs with the rights|nothing else calls it|Superusers only)'
 ORDER BY 1;

-- docs/reference.md, read here (psql), names every function and view of
-- the extension, and every outbox.* setting in a row of its settings table
-- with the context the server gives it; and names none that is not there
\getenv abs_srcdir PG_ABS_SRCDIR
\set reference_file :abs_srcdir '/docs/reference.md'
\set reference `cat :reference_file`
SELECT DISTINCT p.proname AS function_not_in_reference
  FROM pg_proc p
  JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
 WHERE d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'outbox')
   AND strpos(:'reference', p.proname || '(') = 0
 ORDER BY 1;
SELECT c.relname AS view_not_in_reference
  FROM pg_class c
  JOIN pg_depend d ON d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype = 'e'
 WHERE d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'outbox')
   AND c.relkind = 'v'
   AND strpos(:'reference', '`' || c.relname || '`') = 0
 ORDER BY 1;
SELECT name AS setting_not_in_reference, context
  FROM pg_settings
 WHERE name LIKE 'outbox.%'
   AND :'reference' !~ ('\n\| `' || replace(name, '.', '\.') || '` \| [^|\n]* \| ' || context)
 ORDER BY 1;
SELECT DISTINCT m[1] AS in_reference_not_in_catalog
  FROM regexp_matches(:'reference', '(outbox_[a-z0-9_]+)\(|\n\| `(outbox\.[a-z_]+)` \|', 'g') AS r(m0),
	   LATERAL (SELECT ARRAY[coalesce(r.m0[1], r.m0[2])]) AS x(m)
 WHERE m[1] NOT IN (SELECT p.proname FROM pg_proc p
					  JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
					 WHERE d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'outbox'))
   AND m[1] NOT IN (SELECT name FROM pg_settings)
 ORDER BY 1;

-- the tables attached, as outbox_attach and outbox_attach_router made them
CREATE TABLE ref_orders (id int PRIMARY KEY, region text, total numeric);
CREATE TABLE ref_shipments (id int PRIMARY KEY);
CREATE TABLE ref_outbox (id uuid PRIMARY KEY, aggregatetype text, aggregateid text,
						 type text, payload jsonb);
CREATE ROLE ref_attacher;
GRANT TRIGGER ON ref_orders TO ref_attacher;
GRANT EXECUTE ON FUNCTION outbox_attach(regclass, text, text[], text, boolean, boolean, text, text, boolean, text, boolean),
	outbox_capture() TO ref_attacher;
SET ROLE ref_attacher;
SELECT outbox_attach('ref_orders', 'orders', key_columns => '{region,id}');
RESET ROLE;
SELECT outbox_attach('ref_shipments', 'shop', format => 'debezium', tombstones => true);
SELECT outbox_attach_router('ref_outbox', header_columns => '{type:eventType}');
SELECT "table", kind, format, topic, options, attached_by,
	   attached_at > now() - interval '1 minute' AS attached_now
  FROM outbox_attachments;
-- nothing is said of a table detached, or of another trigger on the function
SELECT outbox_detach('ref_shipments');
CREATE TRIGGER outbox_capture_elsewhere AFTER INSERT ON ref_shipments
	FOR EACH ROW EXECUTE FUNCTION outbox_capture('shipments');
SELECT "table", kind FROM outbox_attachments;
SELECT count(*) FROM outbox_attached WHERE relid = 'ref_shipments'::regclass;
-- arguments as the trigger holds them, whatever bytes a column's name has
CREATE TABLE ref_odd ("x\000" int PRIMARY KEY, "a\" int);
SELECT outbox_attach('ref_odd', 'odd', key_columns => ARRAY['x\000', 'a\']);
SELECT "table", topic, options FROM outbox_attachments WHERE "table" = 'ref_odd'::regclass;
DROP TABLE ref_orders, ref_shipments, ref_outbox, ref_odd;
REVOKE ALL ON FUNCTION outbox_attach(regclass, text, text[], text, boolean, boolean, text, text, boolean, text, boolean),
	outbox_capture() FROM ref_attacher;
DROP ROLE ref_attacher;

-- outbox_health, of a database whose worker is off (setup.sql): the
-- signals that depend neither on the worker's timing nor on the events
-- the tests before left
SELECT signal, status, detail FROM outbox_health
 WHERE signal NOT IN ('worker', 'brokers', 'worker slots', 'backlog age')
 ORDER BY signal;
-- a failing topic is critical, naming the topic and Kafka's error
BEGIN;
INSERT INTO outbox_retries (topic, payload, status, attempts, last_error, next_attempt_at)
VALUES ('denied', 'x', 'failed', 1, 'Broker: Topic authorization failed', now() + interval '1 hour');
SELECT status, detail FROM outbox_health WHERE signal = 'failing topics';
-- an event due for 10 minutes is past the critical threshold, for 2 past
-- the warning one
UPDATE outbox_retries SET status = 'pending', created_at = now() - interval '10 minutes',
						  next_attempt_at = NULL
 WHERE topic = 'denied';
SELECT status, detail FROM outbox_health WHERE signal = 'backlog age';
SET LOCAL outbox.health_backlog_critical = '1h';
SELECT status FROM outbox_health WHERE signal = 'backlog age';
ROLLBACK;

-- an application role reads its events' status with the grants the README
-- gives, and not without them
CREATE ROLE ref_app;
GRANT EXECUTE ON FUNCTION outbox_enqueue(text, jsonb, text, jsonb, uuid) TO ref_app;
SET ROLE ref_app;
SELECT outbox_enqueue('ref.app', '{}'::jsonb) AS ref_id \gset
SELECT status FROM outbox_messages WHERE id = :ref_id;
RESET ROLE;
GRANT SELECT ON outbox_messages TO ref_app;
SET ROLE ref_app;
SELECT status FROM outbox_messages WHERE id = :ref_id;
RESET ROLE;
GRANT EXECUTE ON FUNCTION outbox_unread(bigint, xid8, outbox_reader) TO ref_app;
SET ROLE ref_app;
SELECT status, attempts FROM outbox_messages WHERE id = :ref_id;
RESET ROLE;
REVOKE ALL ON outbox_messages FROM ref_app;
REVOKE ALL ON FUNCTION outbox_unread(bigint, xid8, outbox_reader),
	outbox_enqueue(text, jsonb, text, jsonb, uuid) FROM ref_app;
DROP ROLE ref_app;
