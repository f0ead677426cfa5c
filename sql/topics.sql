--
-- The settings of topics: outbox_set_topic(), outbox_reset_topic(),
-- outbox_topic(), the view outbox_topics; who may set them, what they
-- refuse, and which pattern a topic takes.
--
CREATE EXTENSION IF NOT EXISTS outbox;
SET client_min_messages = notice;

-- arguments: a pattern is a topic, or the start of one and '*'
SELECT outbox_set_topic(NULL, 'kafka-b:9092');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_set_topic('', 'kafka-b:9092');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_set_topic('orders/eu', 'kafka-b:9092');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_set_topic('orders*eu', 'kafka-b:9092');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_set_topic('orders.**', 'kafka-b:9092');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_set_topic('..', 'kafka-b:9092');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_set_topic(repeat('t', 250), 'kafka-b:9092');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_set_topic('orders.*', '');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_set_topic('orders.*', properties_file => '');
\echo :LAST_ERROR_SQLSTATE
-- the file follows the checks of outbox.kafka_properties_file: one other
-- users can read is refused, one that does not exist yet is noted
SELECT outbox_set_topic('orders.*', properties_file => '/etc/passwd');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_set_topic('orders.*', properties_file => '/nonexistent/outbox/kafka.properties');
SELECT count(*) FROM outbox_topics;
-- what is not a regular file is refused without being read: a named pipe
-- (made in the data directory, where a relative path points) would keep
-- the reader waiting for a writer, a device may never end
COPY (SELECT WHERE false) TO PROGRAM 'rm -f outbox_topics.fifo && mkfifo -m 600 outbox_topics.fifo';
SELECT outbox_set_topic('orders.*', properties_file => 'outbox_topics.fifo');
\echo :LAST_ERROR_SQLSTATE
SET outbox.kafka_properties_file = 'outbox_topics.fifo';
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_set_topic('orders.*', properties_file => 'global');
\echo :LAST_ERROR_SQLSTATE
-- nor is a certificate, a key or a CA that is a named pipe: librdkafka
-- would open it in the worker
SET outbox.kafka_properties = 'ssl.ca.location=outbox_topics.fifo';
\echo :LAST_ERROR_SQLSTATE
SET outbox.kafka_properties = 'ssl.ca.location=global;ssl.key.location=nonexistent.pem';
RESET outbox.kafka_properties;
COPY (SELECT WHERE false) TO PROGRAM 'rm -f outbox_topics.fifo';
SELECT count(*) FROM outbox_topics;

-- the longest pattern that matches wins, a topic's own name first, and a
-- row is taken whole: NULL is the outbox.* setting
SELECT outbox_set_topic('*', 'kafka-all:9092');
SELECT outbox_set_topic('orders.*', 'kafka-orders:9092');
SELECT outbox_set_topic('orders.eu.*', 'kafka-eu:9092');
SELECT outbox_set_topic('orders.eu.audit');
SELECT outbox_set_topic('orders.eu.audit*', 'kafka-audit:9092');
SELECT outbox_set_topic('..*', 'kafka-dots:9092');
SELECT t AS topic, s.pattern,
	   CASE WHEN s.brokers = current_setting('outbox.brokers') THEN 'outbox.brokers' ELSE s.brokers END AS brokers,
	   s.properties_file = current_setting('outbox.kafka_properties_file') AS default_file
  FROM unnest(ARRAY['payments', 'orders', 'orders.', 'orders.us', 'orders.eu', 'orders.eu.1',
					'orders.eu.audit', 'orders.eu.audit2', 'orders.eu.auditx.y', '...x']) AS t,
	   outbox_topic(t) s;
SELECT pattern, brokers, properties_file FROM outbox_topics ORDER BY pattern;

-- setting a pattern again replaces its row; a reset removes it
SELECT outbox_set_topic('orders.*', 'kafka-orders2:9092');
SELECT pattern, brokers FROM outbox_topics WHERE pattern = 'orders.*';
SELECT outbox_reset_topic('orders.*');
SELECT outbox_reset_topic('orders.*');
SELECT pattern, brokers FROM outbox_topic('orders.us');
SELECT outbox_reset_topic('*');
SELECT pattern, brokers = current_setting('outbox.brokers') AS default_brokers
  FROM outbox_topic('payments');

