/*-------------------------------------------------------------------------
 *
 * avro_binary.c
 *		Avro's binary encoding of the primitive types (the specification's
 *		"Binary Encoding"), appended to a StringInfo.  The complex types are
 *		their parts in order: a record its fields, an enum its index and a
 *		union its branch as longs, then the branch's value; an array or a
 *		map one block (its count, its items, a map's each after its key as
 *		a string) then a count of zero, or the zero alone when empty; a
 *		fixed its bytes.  Both of the extension's Avro writers, for a
 *		topic's schemas (avro.c) and for Kafka Connect's (debezium_avro.c),
 *		write with these, as Apache Avro's C library writes its values.
 *
 * src/format/avro_binary.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "format/avro_binary.h"

/*
 * A long or an int: zig-zag, then 7 bits a byte, low bits first, the high
 * bit set on all but the last.
 */
void
outbox_avro_write_long(StringInfo out, int64 v)
{
	uint64		u = ((uint64) v << 1) ^ (uint64) (v >> 63);

	while (u >= 0x80)
	{
		appendStringInfoChar(out, (char) ((u & 0x7f) | 0x80));
		u >>= 7;
	}
	appendStringInfoChar(out, (char) u);
}

/* Bytes or a string (UTF-8): the length as a long, then the bytes. */
void
outbox_avro_write_bytes(StringInfo out, const char *bytes, int len)
{
	outbox_avro_write_long(out, len);
	appendBinaryStringInfo(out, bytes, len);
}

/* A boolean: one byte, 0 or 1. */
void
outbox_avro_write_boolean(StringInfo out, bool b)
{
	appendStringInfoChar(out, b ? 1 : 0);
}

/* A float: its 4 bytes of IEEE 754, little-endian. */
void
outbox_avro_write_float(StringInfo out, float4 f)
{
	uint32		bits;

	memcpy(&bits, &f, sizeof(bits));
	for (int i = 0; i < 4; i++)
		appendStringInfoChar(out, (char) (bits >> (8 * i)));
}

/* A double: its 8 bytes of IEEE 754, little-endian. */
void
outbox_avro_write_double(StringInfo out, float8 d)
{
	uint64		bits;

	memcpy(&bits, &d, sizeof(bits));
	for (int i = 0; i < 8; i++)
		appendStringInfoChar(out, (char) (bits >> (8 * i)));
}
