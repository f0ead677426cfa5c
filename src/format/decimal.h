/*-------------------------------------------------------------------------
 *
 * decimal.h
 *		Decimal numbers in binary: the two's complement of an integer given
 *		by its decimal digits, as Avro's decimal and Kafka Connect's Decimal
 *		(Java's BigInteger.toByteArray) write it.
 *
 * src/format/decimal.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef OUTBOX_DECIMAL_H
#define OUTBOX_DECIMAL_H

#include "lib/stringinfo.h"

extern bool outbox_decimal_bytes(StringInfo out, const char *digits, int ndigits,
								 int zeros, bool negative, int size);

#endif							/* OUTBOX_DECIMAL_H */
