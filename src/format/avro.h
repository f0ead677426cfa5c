/*-------------------------------------------------------------------------
 *
 * avro.h
 *		Avro records from JSON: schemas checked and parsed, cached per
 *		process by their registry id, and JSON values checked against them
 *		and encoded in Confluent's wire format.
 *
 * src/format/avro.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef OUTBOX_AVRO_H
#define OUTBOX_AVRO_H

#include "lib/stringinfo.h"
#include "utils/jsonb.h"

typedef struct OutboxAvroSchema OutboxAvroSchema;

extern void outbox_avro_check_schema(Jsonb *schema, const char *what);
extern OutboxAvroSchema *outbox_avro_schema(int32 id, const char *schema_json);
extern bool outbox_avro_takes_text(const OutboxAvroSchema *schema);
extern char *outbox_avro_encode(OutboxAvroSchema *schema, Jsonb *value, StringInfo out);
extern char *outbox_avro_encode_text(OutboxAvroSchema *schema, const char *value, int len,
									 StringInfo out);
extern void outbox_avro_refuse(const char *what, const char *topic, const char *detail);

#endif							/* OUTBOX_AVRO_H */
