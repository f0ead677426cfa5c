/*-------------------------------------------------------------------------
 *
 * debezium.h
 *		What the outbox router (src/capture/router.c) calls of the debezium
 *		format: the key and value of an outbox table's row as Debezium's
 *		outbox event router writes them, with the JSON converter or the
 *		AvroConverter.
 *
 * src/format/debezium.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef OUTBOX_DEBEZIUM_H
#define OUTBOX_DEBEZIUM_H

#include "catalog/pg_attribute.h"

#include "base/catalog.h"

/* the router's key converter */
typedef enum RouterKeyConverter
{
	ROUTER_KEY_STRING,			/* Kafka's StringConverter; 1.2 */
	ROUTER_KEY_JSON,			/* Kafka's JsonConverter */
	ROUTER_KEY_AVRO				/* Confluent's AvroConverter */
} RouterKeyConverter;

/*
 * How the router's converters write a row's key and value.
 */
typedef struct RouterOptions
{
	bool		expand;
	RouterKeyConverter key_converter;
	bool		avro;			/* the value's converter is the AvroConverter,
								 * else the JsonConverter */
	bool		schemas;		/* schemas_enable=true; 1.2: false */
	bool		null_tombstone; /* a null payload is a tombstone; 1.2: true */
	bool		blank_tombstone;	/* so is an empty or blank one; 1.2: false */
} RouterOptions;

/* the types a payload column can have (its base type, if a domain) */
#define OUTBOX_ROUTER_PAYLOAD_TYPES "jsonb, json, text or bytea"

extern void outbox_router_wrong_type(const char *name, Oid typid, const char *what,
									 const char *types);
extern bool outbox_router_payload_type(Oid typid);
extern bytea *outbox_router_value(const OutboxExtension *ext, const RouterOptions *options,
								  const char *topic, const char *name,
								  Form_pg_attribute attr, Datum value, bool isnull);
extern text *outbox_router_key(const OutboxExtension *ext, const RouterOptions *options,
							   const char *topic, Form_pg_attribute attr, Datum value,
							   bool isnull);

#endif							/* OUTBOX_DEBEZIUM_H */
