--
-- The outbox.* settings: defaults, units, limits, the reserved prefix and
-- librdkafka's judgement of outbox.kafka_properties.
--
LOAD 'outbox';
SELECT name, boot_val AS default, unit, context, vartype, min_val, max_val
  FROM pg_settings WHERE name LIKE 'outbox.%' ORDER BY name;

-- shown with their units (what a server's configuration says aside)
SET outbox.poll_interval = 1000;
SHOW outbox.poll_interval;
SET outbox.retry_max_delay = 300000;
SHOW outbox.retry_max_delay;
RESET outbox.poll_interval;
RESET outbox.retry_max_delay;

-- the prefix is reserved: a typo is an error, not a silent placeholder
SET outbox.batchsize = 10;
\echo :LAST_ERROR_SQLSTATE

-- limits
SET outbox.max_message_bytes = 0;
\echo :LAST_ERROR_SQLSTATE
SET outbox.max_message_bytes = '2MB';
\echo :LAST_ERROR_SQLSTATE
-- publishing settings are the superuser's: per database with ALTER
-- DATABASE ... SET, never by another role
CREATE ROLE outbox_settings_user;
SET ROLE outbox_settings_user;
SET outbox.batch_size = 10;
\echo :LAST_ERROR_SQLSTATE
SET outbox.brokers = 'elsewhere:9092';
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
DROP ROLE outbox_settings_user;

-- only the properties known to be safe are taken, and librdkafka checks
-- each value, when the setting is made; no message shows a value
ALTER SYSTEM SET outbox.kafka_properties = 'no.such.property=1';
\echo :LAST_ERROR_SQLSTATE
ALTER SYSTEM SET outbox.kafka_properties = 'acks=sometimes';
\echo :LAST_ERROR_SQLSTATE
ALTER SYSTEM SET outbox.kafka_properties = 'linger.ms';
\echo :LAST_ERROR_SQLSTATE
ALTER SYSTEM SET outbox.kafka_properties = 'compression.type=sometimes';
\echo :LAST_ERROR_SQLSTATE
-- what the guarantees depend on cannot be switched off: 22023, naming the
-- property; nor can a command run, a library be loaded or a signal taken
ALTER SYSTEM SET outbox.kafka_properties = 'compression.type=lz4;enable.idempotence=false';
\echo :LAST_ERROR_SQLSTATE
ALTER SYSTEM SET outbox.kafka_properties = 'request.required.acks=1';
\echo :LAST_ERROR_SQLSTATE
ALTER SYSTEM SET outbox.kafka_properties = 'linger.ms=0';
\echo :LAST_ERROR_SQLSTATE
ALTER SYSTEM SET outbox.kafka_properties = 'batch.num.messages=1';
\echo :LAST_ERROR_SQLSTATE
ALTER SYSTEM SET outbox.kafka_properties = 'log.queue=false';
\echo :LAST_ERROR_SQLSTATE
ALTER SYSTEM SET outbox.kafka_properties = 'plugin.library.paths=/tmp/evil.so';
\echo :LAST_ERROR_SQLSTATE
ALTER SYSTEM SET outbox.kafka_properties = 'internal.termination.signal=15';
\echo :LAST_ERROR_SQLSTATE
ALTER SYSTEM SET outbox.kafka_properties = 'sasl.kerberos.kinit.cmd=/bin/true';
\echo :LAST_ERROR_SQLSTATE
ALTER SYSTEM SET outbox.kafka_properties = 'ssl.providers=legacy';
\echo :LAST_ERROR_SQLSTATE
ALTER SYSTEM SET outbox.kafka_properties = 'partitioner=random';
\echo :LAST_ERROR_SQLSTATE
ALTER SYSTEM SET outbox.kafka_properties = 'message.timeout.ms=1000';
\echo :LAST_ERROR_SQLSTATE
ALTER SYSTEM SET outbox.kafka_properties = 'message.max.bytes=2000';
\echo :LAST_ERROR_SQLSTATE
ALTER SYSTEM SET outbox.kafka_properties = 'metadata.broker.list=elsewhere:9092';
\echo :LAST_ERROR_SQLSTATE
ALTER SYSTEM SET outbox.kafka_properties = ' client.id = app-outbox ; compression.type=lz4;';
ALTER SYSTEM SET outbox.kafka_properties = 'client.id=app;sasl.username=app;sasl.password=pw';
ALTER SYSTEM RESET outbox.kafka_properties;
-- a secret is never stored in a catalog that every role can read
ALTER DATABASE :"DBNAME" SET outbox.kafka_properties = 'client.id=app;sasl.password=pw';
\echo :LAST_ERROR_SQLSTATE
CREATE FUNCTION outbox_settings_f() RETURNS int LANGUAGE sql
  SET outbox.kafka_properties = 'ssl.key.password=pw' AS 'SELECT 1';
\echo :LAST_ERROR_SQLSTATE
ALTER DATABASE :"DBNAME" SET outbox.kafka_properties = 'client.id=app';
ALTER DATABASE :"DBNAME" RESET outbox.kafka_properties;
ALTER SYSTEM SET outbox.brokers = ' ';
\echo :LAST_ERROR_SQLSTATE
ALTER SYSTEM SET outbox.retry_jitter = 1.5;
\echo :LAST_ERROR_SQLSTATE
-- standby slots: a list of slot names
ALTER SYSTEM SET outbox.standby_slots = 'standby1, "Standby-2"';
\echo :LAST_ERROR_SQLSTATE
ALTER SYSTEM SET outbox.standby_slots = 'standby1,';
\echo :LAST_ERROR_SQLSTATE
-- slot names are no identifiers: one with capitals is refused, not folded
-- into another slot's name
ALTER SYSTEM SET outbox.standby_slots = 'Standby1';
\echo :LAST_ERROR_SQLSTATE
ALTER SYSTEM SET outbox.standby_slots = 'standby1, standby2';
ALTER SYSTEM RESET outbox.standby_slots;

-- outbox.kafka_properties may hold secrets
CREATE ROLE outbox_reader;
SET ROLE outbox_reader;
SHOW outbox.kafka_properties;
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
DROP ROLE outbox_reader;
