--
-- Secret Kafka properties (passwords, private keys, client secrets) are
-- never stored where every role can read them: per database and per role
-- (pg_db_role_setting), in a function's SET clause (pg_proc.proconfig).
-- Each is refused with 22023, naming the property and never its value;
-- the server's configuration (postgresql.conf, ALTER SYSTEM) takes them,
-- and so does a superuser's session, which stores nothing.  A plain role
-- reads no secret from pg_settings, pg_db_role_setting or pg_proc.
--
LOAD 'outbox';
CREATE ROLE outbox_secrets_role;
CREATE ROLE outbox_secrets_plain;

-- per database, every secret the allow-list knows
ALTER DATABASE :"DBNAME" SET outbox.kafka_properties = 'client.id=app;sasl.password=Secret-1';
\echo :LAST_ERROR_SQLSTATE
\set VERBOSITY terse
ALTER DATABASE :"DBNAME" SET outbox.kafka_properties = 'sasl.oauthbearer.client.secret=Secret-2';
ALTER DATABASE :"DBNAME" SET outbox.kafka_properties = 'sasl.oauthbearer.config=principal=Secret-3';
ALTER DATABASE :"DBNAME" SET outbox.kafka_properties = 'ssl.key.password=Secret-4';
ALTER DATABASE :"DBNAME" SET outbox.kafka_properties = 'ssl.key.pem=Secret-5';
ALTER DATABASE :"DBNAME" SET outbox.kafka_properties = 'ssl.keystore.password=Secret-6';
-- however it is spelt
ALTER DATABASE :"DBNAME" SET outbox.kafka_properties = ' sasl.password = Secret-7 ;';
ALTER DATABASE :"DBNAME" SET outbox.kafka_properties TO 'client.id=a;;sasl.password=Secret-8';

-- per role, in every form
ALTER ROLE outbox_secrets_role SET outbox.kafka_properties = 'sasl.password=Secret-9';
ALTER ROLE outbox_secrets_role IN DATABASE :"DBNAME" SET outbox.kafka_properties = 'sasl.password=Secret-10';
ALTER ROLE ALL SET outbox.kafka_properties = 'sasl.password=Secret-11';
ALTER ROLE ALL IN DATABASE :"DBNAME" SET outbox.kafka_properties = 'sasl.password=Secret-12';
ALTER ROLE CURRENT_USER SET outbox.kafka_properties = 'sasl.password=Secret-13';

-- in a function's or a procedure's SET clause
CREATE FUNCTION outbox_secrets_f() RETURNS int LANGUAGE sql
	SET outbox.kafka_properties = 'sasl.password=Secret-14' AS 'SELECT 1';
CREATE PROCEDURE outbox_secrets_p() LANGUAGE sql
	SET outbox.kafka_properties = 'sasl.password=Secret-15' AS 'SELECT 1';
CREATE FUNCTION outbox_secrets_f() RETURNS int LANGUAGE sql AS 'SELECT 1';
ALTER FUNCTION outbox_secrets_f() SET outbox.kafka_properties = 'sasl.password=Secret-16';

-- a superuser's session may hold one (it is stored nowhere) ...
SET outbox.kafka_properties = 'client.id=session;sasl.password=Secret-17';
-- ... but may not store it with FROM CURRENT
ALTER DATABASE :"DBNAME" SET outbox.kafka_properties FROM CURRENT;
ALTER ROLE outbox_secrets_role SET outbox.kafka_properties FROM CURRENT;
ALTER FUNCTION outbox_secrets_f() SET outbox.kafka_properties FROM CURRENT;
\set VERBOSITY default

-- a plain role sees no outbox.kafka_properties, even where it holds one
SET ROLE outbox_secrets_plain;
SELECT count(*) AS shown FROM pg_settings WHERE name = 'outbox.kafka_properties';
SHOW outbox.kafka_properties;
SELECT current_setting('outbox.kafka_properties');
RESET ROLE;
RESET outbox.kafka_properties;

-- the server's configuration takes secrets: it is the OS user's to read
ALTER SYSTEM SET outbox.kafka_properties = 'client.id=app;sasl.username=app;sasl.password=Secret-18';
SELECT setting LIKE '%sasl.password=Secret-18' AS in_auto_conf
  FROM pg_file_settings WHERE name = 'outbox.kafka_properties';
SET ROLE outbox_secrets_plain;
SELECT setting FROM pg_file_settings WHERE name = 'outbox.kafka_properties';
RESET ROLE;
ALTER SYSTEM RESET outbox.kafka_properties;

-- what is no secret is stored as before, where a plain role reads it
ALTER DATABASE :"DBNAME" SET outbox.kafka_properties = 'client.id=per-database';
ALTER ROLE outbox_secrets_role SET outbox.kafka_properties = 'client.id=per-role';
ALTER FUNCTION outbox_secrets_f() SET outbox.kafka_properties = 'client.id=per-function';
SET ROLE outbox_secrets_plain;
SELECT s.setrole::regrole AS role, item
  FROM pg_db_role_setting s, unnest(s.setconfig) item
 WHERE (s.setdatabase = (SELECT oid FROM pg_database WHERE datname = current_database())
		OR s.setrole = 'outbox_secrets_role'::regrole)
   AND item LIKE 'outbox.kafka_properties=%'
 ORDER BY 1;
SELECT proconfig FROM pg_proc WHERE proname LIKE 'outbox_secrets_%';
-- and nothing refused was stored
SELECT count(*) AS secrets_stored
  FROM (SELECT unnest(setconfig) AS item FROM pg_db_role_setting
		UNION ALL
		SELECT unnest(proconfig) FROM pg_proc) s
 WHERE item LIKE '%Secret-%';
RESET ROLE;

ALTER DATABASE :"DBNAME" RESET outbox.kafka_properties;
DROP FUNCTION outbox_secrets_f();
DROP ROLE outbox_secrets_role;
DROP ROLE outbox_secrets_plain;
