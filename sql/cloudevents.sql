--
-- Format cloudevents at enqueue: the header content-type of a JSON
-- payload, headers that would contradict the format refused, a topic of
-- another format untouched, the settings read again after each change, by
-- every role that may enqueue.  What the worker adds is in
-- t/032_cloudevents.pl.
--
LOAD 'outbox';
CREATE EXTENSION IF NOT EXISTS outbox;
SET client_min_messages = notice;
TRUNCATE outbox_log, outbox_retries, outbox_ledger, outbox_event_ids;
ALTER SEQUENCE outbox_event_id_seq RESTART WITH 1;
UPDATE outbox_reader SET last_id = 0, running = '{}', draining = '{}';

-- the source is a URI reference
SELECT outbox_set_topic('ce.*', format => 'cloudevents', cloudevents_source => '');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_set_topic('ce.*', format => 'cloudevents', cloudevents_source => 'my shop');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_set_topic('ce.*', format => 'cloudevents', cloudevents_source => '/shop%2');
\echo :LAST_ERROR_SQLSTATE
-- by RFC 3986's grammar, not only its characters: brackets hold an IPv6
-- address (no zone), a port is digits, a relative reference's first
-- segment has no ":", a fragment no "#"
SELECT outbox_set_topic('ce.*', format => 'cloudevents', cloudevents_source => 'http://[::1');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_set_topic('ce.*', format => 'cloudevents', cloudevents_source => 'http://[1::2::3]/');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_set_topic('ce.*', format => 'cloudevents', cloudevents_source => 'http://[fe80::1%25eth0]/');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_set_topic('ce.*', format => 'cloudevents', cloudevents_source => 'http://[::1]x/');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_set_topic('ce.*', format => 'cloudevents', cloudevents_source => 'http://shop:80a/');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_set_topic('ce.*', format => 'cloudevents', cloudevents_source => '1shop:orders');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_set_topic('ce.*', format => 'cloudevents', cloudevents_source => '/orders#a#b');
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) FROM outbox_topics;
SELECT s AS source_taken
  FROM unnest(ARRAY['http://[::1]:8080/orders', 'http://[::ffff:192.0.2.1]/', 'http://[v1.x]/',
					'urn:uuid:a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'mailto:shop@example.com',
					'//shop.example/orders', 'orders/eu:1', '#orders']) AS s
 WHERE outbox_set_topic('ce.*', format => 'cloudevents', cloudevents_source => s) IS NOT NULL;
SELECT outbox_set_topic('ce.*', format => 'cloudevents',
						cloudevents_source => 'https://shop.example/orders?x=%20y#z');

-- a JSON payload gets content-type application/json; text and bytea
-- keep the one given, or have none; a tombstone is left alone
SELECT outbox_enqueue('ce.orders', '{"id": 1}'::jsonb, key => '1');
SELECT outbox_enqueue('ce.orders', 'plain'::text, headers => '{"content-type": "text/plain"}');
SELECT outbox_enqueue('ce.orders', '\x00ff'::bytea);
SELECT outbox_enqueue('ce.orders', NULL::jsonb, key => '1');
SELECT outbox_enqueue('ce.orders', '{"id": 2}'::jsonb,
					  headers => '{"ce_type": "com.example.order.paid", "ce_subject": "2", "traceparent": "t"}');
-- media types with parameters, quoted or not; attributes beyond ASCII
SELECT outbox_enqueue('ce.orders', 'x'::text,
					  headers => '{"content-type": "Text/Plain;charset=\"utf-8\"  ;  format=flowed", "ce_type": "com.example.commandé\u00a0✓"}');
SELECT outbox_enqueue('ce.orders', '\x00'::bytea,
					  headers => '{"content-type": "application/vnd.example+octet-stream; x=\"a \\\" b\""}');
-- another topic is untouched
SELECT outbox_enqueue('plain.orders', '{"id": 3}'::jsonb,
					  headers => '{"ce_id": "mine", "Content-Type": "text/x"}');
SELECT id, topic, key, headers FROM outbox_messages ORDER BY id;

