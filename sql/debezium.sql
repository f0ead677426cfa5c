--
-- Debezium's shapes: change events (outbox_attach(..., format => 'debezium')),
-- the outbox event router (outbox_attach_router), snapshot requests, bad
-- input, and outbox_attach as 1.1 declares it.  The worker is off: the
-- events are read from outbox_messages.
--
CREATE EXTENSION IF NOT EXISTS outbox;
TRUNCATE outbox_log, outbox_retries, outbox_ledger, outbox_event_ids;

-- an event as published, but for what changes from run to run (the times,
-- the transaction id and the WAL position, which are checked apart, and
-- the database); and
-- as jsonb
CREATE FUNCTION ev(payload bytea) RETURNS text LANGUAGE sql AS $$
	SELECT replace(regexp_replace(convert_from(payload, 'UTF8'),
								  '"(ts_ms|ts_us|ts_ns|txId|txid|lsn)": ?[0-9]+', '"\1":_', 'g'),
				   '"db":"' || current_database() || '"', '"db":"(this database)"')
$$;
CREATE FUNCTION evj(payload bytea) RETURNS jsonb LANGUAGE sql AS $$
	SELECT convert_from(payload, 'UTF8')::jsonb
$$;

--
-- Change events: a composite primary key and the common types
--
CREATE TABLE items (
	shop	text,
	id		int,
	qty		smallint,
	big		bigint,
	price	numeric(10,2),
	ratio	double precision,
	small	real,
	ok		boolean,
	label	varchar(20),
	code	char(3),
	born	date,
	at		timestamp,
	at_ms	timestamp(3),
	at_tz	timestamptz,
	t		time,
	t_ms	time(3),
	t_tz	timetz,
	span	interval,
	doc		jsonb,
	raw		json,
	bytes	bytea,
	uid		uuid,
	tags	text[],
	nums	int[],
	cash	money,
	flag	bit(1),
	bits	varbit,
	addr	inet,
	pt		point,
	r		int4range,
	PRIMARY KEY (shop, id)
);
SELECT outbox_attach('items', 'shop1', format => 'debezium');
SELECT tgname, pg_get_triggerdef(oid) FROM pg_trigger
 WHERE tgrelid = 'items'::regclass ORDER BY tgname;

-- the session's settings do not change what is written
SET TimeZone = 'Asia/Kolkata';
SET DateStyle = 'SQL, DMY';
SET IntervalStyle = 'iso_8601';
SET extra_float_digits = 0;
SET bytea_output = 'escape';
INSERT INTO items VALUES ('north', 1, 7, 9007199254740993, 12.30, 0.1, 1.5, true,
	'caf\u00e9 "quoted"', 'ab', '2024-02-29', '2024-02-29 13:14:15.123456',
	'2024-02-29 13:14:15.123', '2024-02-29 13:14:15.5+05:30', '13:14:15.123456',
	'13:14:15.123', '13:14:15+02', '1 year 2 mons 3 days 04:05:06.78',
	'{"b": [1, 2.50, null], "a": "x"}', '{"z": 1,  "a": [ ] }', '\x00ff10',
	'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{x,"y z",NULL}', '{{1,2},{3,4}}',
	1234567.5, B'1', B'101', '10.0.0.1/8', '(1.5,-2)', '[1,5)');
INSERT INTO items (shop, id, ratio, small, at, born, span) VALUES
	('north', 2, 'NaN', '-Infinity', 'infinity', '1999-12-31', '-1 day -00:00:01.5'),
	('south', 1, 1e21, 1e-5, '-infinity', '0044-03-15 BC', '1 mon');
RESET TimeZone;
RESET DateStyle;
RESET IntervalStyle;
RESET extra_float_digits;
RESET bytea_output;
\pset format unaligned
SELECT topic, key, ev(payload) AS value FROM outbox_messages ORDER BY id;
\pset format aligned

-- update, delete, an update of the key, truncate, as the connector has
-- them under REPLICA IDENTITY DEFAULT (RecordsStreamProducerIT
-- shouldReceiveChangesForUpdates, shouldReceiveChangesForDeletes): no
-- before for an update, the key columns alone for a delete, each delete
-- followed by a tombstone (tombstones.on.delete=true); the truncate is
-- skipped (skipped.operations=t)
TRUNCATE outbox_log, outbox_retries, outbox_ledger, outbox_event_ids;
UPDATE items SET qty = 8 WHERE shop = 'north' AND id = 1;
DELETE FROM items WHERE shop = 'north' AND id = 2;
UPDATE items SET id = 3 WHERE shop = 'south' AND id = 1;
TRUNCATE items;
SELECT topic, key, headers, evj(payload) ->> 'op' AS op,
	   payload IS NULL AS tombstone,
	   jsonb_strip_nulls(evj(payload) -> 'before') AS before,
	   evj(payload) -> 'after' ->> 'qty' AS qty_after
  FROM outbox_messages ORDER BY id;
\pset format unaligned
SELECT ev(payload) AS truncate FROM outbox_messages WHERE key IS NULL;
\pset format aligned

-- REPLICA IDENTITY FULL: the whole row before; truncates published with
-- skipped_operations => 'none'
ALTER TABLE items REPLICA IDENTITY FULL;
SELECT outbox_attach('items', 'shop1', format => 'debezium', skipped_operations => 'none');
INSERT INTO items (shop, id, qty) VALUES ('north', 1, 7);
TRUNCATE outbox_log, outbox_retries, outbox_ledger, outbox_event_ids;
UPDATE items SET qty = 8;
DELETE FROM items;
INSERT INTO items (shop, id, qty) VALUES ('north', 1, 9);
TRUNCATE items;
SELECT key, evj(payload) ->> 'op' AS op, payload IS NULL AS tombstone,
	   evj(payload) -> 'before' ->> 'qty' AS qty_before,
	   evj(payload) -> 'after' ->> 'qty' AS qty_after
  FROM outbox_messages ORDER BY id;
\pset format unaligned
SELECT ev(payload) AS truncate FROM outbox_messages WHERE key IS NULL;
\pset format aligned
ALTER TABLE items REPLICA IDENTITY DEFAULT;

-- tombstones: after each delete, and after the delete of an update of the
-- key; none with tombstones => false
SELECT outbox_attach('items', 'shop1', format => 'debezium', tombstones => true);
INSERT INTO items (shop, id) VALUES ('east', 1), ('east', 2);
TRUNCATE outbox_log, outbox_retries, outbox_ledger, outbox_event_ids;
DELETE FROM items WHERE id = 1;
UPDATE items SET id = 5;
SELECT key, headers, payload IS NULL AS tombstone, evj(payload) ->> 'op' AS op
  FROM outbox_messages ORDER BY id;
SELECT outbox_attach('items', 'shop1', format => 'debezium', tombstones => false);
TRUNCATE outbox_log, outbox_retries, outbox_ledger, outbox_event_ids;
UPDATE items SET id = 6;
DELETE FROM items;
SELECT key, headers, payload IS NULL AS tombstone, evj(payload) ->> 'op' AS op
  FROM outbox_messages ORDER BY id;
SELECT outbox_attach('items', 'shop1', format => 'debezium');

--
-- Decimals as decimal.handling.mode writes them: precise (the default),
-- string, double.  Expected bytes: PostgresValueConverter.convertDecimal
-- and convertMoney, Kafka's Decimal (the unscaled value's
-- BigInteger.toByteArray) and Debezium's VariableScaleDecimal (scale, then
-- value, trailing zeros stripped); AbstractRecordsProducerTest
-- schemasAndValuesForBigDecimalEncodedNumericTypes,
-- schemasAndValuesForStringEncodedNumericTypes ("NAN", "POSITIVE_INFINITY"),
-- schemasAndValuesForDoubleEncodedNumericTypes; 12345678.90 as money ->
-- "SZYC0g==" (Decimal with scale 2).
--
CREATE TABLE amounts (id int PRIMARY KEY, fixed numeric(10,2), whole numeric(12),
					  free numeric, cash money, many numeric[]);
