/*-------------------------------------------------------------------------
 *
 * debezium.h
 *		The debezium format: the events of a row's change as Debezium's
 *		PostgreSQL connector writes them, and the key and value of an outbox
 *		table's row as its outbox event router writes them.
 *
 * src/format/debezium.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef OUTBOX_DEBEZIUM_H
#define OUTBOX_DEBEZIUM_H

#include "access/htup.h"
#include "catalog/pg_attribute.h"
#include "nodes/pg_list.h"

#include "base/catalog.h"
#include "format/change.h"

/*
 * How the router's converters write a row's key and value.
 */
typedef struct RouterOptions
{
	bool		expand;
	bool		key_json;		/* key_converter=json; 1.2: string */
	bool		schemas;		/* schemas_enable=true; 1.2: false */
	bool		null_tombstone; /* a null payload is a tombstone; 1.2: true */
	bool		blank_tombstone;	/* so is an empty or blank one; 1.2: false */
} RouterOptions;

/* the types a payload column can have (its base type, if a domain) */
#define OUTBOX_ROUTER_PAYLOAD_TYPES "jsonb, json, text or bytea"

extern List *outbox_debezium_format_event(const OutboxExtension *ext,
										  const CaptureConfig *config,
										  const CaptureTable *table, char op,
										  HeapTuple before, HeapTuple after,
										  const char *snapshot);
extern void outbox_capture_register_avro(const OutboxExtension *ext,
										 const CaptureConfig *config, Relation rel);
extern void outbox_router_wrong_type(const char *name, Oid typid, const char *what,
									 const char *types);
extern bool outbox_router_payload_type(Oid typid);
extern bytea *outbox_router_value(const RouterOptions *options, const char *name,
								  Form_pg_attribute attr, Datum value, bool isnull);
extern text *outbox_router_key(const RouterOptions *options, Form_pg_attribute attr,
							   Datum value, bool isnull);

#endif							/* OUTBOX_DEBEZIUM_H */
