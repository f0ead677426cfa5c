/*-------------------------------------------------------------------------
 *
 * avro_binary.h
 *		Avro's binary encoding of the primitive types, appended to a
 *		StringInfo: the one writer of Avro records, for a topic's schemas
 *		(avro.c) and Kafka Connect's (debezium_avro.c).
 *
 * src/format/avro_binary.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef OUTBOX_AVRO_BINARY_H
#define OUTBOX_AVRO_BINARY_H

#include "lib/stringinfo.h"

extern void outbox_avro_write_long(StringInfo out, int64 v);
extern void outbox_avro_write_bytes(StringInfo out, const char *bytes, int len);
extern void outbox_avro_write_boolean(StringInfo out, bool b);
extern void outbox_avro_write_float(StringInfo out, float4 f);
extern void outbox_avro_write_double(StringInfo out, float8 d);

#endif							/* OUTBOX_AVRO_BINARY_H */