INSERT INTO amounts VALUES
	(1, 12.30, 100, 1.50, 12345678.90, '{1.2,3.40,-5}'),
	(2, -1.28, -128, -129, -1.28, '{0,100.00}'),
	(3, 0, 0, 0.000, 0, '{}'),
	(4, 99999999.99, 999999999999, 123456789012345678901234567890.123456789, -92233720368547758.08, NULL);
SELECT outbox_attach('amounts', 'm', format => 'debezium');
TRUNCATE outbox_log, outbox_retries, outbox_ledger, outbox_event_ids;
UPDATE amounts SET id = id;
SELECT outbox_attach('amounts', 'm', format => 'debezium', decimal_handling => 'string');
UPDATE amounts SET id = id;
SELECT outbox_attach('amounts', 'm', format => 'debezium', decimal_handling => 'double');
UPDATE amounts SET id = id;
CREATE FUNCTION after_text(payload bytea) RETURNS text LANGUAGE sql AS $$
	SELECT substring(convert_from(payload, 'UTF8') FROM '"after":(.*),"source":')
$$;
\pset format unaligned
SELECT key, after_text(payload) AS after FROM outbox_messages ORDER BY id;
\pset format aligned
-- NaN and the infinities: strings as the connector names them, numbers in
-- double mode; precise cannot write them (the connector stops), the change
-- fails
INSERT INTO amounts (id, free, fixed) VALUES (5, 'NaN', 'NaN'), (6, '-Infinity', NULL);
TRUNCATE outbox_log, outbox_retries, outbox_ledger, outbox_event_ids;
UPDATE amounts SET id = id WHERE id > 4;
SELECT outbox_attach('amounts', 'm', format => 'debezium', decimal_handling => 'string');
UPDATE amounts SET id = id WHERE id > 4;
\pset format unaligned
SELECT key, after_text(payload) AS after FROM outbox_messages ORDER BY id;
\pset format aligned
SELECT outbox_attach('amounts', 'm', format => 'debezium');
UPDATE amounts SET id = id WHERE id = 5;
\echo :LAST_ERROR_SQLSTATE
UPDATE amounts SET id = id WHERE id = 6;
\echo :LAST_ERROR_SQLSTATE
-- the events that 1.2's money encoding got wrong: digits past 2^53 cents
SELECT outbox_attach('amounts', 'm', format => 'debezium', decimal_handling => 'string');
TRUNCATE outbox_log, outbox_retries, outbox_ledger, outbox_event_ids;
UPDATE amounts SET id = id WHERE id = 4;
SELECT evj(payload) -> 'after' ->> 'cash' AS cash FROM outbox_messages;

-- A negative scale (PostgreSQL 15: numeric(5,-2) stores 12345 as 12300).
-- The connector with its default plugin, decoderbufs, which sends the
-- column's type as text ("numeric(5,-2)"), reads scale -2 from it
-- (debezium-connector-postgres .../connection/AbstractReplicationMessageColumn.java
-- lines 72-81, at debezium aad5519), and precision 5; its Decimal has
-- that scale (PostgresValueConverter.java numericSchema, line 430;
-- SpecialValueDecimal.builder), and the value is set to it
-- (withScaleAdjustedIfNeeded, lines 710-716: BigDecimal.setScale(-2),
-- unscaled 123, "ew=="); string: toPlainString, "12300"; double: 12300.0.
-- (With pgoutput it reads the typmod through pgjdbc's
-- TypeInfoCache.getScale, (typmod - 4) & 0xFFFF: scale 2046, the same
-- value with 2046 more zeros; docs/debezium.md says so.)
CREATE TABLE scaled (id int PRIMARY KEY, n numeric(5,-2), many numeric(5,-2)[]);
INSERT INTO scaled VALUES (1, 12345, '{-99,0,49,-150}'), (2, -12345, NULL);
TRUNCATE outbox_log, outbox_retries, outbox_ledger, outbox_event_ids;
SELECT outbox_attach('scaled', 'm', format => 'debezium');
UPDATE scaled SET id = id;
SELECT outbox_attach('scaled', 'm', format => 'debezium', schemas_enable => true);
UPDATE scaled SET id = id;
SELECT outbox_attach('scaled', 'm', format => 'debezium', decimal_handling => 'string');
UPDATE scaled SET id = id;
SELECT outbox_attach('scaled', 'm', format => 'debezium', decimal_handling => 'string',
					 schemas_enable => true);
UPDATE scaled SET id = id;
SELECT outbox_attach('scaled', 'm', format => 'debezium', decimal_handling => 'double');
UPDATE scaled SET id = id;
SELECT outbox_attach('scaled', 'm', format => 'debezium', decimal_handling => 'double',
					 schemas_enable => true);
UPDATE scaled SET id = id;
\pset format unaligned
SELECT after_text(payload) AS after,
	   substring(convert_from(payload, 'UTF8')
				 FROM '"field":"id"},(\{.*?"field":"n"\}),') AS n_schema
  FROM outbox_messages ORDER BY id;
\pset format aligned
DROP TABLE scaled;

--
-- skipped_operations: the connector's skipped.operations ("none", or c,
-- u, d, t); an update of the key is an update
--
SELECT outbox_attach('amounts', 'm', format => 'debezium', skipped_operations => 'c, d');
TRUNCATE outbox_log, outbox_retries, outbox_ledger, outbox_event_ids;
INSERT INTO amounts (id) VALUES (17);
UPDATE amounts SET id = 18 WHERE id = 17;
UPDATE amounts SET fixed = 1 WHERE id = 18;
DELETE FROM amounts WHERE id = 18;
TRUNCATE amounts;
SELECT key, evj(payload) ->> 'op' AS op, payload IS NULL AS tombstone FROM outbox_messages ORDER BY id;
SELECT pg_get_triggerdef(oid) FROM pg_trigger WHERE tgname = 'outbox_capture' AND tgrelid = 'amounts'::regclass;
SELECT outbox_attach('amounts', 'm', format => 'debezium', skipped_operations => 'u,x');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_attach('amounts', 'm', format => 'debezium', decimal_handling => 'exact');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_attach('amounts', 'm', decimal_handling => 'string');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_attach('amounts', 'm', skipped_operations => 'none');
\echo :LAST_ERROR_SQLSTATE

--
-- TOASTed values an update leaves unchanged: under REPLICA IDENTITY
-- DEFAULT, the connector's placeholder as each type's converter takes it
-- (UnchangedToastedPlaceholder, UnchangedToastedReplicationMessageColumn:
-- a string, its bytes, one element of text, bytes or UUID arrays, its
-- bytes as the numbers of int and bigint arrays); under FULL, the value
-- (RecordsStreamProducerIT shouldHandleToastedArrayColumnForReplicaIdentityFullTable)
--
CREATE TABLE docs (id int PRIMARY KEY, n int, body text, raw bytea, tags text[],
				   nums int[], ids uuid[], spec jsonb);
ALTER TABLE docs ALTER body SET STORAGE EXTERNAL, ALTER raw SET STORAGE EXTERNAL,
	ALTER tags SET STORAGE EXTERNAL, ALTER nums SET STORAGE EXTERNAL,
	ALTER ids SET STORAGE EXTERNAL, ALTER spec SET STORAGE EXTERNAL;