-- headers the format makes, or that contradict it, are refused: nothing
-- is stored
SELECT outbox_enqueue('ce.orders', '{}'::jsonb, headers => '{"ce_id": "1"}');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_enqueue('ce.orders', '{}'::jsonb, headers => '{"ce_source": "/x"}');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_enqueue('ce.orders', 'x'::text, headers => '{"ce_specversion": "0.3"}');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_enqueue('ce.orders', 'x'::text, headers => '{"ce_time": "2020-01-01T00:00:00Z"}');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_enqueue('ce.orders', '{}'::jsonb, headers => '{"content-type": "application/json"}');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_enqueue('ce.orders', 'x'::text, headers => '{"Content-Type": "text/plain"}');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_enqueue('ce.orders', 'x'::text, headers => '{"content-type": "application/cloudevents+json"}');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_enqueue('ce.orders', 'x'::text, headers => '{"ce_datacontenttype": "text/plain"}');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_enqueue('ce.orders', 'x'::text, headers => '{"CE_TYPE": "t"}');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_enqueue('ce.orders', 'x'::text, headers => '{"ce_trace_id": "t"}');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_enqueue('ce.orders', 'x'::text, headers => '{"ce_type": ""}');
\echo :LAST_ERROR_SQLSTATE
-- attributes are CloudEvents Strings: no control character, C0 or C1,
-- no Unicode noncharacter
SELECT outbox_enqueue('ce.orders', 'x'::text, headers => '{"ce_type": "com.example.paid\nce_type: forged"}');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_enqueue('ce.orders', 'x'::text, headers => '{"ce_subject": "order\t42"}');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_enqueue('ce.orders', 'x'::text, headers => '{"ce_tenant": "t\u007f"}');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_enqueue('ce.orders', 'x'::text, headers => '{"ce_type": "com.example\u0085"}');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_enqueue('ce.orders', 'x'::text, headers => '{"ce_type": "com.example\ufdd0"}');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_enqueue('ce.orders', 'x'::text, headers => '{"ce_type": "com.example\uffff"}');
\echo :LAST_ERROR_SQLSTATE
-- content-type is a media type (RFC 7231): no white space around it, a
-- subtype, parameters name=value
SELECT outbox_enqueue('ce.orders', 'x'::text, headers => '{"content-type": " application/cloudevents+json"}');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_enqueue('ce.orders', 'x'::text, headers => '{"content-type": "\tapplication/cloudevents+json"}');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_enqueue('ce.orders', 'x'::text, headers => '{"content-type": "text/plain "}');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_enqueue('ce.orders', 'x'::text, headers => '{"content-type": "text"}');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_enqueue('ce.orders', 'x'::text, headers => '{"content-type": "text/plain;"}');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_enqueue('ce.orders', 'x'::text, headers => '{"content-type": "text/plain; charset"}');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_enqueue('ce.orders', 'x'::text, headers => '{"content-type": "text/plain; charset=\"utf-8"}');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_enqueue('ce.orders', 'x'::text, headers => '{"content-type": "text/plain; x=\"a\u0085\""}');
\echo :LAST_ERROR_SQLSTATE
-- which RFC 7231 allows a tab in, but not a CloudEvents String
SELECT outbox_enqueue('ce.orders', 'x'::text, headers => '{"content-type": "text/plain;\tcharset=utf-8"}');
\echo :LAST_ERROR_SQLSTATE
-- the transaction's headers too
BEGIN;
SET LOCAL outbox.headers = '{"ce_id": "1"}';
SELECT outbox_enqueue('ce.orders', 'x'::text);
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
-- the format's headers count against outbox.max_message_bytes
SET outbox.max_message_bytes = 300;
SELECT outbox_enqueue('plain.orders', repeat('x', 280));
SELECT outbox_enqueue('ce.orders', repeat('x', 280));
\echo :LAST_ERROR_SQLSTATE
RESET outbox.max_message_bytes;
SELECT count(*) FROM outbox_messages;

-- ce_partitionkey: the record's key is the event's partitionkey, and the
-- binding says the attribute MUST still be sent with the key mapped from
-- it (bindings/kafka-protocol-binding.md 153-174, at cloudevents/spec
-- c2845a4), as both SDKs' producers do (sdk-java's
-- PartitionKeyExtensionInterceptor.java 26-36 keys the record and keeps
-- the attribute; the JavaScript SDK's Kafka.binary writes ce_partitionkey
-- and the key).  Readers differ: sdk-java takes attributes from ce_
-- headers alone (kafka .../impl/KafkaBinaryMessageReaderImpl.java 45-53,
-- at sdk-java ecde1d4), the JavaScript SDK takes partitionkey from the
-- key.  So a ce_partitionkey given is taken when it is the key; another
-- one, or one without a key, would give the two a different partition
-- key, and is refused.
SELECT outbox_enqueue('ce.orders', 'x'::text, key => 'k', headers => '{"ce_partitionkey": "k"}') AS id \gset
SELECT key FROM outbox_messages WHERE id = :id;
\set VERBOSITY sqlstate
SELECT outbox_enqueue('ce.orders', 'x'::text, key => 'k', headers => '{"ce_partitionkey": "other"}');
SELECT outbox_enqueue('ce.orders', 'x'::text, headers => '{"ce_partitionkey": "k"}');
\set VERBOSITY default

