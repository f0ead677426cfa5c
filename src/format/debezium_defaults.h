/*-------------------------------------------------------------------------
 *
 * debezium_defaults.h
 *		The defaults of a table's columns as Debezium's PostgreSQL
 *		connector reads them, kept per session by table.
 *
 * src/format/debezium_defaults.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef OUTBOX_DEBEZIUM_DEFAULTS_H
#define OUTBOX_DEBEZIUM_DEFAULTS_H

#include "access/tupdesc.h"

#include "format/debezium_json.h"

extern const DebeziumDefaults *outbox_debezium_defaults(Oid relid, TupleDesc tupdesc);

#endif							/* OUTBOX_DEBEZIUM_DEFAULTS_H */