INSERT INTO docs SELECT 1, 0, repeat('x', 3000), convert_to(repeat('y', 3000), 'UTF8'),
	array_fill('t'::text, ARRAY[1000]), array_fill(7, ARRAY[1000]),
	array_fill('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid, ARRAY[200]),
	jsonb_build_object('k', repeat('z', 3000));
SELECT outbox_attach('docs', 'd', format => 'debezium');
TRUNCATE outbox_log, outbox_retries, outbox_ledger, outbox_event_ids;
UPDATE docs SET n = 1;
UPDATE docs SET n = 2, body = 'short', tags = '{a}';
ALTER TABLE docs REPLICA IDENTITY FULL;
UPDATE docs SET n = 3, body = repeat('x', 3000);
UPDATE docs SET n = 4;
SELECT evj(payload) -> 'after' ->> 'n' AS n, evj(payload) ->> 'before' IS NOT NULL AS has_before,
	   left(evj(payload) -> 'after' ->> 'body', 30) AS body,
	   left(evj(payload) -> 'after' ->> 'raw', 40) AS raw,
	   left(evj(payload) -> 'after' ->> 'tags', 40) AS tags,
	   left(evj(payload) -> 'after' ->> 'nums', 90) AS nums,
	   left(evj(payload) -> 'after' ->> 'ids', 42) AS ids,
	   left(evj(payload) -> 'after' ->> 'spec', 30) AS spec
  FROM outbox_messages ORDER BY id;

--
-- schemas_enable => true: key and value as the JSON converter writes them
-- with schemas.enable=true, {"schema":...,"payload":...}, the schema as
-- its asJsonSchema writes the connector's (TableSchemaBuilder: <topic>.Key,
-- <topic>.Value, <topic>.Envelope version 2; PostgresSourceInfoStructMaker;
-- SchemaFactory: the transaction block, the Enum of source.snapshot;
-- PostgresValueConverter.schemaBuilder: each column's type, optional
-- unless NOT NULL, and semantic names, versions, parameters)
--
CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');
CREATE TABLE typed (id int PRIMARY KEY, price numeric(10,2) NOT NULL, free numeric,
					cash money, at timestamp, at_ms timestamp(3), t_ms time(3), tz timestamptz,
					d date, span interval, u uuid, j jsonb, b bytea, bits bit(3), flag bit(1),
					pt point, tags text[], m mood, small smallint, f real);
SELECT outbox_attach('typed', 'sch', format => 'debezium', schemas_enable => true);
TRUNCATE outbox_log, outbox_retries, outbox_ledger, outbox_event_ids;
INSERT INTO typed VALUES (1, 12.30, 1.5, 12345678.90, '2024-02-29 13:14:15.123456',
	'2024-02-29 13:14:15.123', '13:14:15.123', '2024-02-29 13:14:15.5+00', '2024-02-29',
	'1 day', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{"a": 1}', '\x00ff', B'101', B'1',
	'(1,2)', '{x}', 'ok', 3, 0.5);
DELETE FROM typed;
SELECT outbox_attach('typed', 'sch', format => 'debezium', schemas_enable => true,
					 decimal_handling => 'string');
INSERT INTO typed (id, price) VALUES (2, 1);
\pset format unaligned
SELECT key, payload IS NULL AS tombstone, ev(payload) AS value FROM outbox_messages ORDER BY id;
\pset format aligned
DROP TABLE typed;
DROP TYPE mood;

