/*-------------------------------------------------------------------------
 *
 * registry.h
 *		A client of a Confluent Schema Registry (outbox.schema_registry_url):
 *		schemas registered and fetched, cached per process, and Confluent's
 *		wire-format prefix of a record.
 *
 * src/kafka/registry.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef OUTBOX_REGISTRY_H
#define OUTBOX_REGISTRY_H

#include "lib/stringinfo.h"

#include "base/catalog.h"

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
 * The id of schema_json under subject, as outbox_registry_register gives
 * it, for a schema registered in the application's transaction: from the
 * process's cache, else from the table outbox_schema_ids of ext (1.3 on),
 * else registered and kept there, as the extension's owner.  The caller
 * holds a transaction; takes a connection to SPI.
 */
extern int32 outbox_registry_id(const OutboxExtension *ext, const char *subject,
								const char *schema_json);

/*
 * Remove the rows of outbox_schema_ids that repeat another's fingerprint:
 * sessions that registered a schema at once each keep its id (1.4).  Only
 * this deletes rows, so it waits for no application transaction, nor one
 * for it.  The caller holds a transaction; takes a connection to SPI.
 */
extern void outbox_registry_tidy(const OutboxExtension *ext);

/*
 * The schema (JSON text) of a schema id: from the process's cache, else from
 * the registry (GET /schemas/ids/{id}); errors as above.
 */
extern const char *outbox_registry_schema(int32 id);

/* Append Confluent's wire-format prefix: magic byte 0, the id, 4 bytes big-endian. */
extern void outbox_registry_frame(StringInfo buf, int32 id);

#endif							/* OUTBOX_REGISTRY_H */
