/* outbox--1.2--1.3.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION outbox UPDATE TO '1.3'" to load this file. \quit

--
-- A fresh install of 1.3 is outbox--1.2.sql followed by this script, as
-- pg_stat_statements builds its newest version: t/017_versions.pl proves
-- that it gives the schema of the chain from 1.0.
--