--
-- Column defaults, as the connector has them.  It reads each column's
-- default (pg_attrdef's text, as the JDBC driver's getColumns gives it)
-- into the column's field schema, the key's columns too
-- (debezium-connector-common .../relational/TableSchemaBuilder.java
-- 166-170 and 411-438, at debezium aad5519), parsed by
-- debezium-connector-postgres .../connection/PostgresDefaultValueConverter.java
-- 157-196: a literal of the column's type ('new'::text, '-1'::integer,
-- 12.5; for text, the first quoted literal, lines 47 and 211-222); a
-- function call, nextval included, or CURRENT_DATE, CURRENT_TIME,
-- CURRENT_TIMESTAMP (lines 48-50 and 224-232), the type's placeholder:
-- 0, "", false, "{}", the zero UUID, 1970-01-01, midnight, a zero
-- interval (pgjdbc's PGInterval of "epoch"); each then written by the
-- column's converter as a value (lines 122-144: a decimal at the
-- column's scale).  No default for a type without a mapper (arrays,
-- bytea, money, timetz: line 207), a decimal without a scale (a struct,
-- lines 108-112), a literal that does not parse ((1 + 1), lines 115-118).
-- Kafka's JsonConverter writes a field's default for its null
-- (connect/json/.../JsonConverter.java 583-588, at apache/kafka 1eb7644;
-- replace.null.with.default, true by default, JsonConverterConfig.java
-- 49-50; JsonConverterTest.java serializeFieldNullToDefault, 937-945): a
-- null inserted, and the columns outside the identity in a delete's
-- before (REPLICA IDENTITY DEFAULT).  With replace_null_with_default =>
-- false, the null; but a NOT NULL column's null in a delete's before is
-- its default whatever the option, the connector's converter gives it
-- (debezium-connector-common .../jdbc/JdbcValueConverters.java 1520-1527).
-- The values do not depend on the session's DateStyle and TimeZone
-- (pg_regress's here: Postgres, MDY and PST8PDT): the connector's JDBC
-- session reads the defaults in ISO.
--
CREATE TYPE shade AS ENUM ('red', 'green');
CREATE TABLE defaults (
	id		serial PRIMARY KEY,				-- nextval(...): 0
	status	text DEFAULT 'new',				-- "new"
	quoted	text DEFAULT 'it''s',			-- "it's"
	word	varchar(20) DEFAULT 'NULL',		-- "NULL" (PostgresDefaultValueConverterIT.java dvc2, 341)
	code	char(3) DEFAULT 'ab',			-- "ab": the literal, unpadded
	joined	text DEFAULT 'a' || 'b',		-- "a": the first quoted literal
	qty		integer DEFAULT 7,
	neg		integer DEFAULT -1,				-- '-1'::integer
	small	smallint DEFAULT 3,
	big		bigint DEFAULT 9007199254740993,
	price	numeric(10,2) DEFAULT 12.5,		-- 12.50: "BOI=" (1250)
	ratio	double precision DEFAULT 1.5,
	f4		real DEFAULT 0.1,
	ok		boolean DEFAULT true,
	uid		uuid DEFAULT 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11',
	doc		jsonb DEFAULT '{"a":1}',		-- jsonb's text: "{\"a\": 1}"
	born	date DEFAULT '2024-02-29',		-- 19782
	at		timestamp DEFAULT '2024-02-29 07:44:15.123456',	-- 1709192655123456
	at_tz	timestamptz DEFAULT '2024-02-29 07:44:15.5+00',	-- "2024-02-29T07:44:15.500000Z"
	t		time DEFAULT '12:30:00',		-- 45000000000
	span	interval DEFAULT '1 day',		-- 86400000000
	hue		shade DEFAULT 'green',
	kind	text NOT NULL DEFAULT 'plain',
	-- function calls, CURRENT_*: the type's placeholder
	made	timestamp DEFAULT now(),		-- 0 (the IT's dt1, 346)
	made_tz	timestamptz DEFAULT now(),		-- "1970-01-01T00:00:00.000000Z"
	today	date DEFAULT CURRENT_DATE,		-- 0 (dt2, 347)
	clock	time DEFAULT CURRENT_TIME,		-- 0 (dt3, 348)
	token	uuid DEFAULT gen_random_uuid(),	-- the zero UUID (the IT, 127)
	shout	text DEFAULT upper('x'),		-- ""
	coin	boolean DEFAULT random() > 0.5,	-- false
	cnt		numeric(6,2) DEFAULT round(random()::numeric, 2),	-- 0.00: "AA=="
	meta	jsonb DEFAULT jsonb_build_object('k', 1),	-- "{}"
	wait	interval DEFAULT make_interval(days => 1),	-- 0
	-- no default
	free	numeric DEFAULT 1.5,
	tags	text[] DEFAULT '{a}',
	raw		bytea DEFAULT '\x00',
	cash	money DEFAULT 1,
	tt		timetz DEFAULT CURRENT_TIME,
	sum2	integer DEFAULT (1 + 1),
	note	text
);
CREATE FUNCTION before_text(payload bytea) RETURNS text LANGUAGE sql AS $$
	SELECT substring(convert_from(payload, 'UTF8') FROM '^\{"before":(.*),"after":')
$$;
SELECT outbox_attach('defaults', 'dflt', format => 'debezium');
TRUNCATE outbox_log, outbox_retries, outbox_ledger, outbox_event_ids;
INSERT INTO defaults SELECT * FROM jsonb_populate_record(NULL::defaults, '{"id": 1, "kind": "x"}');
DELETE FROM defaults;
SELECT outbox_attach('defaults', 'dflt', format => 'debezium', replace_null_with_default => false);
INSERT INTO defaults SELECT * FROM jsonb_populate_record(NULL::defaults, '{"id": 2, "kind": "x"}');
DELETE FROM defaults;
\pset format unaligned
SELECT key, evj(payload) ->> 'op' AS op, before_text(payload) AS before, after_text(payload) AS after
  FROM outbox_messages WHERE payload IS NOT NULL ORDER BY id;
\pset format aligned
-- With schemas_enable, each field's schema carries its default, after its
-- parameters (Kafka's JsonConverter.java 442-443 in asJsonSchema), the
-- key's too (TableSchemaBuilder.java 166-170); as the connector's tests
-- have them: a serial column's default 0 (RecordsStreamProducerIT.java
-- 3463), CURRENT_TIMESTAMP, CURRENT_DATE and CURRENT_TIME 0
-- (PostgresDefaultValueConverterIT.java 346-348), a function's uuid the
-- zero UUID (line 127), a decimal's at the column's scale (161-167).
SELECT outbox_attach('defaults', 'dflt', format => 'debezium', schemas_enable => true);
TRUNCATE outbox_log, outbox_retries, outbox_ledger, outbox_event_ids;
INSERT INTO defaults (id, kind) VALUES (3, 'x');
\pset format unaligned
SELECT key, substring(convert_from(payload, 'UTF8') FROM
		'^\{"schema":\{"type":"struct","fields":\[(\{"type":"struct","fields":\[.*?\],"optional":true,"name":"dflt\.public\.defaults\.Value","field":"before"\})')
		AS value_schema
  FROM outbox_messages;
\pset format aligned
-- A default changed applies from the next change: the connector reads
-- the defaults again at the relation message that pgoutput sends after
-- the DDL (debezium-connector-postgres .../pgoutput/PgOutputMessageDecoder.java
-- 324-351 and 413-414).
ALTER TABLE defaults ALTER status SET DEFAULT 'open';
TRUNCATE outbox_log, outbox_retries, outbox_ledger, outbox_event_ids;
INSERT INTO defaults SELECT * FROM jsonb_populate_record(NULL::defaults, '{"id": 4, "kind": "x"}');
SELECT evj(payload) #>> '{payload,after,status}' AS status FROM outbox_messages;
DROP TABLE defaults;
DROP TYPE shade;
DROP FUNCTION before_text(bytea);
-- A literal that does not parse as the column's type has no default, as
-- the connector's parser throws (PostgresDefaultValueConverter.java
-- 115-119): the first literal of ('x' || 'y')::date is not a date; read,
-- never run.  NULL::integer has none (parseNullDefault, 146-155).  A
-- decimal in string mode is at the column's scale (122-144); an enum's
-- type named in quotes is the enum's (extractEnumDefault, 234-276).
CREATE TYPE "Mood" AS ENUM ('ok', 'bad');
CREATE TABLE odd_defaults (id int PRIMARY KEY, d date DEFAULT ('x' || 'y')::date,
	price numeric(10,2) DEFAULT 12.5, m "Mood" DEFAULT 'bad', n int DEFAULT NULL);
SELECT outbox_attach('odd_defaults', 'odd', format => 'debezium', decimal_handling => 'string');
TRUNCATE outbox_log, outbox_retries, outbox_ledger, outbox_event_ids;
INSERT INTO odd_defaults VALUES (1, NULL, NULL, NULL, NULL);
-- a label renamed is the default's from the next change
ALTER TYPE "Mood" RENAME VALUE 'bad' TO 'worse';
INSERT INTO odd_defaults VALUES (2, NULL, NULL, NULL, NULL);
SELECT after_text(payload) AS after FROM outbox_messages ORDER BY id;
DROP TABLE odd_defaults;
DROP TYPE "Mood";
-- The defaults are the same whichever session reads them first: its
-- quote_all_identifiers, standard_conforming_strings and search_path
-- change the text of a default (nextval's call, a backslash, a function's
-- schema), not the key nor the schema written.
CREATE SCHEMA "Ids";
CREATE FUNCTION "Ids".next_id() RETURNS int LANGUAGE sql AS 'SELECT 7';
CREATE TABLE first_reader (id serial PRIMARY KEY, other int DEFAULT "Ids".next_id(),
	path text DEFAULT 'a\b');
SELECT outbox_attach('first_reader', 'first', format => 'debezium', schemas_enable => true);
TRUNCATE outbox_log, outbox_retries, outbox_ledger, outbox_event_ids;
\c -
SET quote_all_identifiers = on;
SET standard_conforming_strings = off;
SET search_path = "Ids", public;
INSERT INTO public.first_reader (id) VALUES (1);
\c -
INSERT INTO first_reader (id) VALUES (2);
-- a schema renamed is the default's from the next change: ids.next_id()
-- is a function call, 0
ALTER SCHEMA "Ids" RENAME TO ids;
INSERT INTO first_reader (id) VALUES (3);
SELECT m.key, d.defaults
  FROM outbox_messages m,
	   LATERAL (SELECT jsonb_object_agg(f ->> 'field', f -> 'default') AS defaults
				  FROM jsonb_array_elements(evj(m.payload) #> '{schema,fields,1,fields}') f
				 WHERE f ? 'default') d
 ORDER BY m.id;
DROP TABLE first_reader;
DROP SCHEMA ids CASCADE;

--
-- An enum array's items are the connector's Enum, required: the
-- connector builds SchemaBuilder.array(Enum.builder(...)) without
-- optional() (debezium-connector-postgres .../PostgresValueConverter.java
-- 398-401; RecordsStreamProducerIT.java shouldStreamEnumArrayAsKnownType,
-- 3464-3469, and a text array's items optional, 294-307).  A null element
-- has no value then: the JsonConverter stops on a null for a required
-- schema without default (JsonConverter.java 589-591), with
-- schemas.enable or not; the change fails.
--
CREATE TYPE tint AS ENUM ('sad', 'ok', 'happy');
CREATE TABLE tinted (id int PRIMARY KEY, moods tint[], tags text[]);
SELECT outbox_attach('tinted', 'enm', format => 'debezium', schemas_enable => true);
TRUNCATE outbox_log, outbox_retries, outbox_ledger, outbox_event_ids;
INSERT INTO tinted VALUES (1, '{ok,sad}', '{x,NULL}');
\pset format unaligned
SELECT substring(convert_from(payload, 'UTF8') FROM
		'^\{"schema":\{"type":"struct","fields":\[\{"type":"struct","fields":\[(.*?)\],"optional":true,"name":"enm\.public\.tinted\.Value","field":"before"\}')
		AS fields,
	   after_text(payload) AS after
  FROM outbox_messages;
\pset format aligned
\set VERBOSITY sqlstate
INSERT INTO tinted VALUES (2, '{ok,NULL}', NULL);
SELECT outbox_attach('tinted', 'enm', format => 'debezium');
INSERT INTO tinted VALUES (3, '{ok,NULL}', NULL);
\set VERBOSITY default
SELECT count(*) AS stored FROM outbox_messages;
DROP TABLE tinted;
DROP TYPE tint;

--
-- tsvector, ltree and ltree[] are the connector's named strings, version
-- 1: io.debezium.data.Tsvector (PostgresValueConverter.java 284-285;
-- debezium-connector-common .../data/TsVector.java 17-28), and
-- io.debezium.data.Ltree (PostgresValueConverter.java 366-367, 387-388,
-- its array's items optional; .../postgresql/data/Ltree.java 20-21,
-- PostgresSchemaFactory.java 71-75).  The values are the connector's
-- fixtures: TsVectorDataTypeIT.java 43 and 68-69;
-- AbstractRecordsProducerTest.java INSERT_CUSTOM_TYPES_STMT, 217-218, and
-- schemasAndValuesForCustomTypes, 993-999.
--
CREATE EXTENSION ltree;
CREATE TABLE texty (id int PRIMARY KEY, search_vector tsvector, lt ltree, lt_array ltree[]);
SELECT outbox_attach('texty', 'txt', format => 'debezium', schemas_enable => true);
TRUNCATE outbox_log, outbox_retries, outbox_ledger, outbox_event_ids;
INSERT INTO texty VALUES (1, to_tsvector('english', 'This is a test for direct tsvector insert'),
	'Top.Collections.Pictures.Astronomy.Galaxies', '{"Ship.Frigate","Ship.Destroyer"}');
\pset format unaligned
SELECT substring(convert_from(payload, 'UTF8') FROM
		'^\{"schema":\{"type":"struct","fields":\[\{"type":"struct","fields":\[(.*?)\],"optional":true,"name":"txt\.public\.texty\.Value","field":"before"\}')
		AS fields,
	   after_text(payload) AS after
  FROM outbox_messages;
\pset format aligned
DROP TABLE texty;
DROP EXTENSION ltree;

-- source: the changing transaction's id (32 bits, as the connector says
-- it), the time it started; the WAL position grows; ts_us and ts_ns agree
TRUNCATE outbox_log, outbox_retries, outbox_ledger, outbox_event_ids;
BEGIN;
INSERT INTO items (shop, id) VALUES ('west', 1);
UPDATE items SET qty = 1 WHERE shop = 'west';
SELECT txid_current() % 4294967296 AS xid,
	   floor(extract(epoch FROM now()) * 1000)::bigint AS started_ms \gset
COMMIT;
SELECT count(*) AS events,
	   bool_and((v #>> '{source,txId}')::bigint = :xid) AS same_txid,
	   bool_and((v #>> '{source,ts_ms}')::bigint = :started_ms) AS ts_ms_is_start,
	   bool_and((v #>> '{source,ts_us}')::bigint / 1000 = :started_ms) AS ts_us,
	   bool_and((v #>> '{source,ts_ns}')::numeric = (v #>> '{source,ts_us}')::numeric * 1000) AS ts_ns,
	   bool_and((v ->> 'ts_ms')::bigint BETWEEN :started_ms
				AND ceil(extract(epoch FROM clock_timestamp()) * 1000)::bigint) AS ts_ms_now,
	   bool_and((v #>> '{source,lsn}')::numeric > 0) AS has_lsn,
	   (array_agg((v #>> '{source,lsn}')::numeric ORDER BY id))[1]
		 < (array_agg((v #>> '{source,lsn}')::numeric ORDER BY id))[2] AS lsn_grows
  FROM (SELECT id, convert_from(payload, 'UTF8')::jsonb AS v FROM outbox_messages) m;

-- key columns named, no primary key: the key is theirs; none: no key
CREATE TABLE notes (author text NOT NULL, body text);
SELECT outbox_attach('notes', 'n', ARRAY['author'], 'debezium');
INSERT INTO notes VALUES ('ann', 'hi');
CREATE TABLE loose (body text);
SELECT outbox_attach('loose', 'n', format => 'debezium', tombstones => true);
INSERT INTO loose VALUES ('x');
DELETE FROM loose;
SELECT topic, key, payload IS NULL AS tombstone, evj(payload) ->> 'op' AS op
  FROM outbox_messages WHERE topic LIKE 'n.%' ORDER BY id;

-- a name that Kafka refuses in a topic is written with "_" instead
CREATE TABLE "order lines" (id int PRIMARY KEY);
SELECT outbox_attach('"order lines"', 'shop1', format => 'debezium');
INSERT INTO "order lines" VALUES (1);
SELECT topic, evj(payload) -> 'source' ->> 'table' AS source_table
  FROM outbox_messages WHERE key = '{"id":1}' AND topic LIKE '%lines';

--
-- The outbox event router, with Debezium's defaults and the JSON converter
-- of its outbox example (schemas.enable=false): the key a JSON string, the
-- payload's text as a JSON string, a null payload the JSON null
--
CREATE TABLE outboxevent (
	id				uuid PRIMARY KEY,
	aggregatetype	varchar(255) NOT NULL,
	aggregateid		varchar(255) NOT NULL,
	type			varchar(255) NOT NULL,
	payload			jsonb,
	created			timestamp
);
SELECT outbox_attach_router('outboxevent', header_columns => '{type:eventType}',
							timestamp_column => 'created');
SELECT tgname, pg_get_triggerdef(oid) FROM pg_trigger
 WHERE tgrelid = 'outboxevent'::regclass ORDER BY tgname;
TRUNCATE outbox_log, outbox_retries, outbox_ledger, outbox_event_ids;
BEGIN;
INSERT INTO outboxevent VALUES
	('4d47e190-0402-4048-bc2c-89dd54343cdc', 'order', '1', 'OrderCreated',
	 '{"id": 1, "lineItems": [{"id": 1, "item": "Debezium in Action", "quantity": 2, "totalPrice": 39.98}], "note": null, "tags": [], "customerId": 123}',
	 '2019-05-03 13:31:34.484'),
	('5e58f2a1-0402-4048-bc2c-89dd54343cdc', 'customer', 'c7', 'CustomerCreated', '"just a string"', NULL),
	('6f69a3b2-0402-4048-bc2c-89dd54343cdc', 'customer', 'c7', 'CustomerDeleted', NULL, NULL);
DELETE FROM outboxevent;
COMMIT;
-- update and delete emit nothing
INSERT INTO outboxevent VALUES ('7a7ab4c3-0402-4048-bc2c-89dd54343cdc', 'order', '2', 'OrderPaid', '[1, 2]', NULL);
UPDATE outboxevent SET type = 'changed';
DELETE FROM outboxevent;
SELECT topic, key, headers, convert_from(payload, 'UTF8') AS value,
	   event_id::text = headers ->> 'id' AS event_id_is_id,
	   created_at = '2019-05-03 13:31:34.484+00' AS timestamp_of_column
  FROM outbox_messages ORDER BY id;
SELECT count(*) AS rows_left FROM outboxevent;

-- expanded: the document without white space; other columns, keys as strings
SELECT outbox_attach_router('outboxevent', expand_payload => true);
INSERT INTO outboxevent VALUES ('8b8bc5d4-0402-4048-bc2c-89dd54343cdc', 'order', '3', 'OrderShipped', '{"id": 3, "n": null}', NULL);
CREATE TABLE events (event_id text, kind text, ref int, body text, at timestamptz, v int);
SELECT outbox_attach_router('events', 'app-events', NULL, 'ref', 'event_id', 'body', 'at',
							'{kind:type,v:version}', true, key_converter => 'string');
INSERT INTO events VALUES ('9C9CD6E5-0402-4048-BC2C-89DD54343CDC', 'k', 42, '{ "keep": "order",  "a": [1, {"b": null}], "z": "say \"hi\"" }', '2024-01-01 00:00:00+00', NULL),
						  ('ad0de7f6-0402-4048-bc2c-89dd54343cdc', 'k', NULL, '{"not": json}', NULL, 2),
						  ('be0ef807-0402-4048-bc2c-89dd54343cdc', 'k', 7, ' {"leading": "space"}', NULL, 3);
SELECT topic, key, headers, convert_from(payload, 'UTF8') AS value,
	   event_id::text = lower(headers ->> 'id') AS event_id_is_id,
	   created_at = '2024-01-01 00:00:00+00' AS timestamp_given
  FROM outbox_messages WHERE id > (SELECT max(id) - 4 FROM outbox_messages) ORDER BY id;

-- an id that is no UUID, used twice: published twice, as Debezium does
INSERT INTO events VALUES ('nope', 'k', 1, '{}', NULL, NULL), ('nope', 'k', 1, '{}', NULL, NULL);
SELECT count(*) AS published_nope FROM outbox_messages WHERE headers ->> 'id' = 'nope';
-- a UUID id used again, the documentation's example published above (its
-- row deleted since, as the outbox pattern does): published again, as the
-- router copies the id to header id and checks nothing
-- (debezium-connect-plugins .../transforms/outbox/EventRouterDelegate.java
-- 152-161, at debezium aad5519)
INSERT INTO outboxevent VALUES ('4d47e190-0402-4048-bc2c-89dd54343cdc', 'order', '1', 'OrderCreated', '{"again": true}', NULL);
DELETE FROM outboxevent;
\pset format unaligned
SELECT topic, key, headers ->> 'id' AS id, convert_from(payload, 'UTF8') AS value
  FROM outbox_messages WHERE headers ->> 'id' = '4d47e190-0402-4048-bc2c-89dd54343cdc' ORDER BY id;
\pset format aligned
-- a null routing value: the insert fails
SELECT outbox_attach_router('events', 'app.${routedByValue}', 'kind', 'ref', 'event_id', 'body');
INSERT INTO events VALUES ('be1ef807-0402-4048-bc2c-89dd54343cdc', NULL, 1, '{}', NULL, NULL);
\echo :LAST_ERROR_SQLSTATE

--
-- Debezium's own records, byte for byte, with the converters of its outbox
-- example (debezium-examples outbox/docker-compose.yaml: JsonConverter for
-- keys and values, schemas.enable=false) unless an option says otherwise.
-- Each expected record names where it comes from:
--  [IT] debezium-connector-postgres/src/test/java/io/debezium/connector/
--       postgresql/OutboxEventRouterIT.java, its table and inserts
--  [JC] Kafka's connect/json/.../JsonConverter.java (a string is a JSON
--       string; a null value with an optional schema is null; no schema
--       and no value is a tombstone) and JsonConverterTest.stringToJson
--       ({"type":"string","optional":false} with schemas.enable=true)
--  [ER] debezium-core/.../transforms/outbox/EventRouterDelegate.java (the
--       value is the payload column, a tombstone for a null or blank one
--       only with route.tombstone.on.empty.payload=true)
--
CREATE TABLE outboxsmtit (
	id				uuid NOT NULL PRIMARY KEY,
	aggregatetype	varchar(255) NOT NULL,
	aggregateid		varchar(255) NOT NULL,
	type			varchar(255) NOT NULL,
	payload			jsonb
);
CREATE TABLE expected_records (test text, key text, value text);
SELECT outbox_attach_router('outboxsmtit', header_columns => '{type:eventType}');
SELECT max(id) AS last_before_debezium FROM outbox_log \gset
-- [IT] shouldConsumeRecordsFromInsert [JC]: key "10711fa5", value "{}"
INSERT INTO outboxsmtit VALUES ('59a42efd-b015-44a9-9dde-cb36d9002425', 'User', '10711fa5', 'UserCreated', '{}');
INSERT INTO expected_records VALUES ('OutboxEventRouterIT.shouldConsumeRecordsFromInsert', '"10711fa5"', '"{}"');
-- [IT] shouldSendEventTypeAsHeader [JC]: the payload's text as a JSON string
INSERT INTO outboxsmtit VALUES ('59a42efd-b015-44a9-9dde-cb36d9002426', 'User', '10711fa5', 'UserCreated', '{"email": "gh@mefi.in"}');
INSERT INTO expected_records VALUES ('OutboxEventRouterIT.shouldSendEventTypeAsHeader', '"10711fa5"', '"{\"email\": \"gh@mefi.in\"}"');
-- [IT] shouldNotProduceTombstoneEventForNullPayload [ER] [JC]: the 4 bytes null
INSERT INTO outboxsmtit VALUES ('a9d76f78-bda6-48d3-97ed-13a146163218', 'UserEmail', 'a9d76f78', 'UserUpdated', NULL);
INSERT INTO expected_records VALUES ('OutboxEventRouterIT.shouldNotProduceTombstoneEventForNullPayload', '"a9d76f78"', 'null');
-- [IT] shouldProduceTombstoneEventForNullPayload [ER] [JC]: a tombstone
SELECT outbox_attach_router('outboxsmtit', tombstone_on_empty_payload => true);
INSERT INTO outboxsmtit VALUES ('a9d76f78-bda6-48d3-97ed-13a146163219', 'UserEmail', 'a9d76f78', 'UserUpdated', NULL);
INSERT INTO expected_records VALUES ('OutboxEventRouterIT.shouldProduceTombstoneEventForNullPayload', '"a9d76f78"', NULL);
-- [IT] shouldProduceTombstoneEventForEmptyPayload [ER] [JC]: a varchar
-- payload, empty: a tombstone with the option, the JSON string "" without
ALTER TABLE outboxsmtit ALTER COLUMN payload SET DATA TYPE varchar(1000);
INSERT INTO outboxsmtit VALUES ('a9d76f78-bda6-48d3-97ed-13a14616321a', 'UserEmail', 'a9d76f78', 'UserUpdated', '');
INSERT INTO expected_records VALUES ('OutboxEventRouterIT.shouldProduceTombstoneEventForEmptyPayload', '"a9d76f78"', NULL);
SELECT outbox_attach_router('outboxsmtit');
INSERT INTO outboxsmtit VALUES ('a9d76f78-bda6-48d3-97ed-13a14616321b', 'UserEmail', 'a9d76f78', 'UserUpdated', '');
INSERT INTO expected_records VALUES ('OutboxEventRouterIT.shouldProduceTombstoneEventForEmptyPayload, without the option', '"a9d76f78"', '""');
-- [JC] stringToJson, schemas.enable=true: key and value in an envelope
SELECT outbox_attach_router('outboxsmtit', schemas_enable => true);
INSERT INTO outboxsmtit VALUES ('59a42efd-b015-44a9-9dde-cb36d9002427', 'User', '10711fa5', 'UserCreated', '{}');
INSERT INTO expected_records VALUES ('JsonConverterTest.stringToJson, schemas_enable',
	'{"schema":{"type":"string","optional":false},"payload":"10711fa5"}',
	'{"schema":{"type":"string","optional":true},"payload":"{}"}');
-- Kafka's StringConverter for keys: the text as it is
SELECT outbox_attach_router('outboxsmtit', key_converter => 'string');
INSERT INTO outboxsmtit VALUES ('59a42efd-b015-44a9-9dde-cb36d9002428', 'User', '10711fa5', 'UserCreated', '{}');
INSERT INTO expected_records VALUES ('StringConverter, key_converter => string', '10711fa5', '"{}"');
SELECT e.test, m.key = e.key AS key_equal, m.payload IS NOT DISTINCT FROM convert_to(e.value, 'UTF8') AS value_equal,
	   m.topic, m.headers
  FROM (SELECT row_number() OVER (ORDER BY id) AS n, * FROM outbox_messages WHERE id > :last_before_debezium) m
  JOIN (SELECT row_number() OVER () AS n, * FROM expected_records) e USING (n)
 ORDER BY n;
DROP TABLE outboxsmtit, expected_records;

--
-- The router under a hostile table owner, who needs no right on the
-- extension: each column it reads retyped, renamed or dropped, timestamps
-- Kafka cannot carry, JSON nested too deep.  Each insert fails with the
-- column, the table and the trigger named; nothing is published of it.
--
CREATE ROLE outbox_table_owner;
CREATE TABLE owned_events (id uuid PRIMARY KEY, aggregatetype text NOT NULL,
	aggregateid text, type text, payload jsonb, ts timestamptz);
SELECT outbox_attach_router('owned_events', timestamp_column => 'ts', expand_payload => true);
ALTER TABLE owned_events OWNER TO outbox_table_owner;
CREATE DOMAIN owned_json AS jsonb CHECK (VALUE IS NOT NULL);
SELECT max(id) AS last_before_owner FROM outbox_log \gset
SET ROLE outbox_table_owner;
ALTER TABLE owned_events ALTER COLUMN payload TYPE integer USING 1;
INSERT INTO owned_events VALUES (gen_random_uuid(), 'owned', '1', 't', 1, NULL);
ALTER TABLE owned_events ALTER COLUMN payload TYPE bigint;
INSERT INTO owned_events VALUES (gen_random_uuid(), 'owned', '1', 't', 1, NULL);
ALTER TABLE owned_events ALTER COLUMN payload TYPE jsonb[] USING NULL;
INSERT INTO owned_events VALUES (gen_random_uuid(), 'owned', '1', 't', '{"{}"}', NULL);
ALTER TABLE owned_events ALTER COLUMN payload TYPE text;
INSERT INTO owned_events VALUES (gen_random_uuid(), 'owned', '1', 't',
	repeat('[', 100000) || repeat(']', 100000), NULL);
\echo :LAST_ERROR_SQLSTATE
ALTER TABLE owned_events ALTER COLUMN payload TYPE owned_json USING payload::jsonb;
INSERT INTO owned_events VALUES (gen_random_uuid(), 'owned', '1', 't', '{"domain": 1}', NULL);
ALTER TABLE owned_events ALTER COLUMN ts TYPE text;
INSERT INTO owned_events VALUES (gen_random_uuid(), 'owned', '1', 't', '{}', '2021-01-01');
ALTER TABLE owned_events ALTER COLUMN ts TYPE integer USING NULL;
INSERT INTO owned_events VALUES (gen_random_uuid(), 'owned', '1', 't', '{}', 1);
ALTER TABLE owned_events ALTER COLUMN ts TYPE timestamptz USING NULL;
INSERT INTO owned_events VALUES (gen_random_uuid(), 'owned', '1', 't', '{}', 'infinity');
INSERT INTO owned_events VALUES (gen_random_uuid(), 'owned', '1', 't', '{}', '-infinity');
INSERT INTO owned_events VALUES (gen_random_uuid(), 'owned', '1', 't', '{}', '1900-01-01 00:00:00+00');
INSERT INTO owned_events VALUES (gen_random_uuid(), 'owned', '1', 't', '{}', '1969-12-31 23:59:59.999+00');
INSERT INTO owned_events VALUES (gen_random_uuid(), 'owned', '1', 't', '{}', '3000-01-01 00:00:00+00');
\echo :LAST_ERROR_SQLSTATE
ALTER TABLE owned_events ALTER COLUMN ts TYPE timestamp;
INSERT INTO owned_events VALUES (gen_random_uuid(), 'owned', '1', 't', '{}', '1969-12-31 23:59:59');
INSERT INTO owned_events VALUES (gen_random_uuid(), 'owned', '1', 't', '{"at": 0}', '1970-01-01 00:00:00');
ALTER TABLE owned_events ALTER COLUMN aggregatetype TYPE integer[] USING '{1}';
INSERT INTO owned_events VALUES (gen_random_uuid(), '{1, 2}', '1', 't', '{}', NULL);
\echo :LAST_ERROR_SQLSTATE
ALTER TABLE owned_events ALTER COLUMN aggregatetype TYPE integer USING 7,
	ALTER COLUMN aggregateid TYPE bytea USING '\x01', ALTER COLUMN type TYPE point USING '(1,2)';
INSERT INTO owned_events VALUES (gen_random_uuid(), 7, '\x01', '(1,2)', '{"retyped": 1}', NULL);
ALTER TABLE owned_events RENAME COLUMN payload TO body;
INSERT INTO owned_events VALUES (gen_random_uuid(), 7, '\x01', '(1,2)', '{}', NULL);
ALTER TABLE owned_events RENAME COLUMN body TO payload;
ALTER TABLE owned_events DROP COLUMN ts;
INSERT INTO owned_events VALUES (gen_random_uuid(), 7, '\x01', '(1,2)', '{}');
RESET ROLE;
-- what was published: the inserts whose columns the router could read
SELECT topic, key, convert_from(payload, 'UTF8') AS value,
	   extract(epoch FROM created_at) = 0 AS at_epoch
  FROM outbox_messages WHERE id > :last_before_owner ORDER BY id;
-- the change events of a table whose owner retypes its columns, its key
-- too, then drops the key column: the events follow the row's types; the
-- change without its key column fails (42703), naming the table
CREATE TABLE owned_changes (id int PRIMARY KEY, v text, t timestamptz);
SELECT outbox_attach('owned_changes', 'owned', ARRAY['id'], 'debezium');
ALTER TABLE owned_changes OWNER TO outbox_table_owner;
SELECT max(id) AS last_before_changes FROM outbox_log \gset
SET ROLE outbox_table_owner;
INSERT INTO owned_changes VALUES (1, 'a', '2024-01-01 00:00:00+00');
ALTER TABLE owned_changes ALTER COLUMN id TYPE text, ALTER COLUMN v TYPE integer USING 1,
	ALTER COLUMN t TYPE point USING '(1,2)';
INSERT INTO owned_changes VALUES ('2', 2, '(3,4)');
UPDATE owned_changes SET v = 3;
ALTER TABLE owned_changes ALTER COLUMN v TYPE bigint[] USING ARRAY[v], ALTER COLUMN t TYPE bytea USING 'x';
DELETE FROM owned_changes;
ALTER TABLE owned_changes DROP COLUMN id;
INSERT INTO owned_changes VALUES ('{4}', 'y');
RESET ROLE;
SELECT topic, key, payload IS NOT NULL AS has_value
  FROM outbox_messages WHERE id > :last_before_changes ORDER BY id;
DROP TABLE owned_events, owned_changes;
DROP DOMAIN owned_json;
DROP ROLE outbox_table_owner;

--
-- Snapshot requests (the worker, which takes them, is off here)
--
CREATE TABLE stock (sku int PRIMARY KEY, n int);
INSERT INTO stock SELECT i, i FROM generate_series(1, 50) i;
ANALYZE stock;
SELECT outbox_attach('stock', 'inv', format => 'debezium', snapshot => true);
SELECT "table", rows_done, rows_estimated, started IS NOT NULL AS started, finished, format, topic, last_error
  FROM outbox_snapshots;
-- attached again the same way without snapshot: it goes on
SELECT outbox_attach('stock', 'inv', format => 'debezium');
SELECT count(*) AS snapshots FROM outbox_snapshots;
-- attached another way: cancelled
SELECT outbox_attach('stock', 'inv2', format => 'debezium');
SELECT count(*) AS snapshots FROM outbox_snapshots;
-- the outbox format too; detach cancels
SELECT outbox_attach('stock', 'inv', snapshot => true);
SELECT "table", format, topic FROM outbox_snapshots;
SELECT outbox_detach('stock');
SELECT count(*) AS snapshots FROM outbox_snapshots;
SELECT count(*) AS triggers FROM pg_trigger WHERE tgrelid = 'stock'::regclass;
-- detach drops the router's trigger too
SELECT outbox_detach('outboxevent');
SELECT count(*) AS triggers FROM pg_trigger WHERE tgrelid = 'outboxevent'::regclass;

--
-- Bad input
--
SELECT outbox_attach('stock', 'inv', format => 'avro');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_attach('stock', 'inv', format => NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_attach('stock', 'inv', tombstones => true);
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_attach('stock', 'inv', ARRAY['nope'], 'debezium');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_attach('stock', 'in/v', format => 'debezium');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_attach('loose', 'n', format => 'debezium', snapshot => true);
\echo :LAST_ERROR_SQLSTATE
CREATE TABLE nullable_key (k int, v text);
SELECT outbox_attach('nullable_key', 'n', ARRAY['k'], 'debezium', true);
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_attach_router('outboxevent');
SELECT outbox_attach('outboxevent', 'x', snapshot => true);
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_attach('outboxevent', 'x', format => 'debezium');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_attach('stock', 'inv');
SELECT outbox_attach_router('stock');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_attach_router('outboxevent', 'events');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_attach_router('outboxevent', 'events.${routedByValue}', route_by => NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_attach_router('outboxevent', 'bad topic.${routedByValue}');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_attach_router('outboxevent', route_by => 'nope');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_attach_router('outboxevent', key_column => 'nope');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_attach_router('outboxevent', id_column => 'nope');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_attach_router('outboxevent', payload_column => 'nope');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_attach_router('outboxevent', timestamp_column => 'nope');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_attach_router('outboxevent', header_columns => '{nope:x}');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_attach_router('outboxevent', payload_column => 'created');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_attach_router('outboxevent', timestamp_column => 'type');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_attach_router('outboxevent', header_columns => '{type}');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_attach_router('outboxevent', header_columns => '{type:id}');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_attach_router('outboxevent', header_columns => '{type:t,aggregateid:t}');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_attach_router('outboxevent', id_column => NULL);
\echo :LAST_ERROR_SQLSTATE
-- the AvroConverter: the JSON converter's settings refused, a stored key's
-- header reserved
SELECT outbox_attach_router('outboxevent', converter => 'protobuf');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_attach_router('outboxevent', converter => 'avro', schemas_enable => true);
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_attach_router('outboxevent', converter => 'avro', expand_payload => true);
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_attach_router('outboxevent', header_columns => '{type:outbox.key_base64}');
\echo :LAST_ERROR_SQLSTATE
CREATE VIEW outbox_view AS SELECT * FROM outboxevent;
SELECT outbox_attach_router('outbox_view');
\echo :LAST_ERROR_SQLSTATE
-- a snapshot publishes what the table holds: it needs the right to read it
CREATE ROLE outbox_trigger_only;
GRANT TRIGGER ON stock TO outbox_trigger_only;
GRANT EXECUTE ON FUNCTION outbox_attach(regclass, text, text[], text, boolean, boolean, text, text, boolean, text, boolean),
	outbox_capture() TO outbox_trigger_only;
SET ROLE outbox_trigger_only;
SELECT outbox_attach('stock', 'inv', format => 'debezium', snapshot => true);
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
DROP OWNED BY outbox_trigger_only;
DROP ROLE outbox_trigger_only;
-- hand-made triggers: what firing them says
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
SELECT fire('BEFORE INSERT ON wrong FOR EACH ROW EXECUTE FUNCTION outbox_router(''topic=t'', ''id=id'', ''payload=id'')') AS before_row;
SELECT fire('AFTER INSERT ON wrong FOR EACH ROW EXECUTE FUNCTION outbox_router(''topic=t'')') AS no_id;
SELECT fire('AFTER INSERT ON wrong FOR EACH ROW EXECUTE FUNCTION outbox_router(''nonsense'')') AS bad_argument;
SELECT fire('AFTER INSERT ON wrong FOR EACH ROW EXECUTE FUNCTION outbox_capture(''format=debezium'')') AS no_topic;
SELECT fire('AFTER INSERT ON wrong FOR EACH ROW EXECUTE FUNCTION outbox_capture(''format=csv'', ''topic=t'')') AS bad_format;
SELECT outbox_router();
\echo :LAST_ERROR_SQLSTATE

DROP TABLE items, notes, loose, "order lines", outboxevent, events, stock, nullable_key, wrong,
	amounts, docs CASCADE;
DROP FUNCTION after_text(bytea);
DROP FUNCTION fire(text);

--
-- outbox_attach as 1.1 declares it (three arguments), served by this
-- library, and its triggers after the update to 1.2; at 1.2 (six
-- arguments), the debezium format as 1.2 wrote it (decimals as strings,
-- whole rows, truncates, tombstones when asked), which its triggers keep
-- after the update to 1.3
--
SELECT outbox_discard() >= 0 AS discarded;
DROP EXTENSION outbox;
CREATE EXTENSION outbox VERSION '1.1';
SELECT pg_get_function_arguments('outbox_attach'::regproc) AS arguments_at_1_1;
CREATE TABLE kept (id int PRIMARY KEY, v text);
SELECT outbox_attach('kept', 'kept.changes', ARRAY['v']);
SELECT outbox_attach('kept', 'kept.changes');
INSERT INTO kept VALUES (1, 'a');
SELECT topic, key, ev(payload) AS payload FROM outbox_messages;
ALTER EXTENSION outbox UPDATE TO '1.2';
SELECT pg_get_function_arguments('outbox_attach'::regproc) AS arguments_at_1_2;
UPDATE kept SET v = 'b';
SELECT topic, key, evj(payload) ->> 'op' AS op FROM outbox_messages ORDER BY id;
CREATE TABLE kept12 (id int PRIMARY KEY, price numeric(6,2), free numeric);
SELECT outbox_attach('kept12', 'k12', format => 'debezium');
SELECT pg_get_triggerdef(oid) FROM pg_trigger WHERE tgname = 'outbox_capture' AND tgrelid = 'kept12'::regclass;
CREATE FUNCTION at_1_2() RETURNS TABLE (op text, tombstone boolean, before jsonb, after jsonb)
LANGUAGE sql AS $$
	SELECT evj(payload) ->> 'op', payload IS NULL, evj(payload) -> 'before', evj(payload) -> 'after'
	  FROM outbox_messages WHERE topic = 'k12.public.kept12' ORDER BY id
$$;
TRUNCATE outbox_log, outbox_retries, outbox_ledger, outbox_event_ids;
INSERT INTO kept12 VALUES (1, 12.30, 1.50);
UPDATE kept12 SET free = 2;
DELETE FROM kept12;
TRUNCATE kept12;
SELECT * FROM at_1_2();
ALTER EXTENSION outbox UPDATE TO '1.3';
SELECT pg_get_function_arguments('outbox_attach'::regproc) AS arguments_at_1_3;
TRUNCATE outbox_log, outbox_retries, outbox_ledger, outbox_event_ids;
INSERT INTO kept12 VALUES (1, 12.30, 1.50);
UPDATE kept12 SET free = 2;
DELETE FROM kept12;
TRUNCATE kept12;
SELECT * FROM at_1_2();
-- attached again at 1.3: the connector's defaults
SELECT outbox_attach('kept12', 'k12', format => 'debezium');
TRUNCATE outbox_log, outbox_retries, outbox_ledger, outbox_event_ids;
INSERT INTO kept12 VALUES (1, 12.30, 1.50);
UPDATE kept12 SET free = 2;
DELETE FROM kept12;
TRUNCATE kept12;
SELECT * FROM at_1_2();
DROP TABLE kept12;
DROP FUNCTION at_1_2();
-- a table attached at 1.3 keeps what 1.3 wrote after the update to 1.4:
-- no defaults, a null as null; attached again, the connector's defaults
CREATE TABLE kept13 (id int PRIMARY KEY, status text DEFAULT 'new');
SELECT outbox_attach('kept13', 'k13', format => 'debezium', schemas_enable => true);
ALTER EXTENSION outbox UPDATE;
TRUNCATE outbox_log, outbox_retries, outbox_ledger, outbox_event_ids;
INSERT INTO kept13 VALUES (1, NULL);
SELECT outbox_attach('kept13', 'k13', format => 'debezium', schemas_enable => true);
INSERT INTO kept13 VALUES (2, NULL);
SELECT evj(payload) #> '{payload,after}' AS after,
	   evj(payload) #> '{schema,fields,0,fields,1}' AS status_schema
  FROM outbox_messages ORDER BY id;
DROP TABLE kept13;
SELECT outbox_detach('kept');
SELECT count(*) AS triggers FROM pg_trigger WHERE tgrelid = 'kept'::regclass;
DROP TABLE kept;
DROP FUNCTION ev(bytea), evj(bytea);
