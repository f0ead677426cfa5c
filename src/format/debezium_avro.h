/*-------------------------------------------------------------------------
 *
 * debezium_avro.h
 *		Change events as Confluent's AvroConverter writes Debezium's
 *		records: the Kafka Connect schema and value of src/format/debezium_json.c,
 *		as AvroData maps them, in the Schema Registry's wire format.
 *
 * src/format/debezium_avro.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef OUTBOX_DEBEZIUM_AVRO_H
#define OUTBOX_DEBEZIUM_AVRO_H

#include "lib/stringinfo.h"

#include "base/catalog.h"

extern int32 outbox_debezium_avro_register(const OutboxExtension *ext,
										   const char *connect_schema, const char *subject);
extern bytea *outbox_debezium_avro(const OutboxExtension *ext, const char *connect_record,
								   const char *subject);

#endif							/* OUTBOX_DEBEZIUM_AVRO_H */