-- dataschema is a URI, an absolute one (spec.md 239-241 and 422-431):
-- sdk-java's reader throws on a value java.net.URI does not parse, a
-- poison record for Java consumers (core .../v1/CloudEventBuilder.java
-- 172-178), and the JavaScript SDK's validation wants format "uri". The
-- attribute name data is reserved (spec.md 206-207).
\set VERBOSITY sqlstate
SELECT outbox_enqueue('ce.orders', 'x'::text, headers => '{"ce_dataschema": "not a uri"}');
SELECT outbox_enqueue('ce.orders', 'x'::text, headers => '{"ce_dataschema": "/schemas/order.json"}');
SELECT outbox_enqueue('ce.orders', 'x'::text, headers => '{"ce_data": "x"}');
\set VERBOSITY default
-- the key is the partitionkey, a CloudEvents String: not empty, no control
-- character; a dataschema's fragment makes no absolute URI
SELECT outbox_enqueue('ce.orders', 'x'::text, key => '');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_enqueue('ce.orders', 'x'::text, key => E'k\n');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_enqueue('ce.orders', 'x'::text, headers => '{"ce_dataschema": "https://shop.example/s.json#v1"}');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_enqueue('ce.orders', 'x'::text,
					  headers => '{"ce_dataschema": "https://shop.example/schemas/order.json"}') IS NOT NULL AS taken;
SELECT outbox_enqueue('ce.orders', 'x'::text, headers => '{"ce_dataschema": "urn:example:order:v1"}') IS NOT NULL AS taken;

-- the capture and router triggers' payloads are JSON
CREATE TABLE ce_rows (id int PRIMARY KEY);
SELECT outbox_attach('ce_rows', 'ce.rows');
INSERT INTO ce_rows VALUES (1);
SELECT topic, headers FROM outbox_messages WHERE topic = 'ce.rows';
SELECT outbox_detach('ce_rows');
DROP TABLE ce_rows;
-- but a router's bytea payload, its bytes as they are
CREATE TABLE ce_outbox (id uuid PRIMARY KEY, aggregatetype text, aggregateid text, payload jsonb);
CREATE TABLE ce_outbox_bytes (id uuid PRIMARY KEY, aggregatetype text, aggregateid text, payload bytea);
SELECT outbox_attach_router('ce_outbox', topic_pattern => 'ce.${routedByValue}');
SELECT outbox_attach_router('ce_outbox_bytes', topic_pattern => 'ce.${routedByValue}');
INSERT INTO ce_outbox VALUES ('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'order', '1', '{"id": 1}');
INSERT INTO ce_outbox_bytes VALUES ('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a12', 'blob', '2', '\x00ff');
INSERT INTO ce_outbox_bytes VALUES ('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a13', 'blob', '3', NULL);
SELECT topic, headers FROM outbox_messages WHERE topic IN ('ce.order', 'ce.blob') ORDER BY id;
DROP TABLE ce_outbox, ce_outbox_bytes;

-- a change of the settings is seen at once, in the transaction that
-- makes it, and not once it is rolled back
BEGIN;
SELECT outbox_reset_topic('ce.*');
SELECT outbox_enqueue('ce.orders', '{"id": 4}'::jsonb) AS id \gset
SELECT headers FROM outbox_messages WHERE id = :id;
ROLLBACK;
SELECT outbox_enqueue('ce.orders', '{"id": 5}'::jsonb) AS id \gset
SELECT headers FROM outbox_messages WHERE id = :id;
SELECT outbox_set_topic('ce.orders');
SELECT outbox_enqueue('ce.orders', '{"id": 6}'::jsonb) AS id \gset
SELECT headers FROM outbox_messages WHERE id = :id;
SELECT outbox_reset_topic('ce.orders');

-- a role that may enqueue, and may not read the settings of topics
CREATE ROLE outbox_ce_app;
GRANT EXECUTE ON FUNCTION outbox_enqueue(text, jsonb, text, jsonb, uuid) TO outbox_ce_app;
SET ROLE outbox_ce_app;
SELECT count(*) FROM outbox_topic_settings;
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_enqueue('ce.orders', '{"id": 7}'::jsonb) AS id \gset
SELECT outbox_enqueue('ce.orders', '{"id": 8}'::jsonb, headers => '{"ce_id": "1"}');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SELECT headers FROM outbox_messages WHERE id = :id;
REVOKE ALL ON FUNCTION outbox_enqueue(text, jsonb, text, jsonb, uuid) FROM outbox_ce_app;
DROP ROLE outbox_ce_app;

SELECT outbox_reset_topic('ce.*');
TRUNCATE outbox_log, outbox_retries, outbox_ledger, outbox_event_ids;