-- a format's settings go with it, and with it only
SELECT outbox_set_topic('orders', format => 'protobuf');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_set_topic('orders', format => 'avro');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_set_topic('orders', value_schema => '"string"');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_set_topic('orders', format => 'cloudevents');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_set_topic('orders', format => 'cloudevents', cloudevents_source => '/shop',
						key_schema => '"string"');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_set_topic('orders', cloudevents_source => '/shop');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_set_topic('orders', format => 'cloudevents', cloudevents_source => '/shop');
SELECT pattern, format, value_schema_id, key_schema_id, cloudevents_source
  FROM outbox_topic('orders');
SELECT pattern, format, value_schema, key_schema, cloudevents_source FROM outbox_topics;
SELECT outbox_reset_topic('orders');

-- avro: the schemas parse as Avro, with well-formed logical types, and a
-- topic takes them, never a pattern; all checked before the registry is
-- asked, and with none set, nothing is registered
SELECT outbox_set_topic('orders', format => 'avro', value_schema => '{"type": "record", "fields": []}');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_set_topic('orders', format => 'avro', value_schema => '"long"',
						key_schema => '{"type": "enum", "name": "E"}');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_set_topic('orders', format => 'avro',
						value_schema => '{"type": "bytes", "logicalType": "decimal", "precision": 4, "scale": 5}');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_set_topic('orders', format => 'avro',
						value_schema => '{"type": "fixed", "name": "F", "size": 4, "logicalType": "decimal", "precision": "4"}');
\echo :LAST_ERROR_SQLSTATE
-- a decimal's precision is at most 1000 (the conversion of its digits is
-- quadratic in them)
SELECT outbox_set_topic('orders', format => 'avro',
						value_schema => '{"type": "bytes", "logicalType": "decimal", "precision": 1001, "scale": 2}');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_set_topic('orders.*', format => 'avro', value_schema => '"long"');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_set_topic('orders', format => 'avro', value_schema => '"long"');
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) FROM outbox_topics WHERE format = 'avro';

-- superusers only, even with EXECUTE
CREATE ROLE outbox_topics_user;
SET ROLE outbox_topics_user;
SELECT outbox_set_topic('payments', 'kafka-evil:9092');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
GRANT EXECUTE ON FUNCTION outbox_set_topic(text, text, text, text, jsonb, jsonb, text), outbox_reset_topic(text)
	TO outbox_topics_user;
SET ROLE outbox_topics_user;
SELECT outbox_set_topic('payments', 'kafka-evil:9092');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_reset_topic('orders.eu.*');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM outbox_topic_settings;
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
-- nor a member of the extension's owner, which may be no superuser: the
-- brokers are where the credentials of the properties go; the table is
-- the bootstrap superuser's, which the owner only reads
DO $$ BEGIN EXECUTE format('GRANT %s TO outbox_topics_user',
	(SELECT extowner::regrole FROM pg_extension WHERE extname = 'outbox')); END $$;
SET ROLE outbox_topics_user;
SELECT outbox_set_topic('payments', 'kafka-payments:9092');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SELECT c.relowner = 10 AS bootstrap_superuser_owns,
	   has_table_privilege(e.extowner, c.oid, 'SELECT') AS owner_reads
  FROM pg_class c, pg_extension e
 WHERE c.relname = 'outbox_topic_settings' AND e.extname = 'outbox';
DO $$ BEGIN EXECUTE format('REVOKE %s FROM outbox_topics_user',
	(SELECT extowner::regrole FROM pg_extension WHERE extname = 'outbox')); END $$;
SELECT pattern, brokers FROM outbox_topics ORDER BY pattern;

SELECT outbox_reset_topic(pattern) FROM outbox_topics;
REVOKE ALL ON FUNCTION outbox_set_topic(text, text, text, text, jsonb, jsonb, text), outbox_reset_topic(text)
	FROM outbox_topics_user;
DROP ROLE outbox_topics_user;
