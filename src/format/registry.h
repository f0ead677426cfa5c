/*-------------------------------------------------------------------------
 *
 * registry.h
 *		A client of a Confluent Schema Registry (outbox.schema_registry_url):
 *		schemas registered and fetched, cached per process, and Confluent's
 *		wire-format prefix of a record.
 *
 * src/format/registry.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef OUTBOX_REGISTRY_H
#define OUTBOX_REGISTRY_H

#include "lib/stringinfo.h"

/*
 * Register schema_json (an Avro schema, as JSON text) under subject
 * (TopicNameStrategy: "<topic>-value", "<topic>-key") at
 * outbox.schema_registry_url; the schema id the registry gives (the same id
 * again for a schema it has).  Cached per process by (subject, schema text):
 * a second call with the same schema does not call the registry.
 * Refused by the registry (incompatible, invalid): ERROR
 * ERRCODE_INVALID_PARAMETER_VALUE with the registry's own message in errdetail.
 * Registry not set or unreachable: ERROR ERRCODE_CONNECTION_FAILURE.
 */
extern int32 outbox_registry_register(const char *subject, const char *schema_json);

/*
 * The schema (JSON text) of a schema id: from the process's cache, else from
 * the registry (GET /schemas/ids/{id}); errors as above.
 */
extern const char *outbox_registry_schema(int32 id);

/* Append Confluent's wire-format prefix: magic byte 0, the id, 4 bytes big-endian. */
extern void outbox_registry_frame(StringInfo buf, int32 id);

#endif							/* OUTBOX_REGISTRY_H */
