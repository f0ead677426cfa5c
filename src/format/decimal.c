/*-------------------------------------------------------------------------
 *
 * decimal.c
 *		Decimal numbers in binary: the two's complement, big-endian, of an
 *		integer given by its decimal digits, the unscaled value of Avro's
 *		decimal and of Kafka Connect's Decimal.
 *
 * The digits are read nine at a time into 32-bit limbs, each nine a
 * multiplication of the limbs so far: the work is quadratic in the digits
 * (about n * n / 170 multiplications), a base conversion having no linear
 * method, and each nine checks for interrupts.  Callers bound the digits:
 * a decimal's precision (avro.c), PostgreSQL's numeric (debezium.c).
 *
 * src/format/decimal.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"

#include "format/decimal.h"

/* the digits one 32-bit limb takes at a time, and 10 to their power */
#define CHUNK_DIGITS 9
#define CHUNK_BASE UINT64CONST(1000000000)

/*
 * Append to out the two's complement, big-endian, of the integer whose
 * decimal digits are digits[0 .. ndigits) followed by zeros zeros, and
 * negative if negative: in as few bytes as hold it and its sign (Java's
 * BigInteger.toByteArray; zero is one byte) when size is 0, else
 * sign-extended to size bytes.  Returns false, out unchanged, if it takes
 * more than size bytes.
 */
bool
outbox_decimal_bytes(StringInfo out, const char *digits, int ndigits, int zeros,
					 bool negative, int size)
{
	uint32	   *limbs;
	int			nlimbs = 0;
	int			total;
	int			pos = 0;
	uint8	   *mag;			/* the magnitude, little-endian */
	int			len;
	int			need;
	bool		minimum = false;

	while (ndigits > 0 && *digits == '0')
	{
		digits++;
		ndigits--;
	}
	if (ndigits == 0)
		zeros = 0;
	total = ndigits + zeros;
	limbs = palloc((total / CHUNK_DIGITS + 2) * sizeof(uint32));

	/* the magnitude in limbs, the lowest first: nine digits at a time */
	while (pos < total)
	{
		int			take = pos == 0 && total % CHUNK_DIGITS != 0 ?
		total % CHUNK_DIGITS : CHUNK_DIGITS;
		uint64		times = 1;
		uint64		carry = 0;

		CHECK_FOR_INTERRUPTS();
		for (int i = 0; i < take; i++, pos++)
		{
			times *= 10;
			carry = carry * 10 + (pos < ndigits ? digits[pos] - '0' : 0);
		}
		Assert(times <= CHUNK_BASE);
		for (int i = 0; i < nlimbs; i++)
		{
			uint64		v = (uint64) limbs[i] * times + carry;

			limbs[i] = (uint32) v;
			carry = v >> 32;
		}
		if (carry > 0)
			limbs[nlimbs++] = (uint32) carry;
	}

	/* in bytes, without the high zeros */
	mag = palloc(nlimbs * 4 + 1);
	for (int i = 0; i < nlimbs * 4; i++)
		mag[i] = (uint8) (limbs[i / 4] >> (8 * (i % 4)));
	len = nlimbs * 4;
	while (len > 0 && mag[len - 1] == 0)
		len--;
	if (len == 0)
		negative = false;

	/*
	 * Room for the sign: a byte more when the highest bit is taken, but for
	 * -2^(8n-1), which n bytes hold (0x80 and zeros).
	 */
	if (negative && len > 0 && mag[len - 1] == 0x80)
	{
		minimum = true;
		for (int i = 0; i < len - 1 && minimum; i++)
			minimum = mag[i] == 0;
	}
	if (len == 0 || ((mag[len - 1] & 0x80) != 0 && !minimum))
		mag[len++] = 0;
	if (negative)
	{
		int			carry = 1;

		for (int i = 0; i < len; i++)
		{
			int			v = (uint8) ~mag[i] + carry;

			mag[i] = (uint8) v;
			carry = v >> 8;
		}
	}

	need = size > 0 ? size : len;
	if (len <= need)
	{
		enlargeStringInfo(out, need);
		for (int i = need - 1; i >= 0; i--)
			appendStringInfoChar(out, i < len ? mag[i] : (negative ? 0xff : 0));
	}
	pfree(limbs);
	pfree(mag);
	return len <= need;
}
