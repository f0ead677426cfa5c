--
-- outbox.schema_registry_url: where backends and workers send requests,
-- so a superuser's alone, in every way a setting can be made; an http or
-- https URL without credentials (they go in the properties file, which no
-- other role can read).  What needs no registry of outbox_registry_check().
--
LOAD 'outbox';
CREATE ROLE outbox_registry_user CREATEDB;
GRANT CREATE ON SCHEMA public TO outbox_registry_user;
SET ROLE outbox_registry_user;
SET outbox.schema_registry_url = 'http://attacker.example:8081';
\echo :LAST_ERROR_SQLSTATE
ALTER ROLE outbox_registry_user SET outbox.schema_registry_url = 'http://attacker.example:8081';
\echo :LAST_ERROR_SQLSTATE
ALTER ROLE outbox_registry_user IN DATABASE :"DBNAME" SET outbox.schema_registry_url = 'http://attacker.example:8081';
\echo :LAST_ERROR_SQLSTATE
CREATE FUNCTION outbox_registry_f() RETURNS int LANGUAGE sql
  SET outbox.schema_registry_url = 'http://attacker.example:8081' AS 'SELECT 1';
\echo :LAST_ERROR_SQLSTATE
SELECT set_config('outbox.schema_registry_url', 'http://attacker.example:8081', false);
\echo :LAST_ERROR_SQLSTATE
-- the owner of a database
CREATE DATABASE outbox_registry_db;
ALTER DATABASE outbox_registry_db SET outbox.schema_registry_url = 'http://attacker.example:8081';
\echo :LAST_ERROR_SQLSTATE
SHOW outbox.schema_registry_url;
SELECT outbox_registry_check();
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
DROP DATABASE outbox_registry_db;
REVOKE CREATE ON SCHEMA public FROM outbox_registry_user;
DROP ROLE outbox_registry_user;

-- http or https, no credentials, no query, no white space
SET outbox.schema_registry_url = 'file:///etc/passwd';
\echo :LAST_ERROR_SQLSTATE
SET outbox.schema_registry_url = 'gopher://registry:8081';
\echo :LAST_ERROR_SQLSTATE
SET outbox.schema_registry_url = 'http://user:Secret-1@registry:8081';
\echo :LAST_ERROR_SQLSTATE
SET outbox.schema_registry_url = 'https://Secret-2@registry:8081/path';
\echo :LAST_ERROR_SQLSTATE
SET outbox.schema_registry_url = E'http://registry:8081\nHost: elsewhere';
\echo :LAST_ERROR_SQLSTATE
SET outbox.schema_registry_url = 'http://registry:8081/?at=a@b';
\echo :LAST_ERROR_SQLSTATE
SET outbox.schema_registry_url = 'http://registry:8081/base/@';
SHOW outbox.schema_registry_url;
SET outbox.schema_registry_url = 'HTTPS://registry.example:8081/';
SHOW outbox.schema_registry_url;

-- outbox_registry_check() with no registry set, and with one that does
-- not answer: 08006, naming the URL
\set VERBOSITY terse
RESET outbox.schema_registry_url;
SELECT outbox_registry_check();
SET outbox.schema_registry_url = 'http://127.0.0.1:1';
SELECT outbox_registry_check();
\set VERBOSITY default
RESET outbox.schema_registry_url;

-- credentials over plain http: a warning where they are set (the URL, the
-- file), at the first request of a process, and in outbox_health; never
-- the credentials themselves
COPY (SELECT 'client.id=registry-test' UNION ALL
	  SELECT 'schema.registry.basic.auth.user.info = outbox:Secret-3')
  TO PROGRAM 'cat > outbox_registry.properties';
SET outbox.kafka_properties_file = 'outbox_registry.properties';
SELECT status, detail FROM outbox_health WHERE signal = 'schema registry';
SET outbox.schema_registry_url = 'http://127.0.0.1:1';
SELECT status, detail FROM outbox_health WHERE signal = 'schema registry';
\set VERBOSITY terse
SELECT outbox_registry_check();
SELECT outbox_registry_check();
\set VERBOSITY default
SET outbox.schema_registry_url = 'https://127.0.0.1:1';
SELECT status, detail FROM outbox_health WHERE signal = 'schema registry';
RESET outbox.kafka_properties_file;
SET outbox.schema_registry_url = 'http://127.0.0.1:1';
SELECT status, detail FROM outbox_health WHERE signal = 'schema registry';
SET outbox.kafka_properties_file = 'outbox_registry.properties';
RESET outbox.schema_registry_url;
RESET outbox.kafka_properties_file;
COPY (SELECT WHERE false) TO PROGRAM 'rm -f outbox_registry.properties';
