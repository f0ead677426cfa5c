/*-------------------------------------------------------------------------
 *
 * debezium_json.c
 *		Change events as Debezium's PostgreSQL connector writes them with
 *		the JSON converter and schemas.enable=false: the key, the value in
 *		the connector's field order, and each column's value type by type,
 *		as docs/debezium.md lists them, with DebeziumOptions.  Values come
 *		from the datums, never from settings (outbox_debezium_pin_settings
 *		pins those that a type's own text reads): docs/design.md, "Capture,
 *		the router and snapshots", says why.
 *
 * src/format/debezium_json.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/htup_details.h"
#include "access/transam.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/pg_enum.h"
#include "catalog/pg_type.h"
#include "commands/dbcommands.h"
#include "common/base64.h"
#include "common/md5.h"
#include "common/shortest_dec.h"
#include "datatype/timestamp.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/catcache.h"
#include "utils/cash.h"
#include "utils/date.h"
#include "utils/geo_decls.h"
#include "utils/guc.h"
#include "utils/json.h"
#include "utils/lsyscache.h"
#include "utils/numeric.h"
#include "utils/pg_locale.h"
#include "utils/syscache.h"
#include "utils/varbit.h"

#include "format/debezium_json.h"
#include "format/decimal.h"

/* microseconds between the Unix epoch and PostgreSQL's */
#define UNIX_EPOCH_OFFSET_US \
	((int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * USECS_PER_DAY)

/*
 * What the connector writes for timestamp 'infinity' and '-infinity': the
 * JDBC driver's stand-ins, in microseconds since 1970.
 */
#define INFINITY_TIMESTAMP_US INT64CONST(9223372036825200000)
#define MINUS_INFINITY_TIMESTAMP_US INT64CONST(-9223372036832400000)

/*
 * What the connector writes for a TOASTed value that an update left
 * unchanged, where the table's REPLICA IDENTITY is not FULL (its
 * unavailable.value.placeholder).
 */
#define UNAVAILABLE "__debezium_unavailable_value"

/* the money.fraction.digits of the connector: money is rescaled to it */
#define MONEY_FRACTION_DIGITS 2

/* how outbox_debezium_text writes: as a 1.2 trigger did */
static const DebeziumOptions text_options = {DEBEZIUM_DECIMALS_STRING, false, false};

/* how a value is written */
typedef enum Encoding
{
	ENC_BOOL,
	ENC_INTEGER,
	ENC_FLOAT4,
	ENC_FLOAT8,
	ENC_NUMERIC,				/* as decimal.handling.mode says */
	ENC_MONEY,					/* as decimal.handling.mode says */
	ENC_HSTORE,					/* a JSON object in a string, or its text */
	ENC_STRING,					/* the type's text, which no setting changes */
	ENC_BYTES,					/* base64 */
	ENC_DATE,					/* days since 1970 */
	ENC_TIME,					/* since midnight: ms up to time(3), else us */
	ENC_TIMETZ,					/* ISO 8601 in UTC */
	ENC_TIMESTAMP,				/* since 1970: ms up to timestamp(3), else us */
	ENC_TIMESTAMPTZ,			/* ISO 8601 in UTC */
	ENC_INTERVAL,				/* microseconds, a month 30.4375 days */
	ENC_BIT,					/* bit(1): boolean; else little-endian bytes */
	ENC_POINT,					/* {"x","y","wkb","srid"} */
	ENC_ARRAY,					/* a JSON array of the elements */
	ENC_TEXT					/* the type's text, settings pinned */
} Encoding;

/*
 * Is typid a type called name, as the connector recognizes the types of
 * contrib's hstore and ltree: by their names?
 */
static bool
type_named(Oid typid, const char *name)
{
	HeapTuple	tuple = SearchSysCache1(TYPEOID, ObjectIdGetDatum(typid));
	bool		named;

	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "cache lookup failed for type %u", typid);
	named = strcmp(NameStr(((Form_pg_type) GETSTRUCT(tuple))->typname), name) == 0;
	ReleaseSysCache(tuple);
	return named;
}

/*
 * How a value of type typid (a domain: its base type, into *typid and
 * *typmod) is written.
 */
static Encoding
encoding_of(Oid *typid, int32 *typmod)
{
	/* no type made by initdb's catalog is a domain: no look-up per value */
	if (*typid >= FirstGenbkiObjectId)
		*typid = getBaseTypeAndTypmod(*typid, typmod);
	switch (*typid)
	{
		case BOOLOID:
			return ENC_BOOL;
		case INT2OID:
		case INT4OID:
		case INT8OID:
		case OIDOID:
			return ENC_INTEGER;
		case FLOAT4OID:
			return ENC_FLOAT4;
		case FLOAT8OID:
			return ENC_FLOAT8;
		case NUMERICOID:
			return ENC_NUMERIC;
		case CASHOID:
			return ENC_MONEY;
		case CHAROID:
		case NAMEOID:
		case TEXTOID:
		case VARCHAROID:
		case BPCHAROID:
		case UUIDOID:
		case JSONOID:
		case JSONBOID:
		case INETOID:
		case CIDROID:
		case MACADDROID:
		case MACADDR8OID:
		case XMLOID:
		case TSVECTOROID:
			return ENC_STRING;
		case BYTEAOID:
			return ENC_BYTES;
		case DATEOID:
			return ENC_DATE;
		case TIMEOID:
			return ENC_TIME;
		case TIMETZOID:
			return ENC_TIMETZ;
		case TIMESTAMPOID:
			return ENC_TIMESTAMP;
		case TIMESTAMPTZOID:
			return ENC_TIMESTAMPTZ;
		case INTERVALOID:
			return ENC_INTERVAL;
		case BITOID:
		case VARBITOID:
			return ENC_BIT;
		case POINTOID:
			return ENC_POINT;
	}
	if (OidIsValid(get_element_type(*typid)))
		return ENC_ARRAY;
	if (type_is_enum(*typid))
		return ENC_STRING;
	if (type_named(*typid, "hstore"))
		return ENC_HSTORE;
	return ENC_TEXT;
}

/*
 * A string, as a JSON string, or bare.
 */
static void
append_string(StringInfo buf, const char *str, bool quote)
{
	if (quote)
		escape_json(buf, str);
	else
		appendStringInfoString(buf, str);
}

/*
 * Append value in decimal, as appendStringInfo(buf, INT64_FORMAT, value)
 * does, without the cost of reading a format: several a column of each
 * captured row.
 */
static void
append_int64(StringInfo buf, int64 value)
{
	char		digits[MAXINT8LEN + 1];

	appendBinaryStringInfo(buf, digits, pg_lltoa(value, digits));
}

/* The same for an unsigned value. */
static void
append_uint64(StringInfo buf, uint64 value)
{
	char		digits[MAXINT8LEN + 1];

	appendBinaryStringInfo(buf, digits, pg_ulltoa_n(value, digits));
}

/*
 * A double (or a float, widened) as Java's Double.toString (Float.toString)
 * writes it, which is what the JSON converter writes: the shortest decimal
 * that reads back as the same number, in plain notation from 0.001 up to
 * 10^7 ("12.5", "100.0"), in computerized scientific notation otherwise
 * ("1.0E10", "1.5E-4").  NaN and the infinities are strings, as Jackson
 * writes them.
 */
static void
append_java_number(StringInfo buf, double d, bool is_float, bool quote)
{
	char		shortest[DOUBLE_SHORTEST_DECIMAL_LEN + FLOAT_SHORTEST_DECIMAL_LEN];
	char		digits[DOUBLE_SHORTEST_DECIMAL_LEN];
	int			ndigits = 0;
	int			point = -1;		/* digits before the decimal point */
	int			exponent = 0;
	const char *p;
	int			e;				/* the value is d.ddd x 10^e */
	int			first;

	if (isnan(d))
	{
		append_string(buf, "NaN", quote);
		return;
	}
	if (isinf(d))
	{
		append_string(buf, d > 0 ? "Infinity" : "-Infinity", quote);
		return;
	}
	if (d == 0)
	{
		appendStringInfoString(buf, signbit(d) ? "-0.0" : "0.0");
		return;
	}
	if (is_float)
		float_to_shortest_decimal_buf((float) d, shortest);
	else
		double_to_shortest_decimal_buf(d, shortest);

	/* take the digits, where the point is, and the exponent */
	p = shortest;
	if (*p == '-')
	{
		appendStringInfoChar(buf, '-');
		p++;
	}
	for (; *p && *p != 'e' && *p != 'E'; p++)
	{
		if (*p == '.')
			point = ndigits;
		else if (ndigits < (int) sizeof(digits) - 1)
			digits[ndigits++] = *p;
	}
	if (*p)
		exponent = atoi(p + 1);
	if (point < 0)
		point = ndigits;
	for (first = 0; first < ndigits - 1 && digits[first] == '0'; first++)
		;
	while (ndigits > first + 1 && digits[ndigits - 1] == '0')
		ndigits--;
	e = point - first - 1 + exponent;

	if (e >= -3 && e < 7)
	{
		if (e < 0)
		{
			appendStringInfoString(buf, "0.");
			for (int i = -1; i > e; i--)
				appendStringInfoChar(buf, '0');
			appendBinaryStringInfo(buf, digits + first, ndigits - first);
		}
		else
		{
			for (int i = 0; i <= e; i++)
				appendStringInfoChar(buf, first + i < ndigits ? digits[first + i] : '0');
			appendStringInfoChar(buf, '.');
			if (first + e + 1 < ndigits)
				appendBinaryStringInfo(buf, digits + first + e + 1, ndigits - first - e - 1);
			else
				appendStringInfoChar(buf, '0');
		}
	}
	else
	{
		appendStringInfoChar(buf, digits[first]);
		appendStringInfoChar(buf, '.');
		if (ndigits > first + 1)
			appendBinaryStringInfo(buf, digits + first + 1, ndigits - first - 1);
		else
			appendStringInfoChar(buf, '0');
		appendStringInfo(buf, "E%d", e);
	}
}

/*
 * len bytes as a base64 string.
 */
static void
append_base64(StringInfo buf, const char *bytes, int len, bool quote)
{
	int			enclen = pg_b64_enc_len(len);
	char	   *encoded = palloc(enclen + 1);
	int			n = pg_b64_encode(bytes, len, encoded, enclen);

	if (n < 0)
		elog(ERROR, "base64 encoding failed");
	encoded[n] = '\0';
	append_string(buf, encoded, quote);
	pfree(encoded);
}

/*
 * An ISO 8601 date and time (Java's ISO_LOCAL_DATE 'T' ISO_LOCAL_TIME),
 * "Z" appended: the year in four digits, signed past 9999 and before year
 * 0 (1 BC); seconds always; fraction_digits digits of fraction, or with
 * fraction_digits < 0 as few as it takes (none for a whole second).
 */
static void
append_iso_utc(StringInfo buf, struct pg_tm *tm, fsec_t fsec, int fraction_digits,
			   bool with_date)
{
	char		fraction[8];

	if (with_date)
	{
		if (tm->tm_year > 9999)
			appendStringInfo(buf, "+%d", tm->tm_year);
		else if (tm->tm_year < 0)
			appendStringInfo(buf, "-%04d", -tm->tm_year);
		else
			appendStringInfo(buf, "%04d", tm->tm_year);
		appendStringInfo(buf, "-%02d-%02dT", tm->tm_mon, tm->tm_mday);
	}
	appendStringInfo(buf, "%02d:%02d:%02d", tm->tm_hour, tm->tm_min, tm->tm_sec);
	snprintf(fraction, sizeof(fraction), "%06d", (int) fsec);
	if (fraction_digits < 0)
	{
		int			n = 6;

		while (n > 0 && fraction[n - 1] == '0')
			n--;
		fraction_digits = n;
	}
	if (fraction_digits > 0)
	{
		appendStringInfoChar(buf, '.');
		appendBinaryStringInfo(buf, fraction, Min(fraction_digits, 6));
	}
	appendStringInfoChar(buf, 'Z');
}

/*
 * A timestamp with time zone as the connector's ZonedTimestamp: ISO 8601
 * in UTC with as many fraction digits as the column's precision (6
 * without one), or "infinity" / "-infinity".
 */
static void
append_timestamptz(StringInfo buf, TimestampTz ts, int32 typmod, bool quote)
{
	struct pg_tm tm;
	fsec_t		fsec;
	StringInfoData iso;

	if (TIMESTAMP_IS_NOBEGIN(ts) || TIMESTAMP_IS_NOEND(ts))
	{
		append_string(buf, TIMESTAMP_IS_NOEND(ts) ? "infinity" : "-infinity", quote);
		return;
	}
	if (timestamp2tm(ts, NULL, &tm, &fsec, NULL, NULL) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("timestamp out of range")));
	initStringInfo(&iso);
	append_iso_utc(&iso, &tm, fsec, typmod < 0 ? 6 : (typmod == 0 ? -1 : typmod), true);
	append_string(buf, iso.data, quote);
	pfree(iso.data);
}

/*
 * A time with time zone as the connector's ZonedTime: the time in UTC,
 * ISO 8601, fraction digits as needed.
 */
static void
append_timetz(StringInfo buf, TimeTzADT *t, bool quote)
{
	int64		us = (t->time + (int64) t->zone * USECS_PER_SEC) % USECS_PER_DAY;
	struct pg_tm tm = {0};
	StringInfoData iso;

	if (us < 0)
		us += USECS_PER_DAY;
	tm.tm_hour = us / USECS_PER_HOUR;
	tm.tm_min = (us / USECS_PER_MINUTE) % MINS_PER_HOUR;
	tm.tm_sec = (us / USECS_PER_SEC) % SECS_PER_MINUTE;
	initStringInfo(&iso);
	append_iso_utc(&iso, &tm, us % USECS_PER_SEC, -1, false);
	append_string(buf, iso.data, quote);
	pfree(iso.data);
}

/*
 * An interval as the connector's MicroDuration: microseconds, a month
 * counted as 365.25 / 12 days, computed in floating point in the order the
 * connector computes it, so that the result is the same to the last digit.
 */
static void
append_interval(StringInfo buf, Interval *iv)
{
	const double days_per_month = 365.25 / 12.0;
	int64		hours = iv->time / USECS_PER_HOUR;
	int64		minutes = (iv->time / USECS_PER_MINUTE) % MINS_PER_HOUR;
	int64		whole_seconds = (iv->time / USECS_PER_SEC) % SECS_PER_MINUTE;
	int64		micros = iv->time % USECS_PER_SEC;
	double		seconds = (double) whole_seconds + (double) micros / 1000000.0;
	double		days = (double) iv->month * days_per_month + iv->day;
	double		total = (((days * 24 + hours) * 60) + minutes) * 60 + seconds;
	double		us = total * 1e6;

	/* Java's (long) cast: toward zero, saturating */
	if (us >= 9223372036854775807.0)
		appendStringInfoString(buf, "9223372036854775807");
	else if (us <= -9223372036854775808.0)
		appendStringInfoString(buf, "-9223372036854775808");
	else
		append_int64(buf, (int64) us);
}

/*
 * A bit string: bit(1) and varbit(1) as a boolean; longer ones as the
 * connector's Bits, the bits read as a binary number (the last one lowest)
 * in as few little-endian bytes as hold it, base64.
 */
static void
append_bits(StringInfo buf, VarBit *vb, int32 typmod, bool quote)
{
	int			nbits = VARBITLEN(vb);
	bits8	   *bits = VARBITS(vb);
	char	   *bytes;
	int			len = 0;

	if (typmod == 1)
	{
		appendStringInfoString(buf, nbits > 0 && (bits[0] & 0x80) ? "true" : "false");
		return;
	}
	bytes = palloc0(nbits / 8 + 1);
	for (int j = 0; j < nbits; j++)
	{
		int			i = nbits - 1 - j;	/* the character, from the left */

		if (bits[i / 8] & (0x80 >> (i % 8)))
		{
			bytes[j / 8] |= 1 << (j % 8);
			len = j / 8 + 1;
		}
	}
	append_base64(buf, bytes, len, quote);
	pfree(bytes);
}

/*
 * A point as the connector's Point: x, y, and the point as little-endian
 * OGC WKB, base64.
 */
static void
append_point(StringInfo buf, Point *pt)
{
	unsigned char wkb[21];
	double		xy[2] = {pt->x, pt->y};

	wkb[0] = 1;					/* little-endian */
	wkb[1] = 1;					/* type 1: point */
	wkb[2] = wkb[3] = wkb[4] = 0;
	for (int c = 0; c < 2; c++)
	{
		uint64		u;

		memcpy(&u, &xy[c], sizeof(u));
		for (int b = 0; b < 8; b++)
			wkb[5 + c * 8 + b] = (u >> (8 * b)) & 0xff;
	}
	appendStringInfoString(buf, "{\"x\":");
	append_java_number(buf, pt->x, false, true);
	appendStringInfoString(buf, ",\"y\":");
	append_java_number(buf, pt->y, false, true);
	appendStringInfoString(buf, ",\"wkb\":");
	append_base64(buf, (char *) wkb, sizeof(wkb), true);
	appendStringInfoString(buf, ",\"srid\":null}");
}

static void append_encoded(StringInfo buf, Datum value, Oid typid, int32 typmod,
						   Encoding enc, const DebeziumOptions *options, bool quote);

/*
 * The elements of an array from *next on, dimension dim of ndim, as nested
 * JSON arrays.
 */
static void
append_array_dim(StringInfo buf, int dim, int ndim, const int *dims, Datum *elems,
				 bool *nulls, int *next, Oid elemtype, int32 typmod, Encoding enc,
				 const DebeziumOptions *options)
{
	appendStringInfoChar(buf, '[');
	for (int i = 0; i < dims[dim]; i++)
	{
		if (i > 0)
			appendStringInfoChar(buf, ',');
		if (dim < ndim - 1)
			append_array_dim(buf, dim + 1, ndim, dims, elems, nulls, next,
							 elemtype, typmod, enc, options);
		else
		{
			if (nulls[*next] && options->named_types && type_is_enum(elemtype))
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("cannot write a null element of an enum array"),
						 errdetail("The items of an enum array are required in the connector's schema: it stops at a null one.")));
			if (nulls[*next])
				appendStringInfoString(buf, "null");
			else
				append_encoded(buf, elems[*next], elemtype, typmod, enc, options, true);
			(*next)++;
		}
	}
	appendStringInfoChar(buf, ']');
}

static void
append_array(StringInfo buf, Datum value, Oid typid, int32 typmod,
			 const DebeziumOptions *options)
{
	ArrayType  *array = DatumGetArrayTypeP(value);
	Oid			elemtype = ARR_ELEMTYPE(array);
	int			ndim = ARR_NDIM(array);
	int16		typlen;
	bool		typbyval;
	char		typalign;
	Datum	   *elems;
	bool	   *nulls;
	int			nelems;
	int			next = 0;
	Encoding	enc;

	if (ndim == 0)
	{
		appendStringInfoString(buf, "[]");
		return;
	}
	get_typlenbyvalalign(elemtype, &typlen, &typbyval, &typalign);
	deconstruct_array(array, elemtype, typlen, typbyval, typalign, &elems, &nulls, &nelems);
	enc = encoding_of(&elemtype, &typmod);
	append_array_dim(buf, 0, ndim, ARR_DIMS(array), elems, nulls, &next, elemtype, typmod, enc,
					 options);
}

/*
 * The text of a value, from its type's output function.
 */
static char *
type_text(Datum value, Oid typid)
{
	Oid			typoutput;
	bool		typisvarlena;

	getTypeOutputInfo(typid, &typoutput, &typisvarlena);
	return OidOutputFunctionCall(typoutput, value);
}

/*
 * The integer of digits (decimal, an optional "-" first) followed by
 * zeros zeros, as Java's BigInteger.toByteArray writes it: big-endian two's
 * complement in as few bytes as hold it and its sign; base64.
 */
static void
append_unscaled(StringInfo buf, const char *digits, int zeros, bool quote)
{
	bool		negative = *digits == '-';
	StringInfoData bytes;

	if (negative)
		digits++;
	initStringInfo(&bytes);
	(void) outbox_decimal_bytes(&bytes, digits, strlen(digits), zeros, negative, 0);
	append_base64(buf, bytes.data, bytes.len, quote);
	pfree(bytes.data);
}

/*
 * The precision and scale of a Decimal of a numeric of typmod (not -1):
 * the column's, as numeric.c packs them (make_numeric_typmod: the scale in
 * 11 bits, signed, from -1000 to 1000) and as the connector reads them
 * with its default plugin, decoderbufs, which gives the typmod's text;
 * for the avro converter, a negative scale is 0 and the precision as much
 * more, since an Avro decimal has no negative scale.
 */
static void
decimal_scale(int32 typmod, const DebeziumOptions *options, int *precision, int *scale)
{
	*precision = ((typmod - VARHDRSZ) >> 16) & 0xffff;
	*scale = (((typmod - VARHDRSZ) & 0x7ff) ^ 1024) - 1024;
	if (options->avro && *scale < 0)
	{
		*precision -= *scale;
		*scale = 0;
	}
}

/*
 * A numeric (typmod: the column's) as decimal.handling.mode says: precise,
 * Kafka Connect's Decimal (base64 of the unscaled value, the scale being
 * the column's), or without a scale in the column the connector's
 * VariableScaleDecimal {"scale":..,"value":..} of the value without
 * trailing zeros; string, the digits, NaN and the infinities as the
 * connector names them; double, a number.  Precise has no NaN or
 * infinity: the connector stops at them, the change fails here.
 */
static void
append_numeric(StringInfo buf, Datum value, int32 typmod, const DebeziumOptions *options,
			   bool quote)
{
	Numeric		num = DatumGetNumeric(value);
	char	   *text;
	StringInfoData digits;
	int			scale = 0;
	bool		point = false;

	if (options->decimals == DEBEZIUM_DECIMALS_DOUBLE)
	{
		append_java_number(buf, DatumGetFloat8(DirectFunctionCall1(numeric_float8, value)),
						   false, quote);
		return;
	}
	text = DatumGetCString(DirectFunctionCall1(numeric_out, value));
	if (numeric_is_nan(num) || numeric_is_inf(num))
	{
		const char *name = numeric_is_nan(num) ? "NAN" :
		*text != '-' ? "POSITIVE_INFINITY" : "NEGATIVE_INFINITY";

		if (options->decimals != DEBEZIUM_DECIMALS_STRING)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot write numeric %s with decimal_handling \"precise\"",
							numeric_is_nan(num) ? "NaN" : "infinity"),
					 errdetail("Debezium's connector stops at such a value in this mode."),
					 errhint("Attach the table with decimal_handling => 'string' or 'double'.")));
		append_string(buf, name, quote);
		return;
	}
	if (options->decimals == DEBEZIUM_DECIMALS_STRING)
	{
		append_string(buf, text, quote);
		return;
	}

	/* the unscaled value and the scale */
	initStringInfo(&digits);
	for (const char *c = text; *c; c++)
	{
		if (*c == '.')
			point = true;
		else
		{
			appendStringInfoChar(&digits, *c);
			scale += point ? 1 : 0;
		}
	}
	if (typmod >= 0)
	{
		int			precision;
		int			column_scale;

		/*
		 * Rescaled to the column's scale: a value has as many decimals as
		 * it, or none for a negative scale, whose zeros then go.
		 */
		decimal_scale(typmod, options, &precision, &column_scale);
		for (; scale > column_scale && digits.len > 0 && digits.data[digits.len - 1] == '0'; scale--)
			digits.data[--digits.len] = '\0';
		if (scale > column_scale && strspn(digits.data, "-0") != digits.len)
			elog(ERROR, "numeric value %s has more decimals than its scale %d",
				 text, column_scale);
		append_unscaled(buf, digits.data, Max(column_scale - scale, 0), true);
		return;
	}
	while (scale > 0 && digits.data[digits.len - 1] == '0')
	{
		digits.data[--digits.len] = '\0';
		scale--;
	}
	appendStringInfo(buf, "{\"scale\":%d,\"value\":", scale);
	append_unscaled(buf, digits.data, 0, true);
	appendStringInfoChar(buf, '}');
}

/*
 * A money amount as decimal.handling.mode says: the amount with the
 * fraction digits of lc_monetary, as the connector parses PostgreSQL's
 * text of it; precise, rescaled to money.fraction.digits (2), half up.
 */
static void
append_money(StringInfo buf, Cash cash, const DebeziumOptions *options, bool quote)
{
	struct lconv *lconv = PGLC_localeconv();
	int			frac = lconv->frac_digits;
	uint64		magnitude = cash < 0 ? -(uint64) cash : (uint64) cash;
	uint64		scale = 1;
	StringInfoData amount;

	if (frac < 0 || frac > 10)
		frac = 2;
	for (int i = 0; i < frac; i++)
		scale *= 10;
	initStringInfo(&amount);
	if (options->decimals == DEBEZIUM_DECIMALS_PRECISE)
	{
		for (int i = frac; i < MONEY_FRACTION_DIGITS; i++)
			magnitude *= 10;
		for (int i = MONEY_FRACTION_DIGITS; i < frac; i++)
			magnitude = magnitude / 10 + (i == frac - 1 && magnitude % 10 >= 5 ? 1 : 0);
		appendStringInfo(&amount, "%s" UINT64_FORMAT, cash < 0 ? "-" : "", magnitude);
		append_unscaled(buf, amount.data, 0, quote);
	}
	else
	{
		appendStringInfo(&amount, "%s" UINT64_FORMAT, cash < 0 ? "-" : "", magnitude / scale);
		if (frac > 0)
			appendStringInfo(&amount, ".%0*" INT64_MODIFIER "u", frac, magnitude % scale);
		if (options->decimals == DEBEZIUM_DECIMALS_STRING)
			append_string(buf, amount.data, quote);
		else
			append_java_number(buf, strtod(amount.data, NULL), false, quote);
	}
	pfree(amount.data);
}

/*
 * Java's String.hashCode of a string in the server encoding: over the
 * UTF-16 code units of its characters.
 */
static int32
java_hash(const char *str)
{
	uint32		h = 0;
	const char *utf8 = pg_server_to_any(str, strlen(str), PG_UTF8);
	const unsigned char *end = (const unsigned char *) utf8 + strlen(utf8);

	for (const unsigned char *c = (const unsigned char *) utf8; c < end;)
	{
		int			len = pg_utf_mblen(c);
		pg_wchar	code;

		if (c + len > end)
			break;
		code = utf8_to_unicode(c);
		c += len;
		if (code > 0xFFFF)
		{
			h = 31 * h + (0xD800 + ((code - 0x10000) >> 10));
			h = 31 * h + (0xDC00 + ((code - 0x10000) & 0x3FF));
		}
		else
			h = 31 * h + code;
	}
	return (int32) h;
}

/* an hstore pair: where in the text, and its bucket in a Java HashMap */
typedef struct HstorePair
{
	char	   *key;
	char	   *value;			/* NULL: NULL */
	int			bucket;
	int			order;
} HstorePair;

static int
pair_cmp(const void *a, const void *b)
{
	const HstorePair *x = a;
	const HstorePair *y = b;

	if (x->bucket != y->bucket)
		return x->bucket < y->bucket ? -1 : 1;
	return x->order - y->order;
}

/*
 * One quoted string of an hstore's text at *p, unescaped; NULL (and *p
 * past "NULL") for NULL.  Returns false on text that is not hstore's.
 */
static bool
hstore_string(char **p, char **out)
{
	StringInfoData s;

	if (strncmp(*p, "NULL", 4) == 0)
	{
		*p += 4;
		*out = NULL;
		return true;
	}
	if (**p != '"')
		return false;
	initStringInfo(&s);
	for ((*p)++; **p != '"'; (*p)++)
	{
		if (**p == '\\')
			(*p)++;
		if (**p == '\0')
			return false;
		appendStringInfoChar(&s, **p);
	}
	(*p)++;
	*out = s.data;
	return true;
}

/*
 * An hstore as hstore.handling.mode=json writes it: a JSON object in a
 * string, its pairs in the order of the Java HashMap the connector reads
 * them into (by bucket of the key's hash, then as read); its text if it is
 * not hstore's.
 */
static void
append_hstore(StringInfo buf, Datum value, Oid typid, bool quote)
{
	char	   *text = type_text(value, typid);
	char	   *p = text;
	HstorePair *pairs = NULL;
	int			npairs = 0;
	int			capacity = 16;
	StringInfoData json;

	while (*p)
	{
		HstorePair pair;

		if (npairs > 0)
		{
			if (strncmp(p, ", ", 2) != 0)
				break;
			p += 2;
		}
		if (!hstore_string(&p, &pair.key) || pair.key == NULL ||
			strncmp(p, "=>", 2) != 0)
			break;
		p += 2;
		if (!hstore_string(&p, &pair.value))
			break;
		pair.order = npairs;
		pairs = npairs == 0 ? palloc(sizeof(HstorePair)) :
			repalloc(pairs, (npairs + 1) * sizeof(HstorePair));
		pairs[npairs++] = pair;
	}
	if (*p)
	{
		append_string(buf, text, quote);
		return;
	}
	/* a HashMap doubles its 16 buckets while it is more than 3/4 full */
	while (npairs > capacity / 4 * 3)
		capacity *= 2;
	for (int i = 0; i < npairs; i++)
	{
		uint32		h = (uint32) java_hash(pairs[i].key);

		pairs[i].bucket = (h ^ (h >> 16)) & (capacity - 1);
	}
	if (npairs > 1)
		qsort(pairs, npairs, sizeof(HstorePair), pair_cmp);
	initStringInfo(&json);
	appendStringInfoChar(&json, '{');
	for (int i = 0; i < npairs; i++)
	{
		if (i > 0)
			appendStringInfoChar(&json, ',');
		escape_json(&json, pairs[i].key);
		appendStringInfoChar(&json, ':');
		if (pairs[i].value)
			escape_json(&json, pairs[i].value);
		else
			appendStringInfoString(&json, "null");
	}
	appendStringInfoChar(&json, '}');
	append_string(buf, json.data, quote);
	pfree(json.data);
}

/*
 * What the connector writes for a TOASTed value of type typid that an
 * update left unchanged: the placeholder, as the type's converter takes
 * it (bytes: its bytes; arrays of text, bytes, integers, dates and UUIDs:
 * one element made of it; hstore: a map of it to itself).
 */
static void
append_unavailable(StringInfo buf, Oid typid, int32 typmod, const DebeziumOptions *options)
{
	Encoding	enc = encoding_of(&typid, &typmod);
	Oid			elemtype = get_element_type(typid);

	if (enc == ENC_BYTES)
		append_base64(buf, UNAVAILABLE, strlen(UNAVAILABLE), true);
	else if (enc == ENC_HSTORE && options->hstore_json)
		escape_json(buf, "{\"" UNAVAILABLE "\":\"" UNAVAILABLE "\"}");
	else if (enc != ENC_ARRAY)
		escape_json(buf, UNAVAILABLE);
	else if (elemtype == INT4OID || elemtype == INT8OID || elemtype == DATEOID)
	{
		/* the placeholder's bytes, as numbers */
		const char *placeholder = UNAVAILABLE;

		appendStringInfoChar(buf, '[');
		for (int i = 0; placeholder[i]; i++)
			appendStringInfo(buf, "%s%d", i > 0 ? "," : "", placeholder[i]);
		appendStringInfoChar(buf, ']');
	}
	else if (elemtype == BYTEAOID)
	{
		appendStringInfoChar(buf, '[');
		append_base64(buf, UNAVAILABLE, strlen(UNAVAILABLE), true);
		appendStringInfoChar(buf, ']');
	}
	else if (elemtype == UUIDOID)
	{
		/* Java's UUID.nameUUIDFromBytes of the placeholder: MD5, version 3 */
		uint8		md5[16];
		const char *errstr;

		if (!pg_md5_binary(UNAVAILABLE, strlen(UNAVAILABLE), md5, &errstr))
			elog(ERROR, "could not compute an MD5 hash: %s", errstr);
		md5[6] = (md5[6] & 0x0f) | 0x30;
		md5[8] = (md5[8] & 0x3f) | 0x80;
		appendStringInfoString(buf, "[\"");
		for (int i = 0; i < 16; i++)
			appendStringInfo(buf, "%s%02x", i == 4 || i == 6 || i == 8 || i == 10 ? "-" : "",
							 md5[i]);
		appendStringInfoString(buf, "\"]");
	}
	else if (elemtype == TEXTOID || elemtype == VARCHAROID || elemtype == BPCHAROID ||
			 elemtype == JSONOID || elemtype == JSONBOID)
		appendStringInfoString(buf, "[\"" UNAVAILABLE "\"]");
	else
		escape_json(buf, UNAVAILABLE);
}

/*
 * A value of base type typid, written as enc says; strings quoted unless
 * quote is false.
 */
static void
append_encoded(StringInfo buf, Datum value, Oid typid, int32 typmod, Encoding enc,
			   const DebeziumOptions *options, bool quote)
{
	switch (enc)
	{
		case ENC_BOOL:
			appendStringInfoString(buf, DatumGetBool(value) ? "true" : "false");
			break;
		case ENC_INTEGER:
			if (typid == INT2OID)
				append_int64(buf, DatumGetInt16(value));
			else if (typid == INT4OID)
				append_int64(buf, DatumGetInt32(value));
			else if (typid == INT8OID)
				append_int64(buf, DatumGetInt64(value));
			else
				append_int64(buf, DatumGetObjectId(value));
			break;
		case ENC_FLOAT4:
			append_java_number(buf, DatumGetFloat4(value), true, quote);
			break;
		case ENC_FLOAT8:
			append_java_number(buf, DatumGetFloat8(value), false, quote);
			break;
		case ENC_MONEY:
			append_money(buf, DatumGetCash(value), options, quote);
			break;
		case ENC_NUMERIC:
			append_numeric(buf, value, typmod, options, quote);
			break;
		case ENC_HSTORE:
			if (options->hstore_json)
				append_hstore(buf, value, typid, quote);
			else
				append_string(buf, type_text(value, typid), quote);
			break;
		case ENC_STRING:
		case ENC_TEXT:
			append_string(buf, type_text(value, typid), quote);
			break;
		case ENC_BYTES:
			{
				bytea	   *b = DatumGetByteaPP(value);

				append_base64(buf, VARDATA_ANY(b), VARSIZE_ANY_EXHDR(b), quote);
			}
			break;
		case ENC_DATE:
			{
				DateADT		d = DatumGetDateADT(value);

				if (DATE_NOT_FINITE(d))
					append_int64(buf, d);
				else
					append_int64(buf, (int) d + (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE));
			}
			break;
		case ENC_TIME:
			{
				TimeADT		t = DatumGetTimeADT(value);

				append_int64(buf, typmod >= 0 && typmod <= 3 ? t / 1000 : t);
			}
			break;
		case ENC_TIMETZ:
			append_timetz(buf, DatumGetTimeTzADTP(value), quote);
			break;
		case ENC_TIMESTAMP:
			{
				Timestamp	ts = DatumGetTimestamp(value);
				int64		us;

				if (TIMESTAMP_IS_NOEND(ts))
					us = INFINITY_TIMESTAMP_US;
				else if (TIMESTAMP_IS_NOBEGIN(ts))
					us = MINUS_INFINITY_TIMESTAMP_US;
				else
					us = ts + UNIX_EPOCH_OFFSET_US;
				if (typmod >= 0 && typmod <= 3)
					us = us / 1000 - (us % 1000 < 0 ? 1 : 0);
				append_int64(buf, us);
			}
			break;
		case ENC_TIMESTAMPTZ:
			append_timestamptz(buf, DatumGetTimestampTz(value), typmod, quote);
			break;
		case ENC_INTERVAL:
			append_interval(buf, DatumGetIntervalP(value));
			break;
		case ENC_BIT:
			append_bits(buf, DatumGetVarBitP(value), typmod, quote);
			break;
		case ENC_POINT:
			append_point(buf, DatumGetPointP(value));
			break;
		case ENC_ARRAY:
			append_array(buf, value, typid, typmod, options);
			break;
	}
}

/*
 * A column value of type typid (typmod: the column's) as the connector
 * writes it in JSON.
 */
static void
append_value(StringInfo buf, Datum value, bool isnull, Oid typid, int32 typmod,
			 const DebeziumOptions *options)
{
	Encoding	enc;

	if (isnull)
	{
		appendStringInfoString(buf, "null");
		return;
	}
	enc = encoding_of(&typid, &typmod);
	append_encoded(buf, value, typid, typmod, enc, options, true);
}

/*
 * The default of column attr (of attribute number attnum) that the
 * connector has in its schema, with options; NULL if none.  A numeric
 * without a scale has none in precise mode: its VariableScaleDecimal is a
 * struct, which the connector gives no default.
 */
static const DebeziumDefault *
column_default(const DebeziumOptions *options, Form_pg_attribute attr, int attnum)
{
	const DebeziumDefault *d;

	if (options->defaults == NULL || attnum > options->defaults->natts)
		return NULL;
	d = &options->defaults->columns[attnum - 1];
	if (!d->has ||
		(attr->atttypid == NUMERICOID && attr->atttypmod < 0 &&
		 options->decimals == DEBEZIUM_DECIMALS_PRECISE))
		return NULL;
	return d;
}

/*
 * A default of a column of type typid (typmod: the column's), as a value
 * of the column is written.
 */
static void
append_default(StringInfo buf, const DebeziumDefault *d, Oid typid, int32 typmod,
			   const DebeziumOptions *options)
{
	if (d->string != NULL)
		escape_json(buf, d->string);
	else
		append_value(buf, d->value, false, typid, typmod, options);
}

/*
 * A column's value in a row, attr of attribute number attnum: a null as
 * its default where the connector's converters write it so, with
 * replace.null.with.default, or for a NOT NULL column whatever the
 * setting (the connector fills a NOT NULL column's null, in a delete's
 * before, with its default before the converter sees it).
 */
static void
append_column(StringInfo buf, Datum value, bool isnull, Form_pg_attribute attr, int attnum,
			  const DebeziumOptions *options)
{
	const DebeziumDefault *d;

	if (isnull && (options->replace_nulls || attr->attnotnull) &&
		(d = column_default(options, attr, attnum)) != NULL)
		append_default(buf, d, attr->atttypid, attr->atttypmod, options);
	else
		append_value(buf, value, isnull, attr->atttypid, attr->atttypmod, options);
}

/*
 * A value of type typid (typmod: its column's) as the connector writes it
 * in JSON: for the router's keys.
 */
void
outbox_debezium_column(StringInfo buf, const DebeziumOptions *options,
					   Datum value, bool isnull, Oid typid, int32 typmod)
{
	append_value(buf, value, isnull, typid, typmod, options);
}

/*
 * A column value as text, for a Kafka key or header: a string as it is,
 * anything else as its JSON (what Kafka Connect's StringConverter and
 * SimpleHeaderConverter write).  palloc'd.
 */
char *
outbox_debezium_text(Datum value, Oid typid, int32 typmod)
{
	StringInfoData buf;
	Encoding	enc = encoding_of(&typid, &typmod);

	initStringInfo(&buf);
	append_encoded(&buf, value, typid, typmod, enc, &text_options, false);
	return buf.data;
}

/*
 * A Kafka Connect schema as the JSON converter writes it (asJsonSchema):
 * type, then inner (the "fields" or "items" member, if not NULL),
 * optional, and name, version, doc, parameters and default (JSON) where
 * given; then "field" for the field of a struct it is.
 */
static void
append_schema(StringInfo buf, const char *type, const char *inner, bool optional,
			  const char *name, int version, const char *doc, const char *parameters,
			  const char *deflt, const char *field)
{
	appendStringInfo(buf, "{\"type\":\"%s\"", type);
	if (inner)
		appendStringInfo(buf, ",%s", inner);
	appendStringInfo(buf, ",\"optional\":%s", optional ? "true" : "false");
	if (name)
	{
		appendStringInfoString(buf, ",\"name\":");
		escape_json(buf, name);
	}
	if (version > 0)
		appendStringInfo(buf, ",\"version\":%d", version);
	if (doc)
		appendStringInfo(buf, ",\"doc\":\"%s\"", doc);
	if (parameters)
		appendStringInfo(buf, ",\"parameters\":%s", parameters);
	if (deflt)
		appendStringInfo(buf, ",\"default\":%s", deflt);
	if (field)
	{
		appendStringInfoString(buf, ",\"field\":");
		escape_json(buf, field);
	}
	appendStringInfoChar(buf, '}');
}

/*
 * The allowed values of an enum, in order, separated by commas, as the
 * connector's io.debezium.data.Enum names them.
 */
static char *
enum_values(Oid typid)
{
	CatCList   *list = SearchSysCacheList1(ENUMTYPOIDNAME, ObjectIdGetDatum(typid));
	HeapTuple  *members = palloc(Max(list->n_members, 1) * sizeof(HeapTuple));
	StringInfoData values;

	for (int i = 0; i < list->n_members; i++)
	{
		HeapTuple	tuple = &list->members[i]->tuple;
		int			j = i;

		/* insertion sort by enumsortorder: enums are short */
		while (j > 0 &&
			   ((Form_pg_enum) GETSTRUCT(members[j - 1]))->enumsortorder >
			   ((Form_pg_enum) GETSTRUCT(tuple))->enumsortorder)
		{
			members[j] = members[j - 1];
			j--;
		}
		members[j] = tuple;
	}
	initStringInfo(&values);
	for (int i = 0; i < list->n_members; i++)
		appendStringInfo(&values, "%s%s", i > 0 ? "," : "",
						 NameStr(((Form_pg_enum) GETSTRUCT(members[i]))->enumlabel));
	ReleaseCatCacheList(list);
	return values.data;
}

/*
 * The schema of a column of type typid (typmod: the column's), as the
 * connector gives it (PostgresValueConverter.schemaBuilder, with its
 * default settings but decimal.handling.mode), field being its name in
 * the struct (NULL for an array's items), with the default deflt (NULL:
 * none).
 */
static void
append_type_schema(StringInfo buf, Oid typid, int32 typmod, bool optional,
				   const char *field, const DebeziumDefault *deflt,
				   const DebeziumOptions *options)
{
	Oid			coltype = typid;
	int32		coltypmod = typmod;
	Encoding	enc = encoding_of(&typid, &typmod);
	StringInfoData default_json = {0};
	const char *type = "string";
	const char *name = NULL;
	const char *doc = NULL;
	char	   *inner = NULL;
	char	   *parameters = NULL;

	switch (enc)
	{
		case ENC_BOOL:
			type = "boolean";
			break;
		case ENC_INTEGER:
			type = typid == INT2OID ? "int16" : typid == INT4OID ? "int32" : "int64";
			break;
		case ENC_FLOAT4:
			type = "float";
			break;
		case ENC_FLOAT8:
			type = "double";
			break;
		case ENC_NUMERIC:
		case ENC_MONEY:
			if (options->decimals == DEBEZIUM_DECIMALS_DOUBLE)
				type = "double";
			else if (options->decimals == DEBEZIUM_DECIMALS_PRECISE && enc == ENC_MONEY)
			{
				type = "bytes";
				name = "org.apache.kafka.connect.data.Decimal";
				parameters = psprintf("{\"scale\":\"%d\"}", MONEY_FRACTION_DIGITS);
			}
			else if (options->decimals == DEBEZIUM_DECIMALS_PRECISE && typmod < 0)
			{
				type = "struct";
				name = "io.debezium.data.VariableScaleDecimal";
				doc = "Variable scaled decimal";
				inner = "\"fields\":[{\"type\":\"int32\",\"optional\":false,\"field\":\"scale\"},"
					"{\"type\":\"bytes\",\"optional\":false,\"field\":\"value\"}]";
			}
			else if (options->decimals == DEBEZIUM_DECIMALS_PRECISE)
			{
				int			precision;
				int			scale;

				decimal_scale(typmod, options, &precision, &scale);
				type = "bytes";
				name = "org.apache.kafka.connect.data.Decimal";
				parameters = psprintf("{\"scale\":\"%d\",\"connect.decimal.precision\":\"%d\"}",
									  scale, precision);
			}
			break;
		case ENC_HSTORE:
			if (options->hstore_json)
				name = "io.debezium.data.Json";
			break;
		case ENC_STRING:
			if (typid == TSVECTOROID && options->named_types)
				name = "io.debezium.data.Tsvector";
			else if (typid == UUIDOID)
				name = "io.debezium.data.Uuid";
			else if (typid == JSONOID || typid == JSONBOID)
				name = "io.debezium.data.Json";
			else if (typid == XMLOID)
				name = "io.debezium.data.Xml";
			else if (type_is_enum(typid))
			{
				StringInfoData p;

				name = "io.debezium.data.Enum";
				initStringInfo(&p);
				appendStringInfoString(&p, "{\"allowed\":");
				escape_json(&p, enum_values(typid));
				appendStringInfoChar(&p, '}');
				parameters = p.data;
			}
			break;
		case ENC_TEXT:
			if (options->named_types && type_named(typid, "ltree"))
				name = "io.debezium.data.Ltree";
			break;
		case ENC_TIMETZ:
			name = "io.debezium.time.ZonedTime";
			break;
		case ENC_TIMESTAMPTZ:
			name = "io.debezium.time.ZonedTimestamp";
			break;
		case ENC_BYTES:
			type = "bytes";
			break;
		case ENC_DATE:
			type = "int32";
			name = "io.debezium.time.Date";
			break;
		case ENC_TIME:
			type = typmod >= 0 && typmod <= 3 ? "int32" : "int64";
			name = typmod >= 0 && typmod <= 3 ? "io.debezium.time.Time" : "io.debezium.time.MicroTime";
			break;
		case ENC_TIMESTAMP:
			type = "int64";
			name = typmod >= 0 && typmod <= 3 ? "io.debezium.time.Timestamp" :
				"io.debezium.time.MicroTimestamp";
			break;
		case ENC_INTERVAL:
			type = "int64";
			name = "io.debezium.time.MicroDuration";
			break;
		case ENC_BIT:
			if (typmod == 1)
				type = "boolean";
			else
			{
				type = "bytes";
				name = "io.debezium.data.Bits";
				parameters = psprintf("{\"length\":\"%d\"}", typmod < 0 ? PG_INT32_MAX : typmod);
			}
			break;
		case ENC_POINT:
			type = "struct";
			name = "io.debezium.data.geometry.Point";
			doc = "Geometry (POINT)";
			inner = "\"fields\":[{\"type\":\"double\",\"optional\":false,\"field\":\"x\"},"
				"{\"type\":\"double\",\"optional\":false,\"field\":\"y\"},"
				"{\"type\":\"bytes\",\"optional\":true,\"field\":\"wkb\"},"
				"{\"type\":\"int32\",\"optional\":true,\"field\":\"srid\"}]";
			break;
		case ENC_ARRAY:
			{
				StringInfoData items;
				Oid			elemtype = get_element_type(typid);

				initStringInfo(&items);
				appendStringInfoString(&items, "\"items\":");
				/* an enum's are required, the others optional */
				append_type_schema(&items, elemtype, typmod,
								   !(options->named_types && type_is_enum(getBaseType(elemtype))),
								   NULL, NULL, options);
				type = "array";
				inner = items.data;
			}
			break;
	}
	if (deflt != NULL)
	{
		initStringInfo(&default_json);
		append_default(&default_json, deflt, coltype, coltypmod, options);
	}
	append_schema(buf, type, inner, optional, name, name ? 1 : 0, doc, parameters,
				  default_json.data, field);
}

/*
 * The schema the connector gives a value of type typid (typmod: its
 * column's), as the JSON converter writes it: for the router's keys and
 * values.
 */
void
outbox_debezium_schema(StringInfo buf, const DebeziumOptions *options,
					   Oid typid, int32 typmod, bool optional)
{
	append_type_schema(buf, typid, typmod, optional, NULL, NULL, options);
}

/*
 * The schema of a row of tupdesc (the columns attnums say, or all of
 * them), a struct called name.
 */
static void
append_row_schema(StringInfo buf, TupleDesc tupdesc, int nkeys, const AttrNumber *attnums,
				  const char *name, bool optional, const char *field,
				  const DebeziumOptions *options)
{
	StringInfoData fields;
	bool		first = true;

	initStringInfo(&fields);
	appendStringInfoString(&fields, "\"fields\":[");
	for (int i = 0; i < (attnums ? nkeys : tupdesc->natts); i++)
	{
		AttrNumber	attno = attnums ? attnums[i] : i + 1;
		Form_pg_attribute attr = TupleDescAttr(tupdesc, attno - 1);

		if (attr->attisdropped)
			continue;
		if (!first)
			appendStringInfoChar(&fields, ',');
		first = false;
		append_type_schema(&fields, attr->atttypid, attr->atttypmod, !attr->attnotnull,
						   NameStr(attr->attname), column_default(options, attr, attno),
						   options);
	}
	appendStringInfoChar(&fields, ']');
	append_schema(buf, "struct", fields.data, optional, name, 0, NULL, NULL, NULL, field);
}

/*
 * The schema of a change event's value, the connector's envelope
 * (Envelope, TableSchemaBuilder, PostgresSourceInfoStructMaker,
 * SchemaFactory): before and after, source, transaction, op and the times.
 */
static void
append_envelope_schema(StringInfo buf, const char *topic, TupleDesc tupdesc,
					   const DebeziumOptions *options)
{
	char	   *value = psprintf("%s.Value", topic);
	StringInfoData fields;

	initStringInfo(&fields);
	appendStringInfoString(&fields, "\"fields\":[");
	append_row_schema(&fields, tupdesc, 0, NULL, value, true, "before", options);
	appendStringInfoChar(&fields, ',');
	append_row_schema(&fields, tupdesc, 0, NULL, value, true, "after", options);
	appendStringInfoString(&fields,
						   ",{\"type\":\"struct\",\"fields\":["
						   "{\"type\":\"string\",\"optional\":false,\"field\":\"version\"},"
						   "{\"type\":\"string\",\"optional\":false,\"field\":\"connector\"},"
						   "{\"type\":\"string\",\"optional\":false,\"field\":\"name\"},"
						   "{\"type\":\"int64\",\"optional\":false,\"field\":\"ts_ms\"},"
						   "{\"type\":\"string\",\"optional\":true,\"name\":\"io.debezium.data.Enum\","
						   "\"version\":1,\"parameters\":{\"allowed\":"
						   "\"true,first,first_in_data_collection,last_in_data_collection,last,false,incremental\"},"
						   "\"default\":\"false\",\"field\":\"snapshot\"},"
						   "{\"type\":\"string\",\"optional\":false,\"field\":\"db\"},"
						   "{\"type\":\"string\",\"optional\":true,\"field\":\"sequence\"},"
						   "{\"type\":\"int64\",\"optional\":true,\"field\":\"ts_us\"},"
						   "{\"type\":\"int64\",\"optional\":true,\"field\":\"ts_ns\"},"
						   "{\"type\":\"string\",\"optional\":false,\"field\":\"schema\"},"
						   "{\"type\":\"string\",\"optional\":false,\"field\":\"table\"},"
						   "{\"type\":\"int64\",\"optional\":true,\"field\":\"txId\"},"
						   "{\"type\":\"int64\",\"optional\":true,\"field\":\"lsn\"},"
						   "{\"type\":\"int64\",\"optional\":true,\"field\":\"xmin\"},"
						   "{\"type\":\"string\",\"optional\":true,\"field\":\"origin\"},"
						   "{\"type\":\"int64\",\"optional\":true,\"field\":\"origin_lsn\"}],"
						   "\"optional\":false,\"name\":\"io.debezium.connector.postgresql.Source\","
						   "\"version\":1,\"field\":\"source\"},"
						   "{\"type\":\"struct\",\"fields\":["
						   "{\"type\":\"string\",\"optional\":false,\"field\":\"id\"},"
						   "{\"type\":\"int64\",\"optional\":false,\"field\":\"total_order\"},"
						   "{\"type\":\"int64\",\"optional\":false,\"field\":\"data_collection_order\"}],"
						   "\"optional\":true,\"name\":\"event.block\",\"version\":1,\"field\":\"transaction\"},"
						   "{\"type\":\"string\",\"optional\":false,\"field\":\"op\"},"
						   "{\"type\":\"int64\",\"optional\":true,\"field\":\"ts_ms\"},"
						   "{\"type\":\"int64\",\"optional\":true,\"field\":\"ts_us\"},"
						   "{\"type\":\"int64\",\"optional\":true,\"field\":\"ts_ns\"}]");
	append_schema(buf, "struct", fields.data, false, psprintf("%s.Envelope", topic), 2,
				  NULL, NULL, NULL, NULL);
}

/*
 * A row as a JSON object of its columns, or null; the columns that
 * unavailable says (if not NULL) as the placeholder of an unchanged
 * TOASTed value.
 */
static void
append_row(StringInfo buf, const DebeziumOptions *options, TupleDesc tupdesc,
		   HeapTuple tuple, const bool *unavailable)
{
	bool		first = true;

	if (tuple == NULL)
	{
		appendStringInfoString(buf, "null");
		return;
	}
	appendStringInfoChar(buf, '{');
	for (int i = 0; i < tupdesc->natts; i++)
	{
		Form_pg_attribute attr = TupleDescAttr(tupdesc, i);
		Datum		value;
		bool		isnull;

		if (attr->attisdropped)
			continue;
		if (!first)
			appendStringInfoChar(buf, ',');
		first = false;
		escape_json(buf, NameStr(attr->attname));
		appendStringInfoChar(buf, ':');
		if (unavailable != NULL && unavailable[i])
		{
			append_unavailable(buf, attr->atttypid, attr->atttypmod, options);
			continue;
		}
		value = heap_getattr(tuple, i + 1, tupdesc, &isnull);
		append_column(buf, value, isnull, attr, i + 1, options);
	}
	appendStringInfoChar(buf, '}');
}

/*
 * The key of a row: a JSON object of its key columns, in key order; with
 * schemas, {"schema":...,"payload":...}, the schema <topic>.Key.
 */
void
outbox_debezium_key(StringInfo buf, const DebeziumOptions *options, const char *topic,
					TupleDesc tupdesc, HeapTuple tuple, int nkeys, const AttrNumber *attnums)
{
	if (options->schemas)
	{
		appendStringInfoString(buf, "{\"schema\":");
		outbox_debezium_key_schema(buf, options, topic, tupdesc, nkeys, attnums);
		appendStringInfoString(buf, ",\"payload\":");
	}
	appendStringInfoChar(buf, '{');
	for (int i = 0; i < nkeys; i++)
	{
		Form_pg_attribute attr = TupleDescAttr(tupdesc, attnums[i] - 1);
		Datum		value;
		bool		isnull;

		if (i > 0)
			appendStringInfoChar(buf, ',');
		escape_json(buf, NameStr(attr->attname));
		appendStringInfoChar(buf, ':');
		value = heap_getattr(tuple, attnums[i], tupdesc, &isnull);
		append_column(buf, value, isnull, attr, attnums[i], options);
	}
	appendStringInfoChar(buf, '}');
	if (options->schemas)
		appendStringInfoChar(buf, '}');
}

/*
 * The schema of the keys of a table's change events on topic, and of
 * their values, as the JSON converter writes them: what a converter
 * registers when the table is attached.
 */
void
outbox_debezium_key_schema(StringInfo buf, const DebeziumOptions *options, const char *topic,
						   TupleDesc tupdesc, int nkeys, const AttrNumber *attnums)
{
	append_row_schema(buf, tupdesc, nkeys, attnums, psprintf("%s.Key", topic), false,
					  NULL, options);
}

void
outbox_debezium_value_schema(StringInfo buf, const DebeziumOptions *options, const char *topic,
							 TupleDesc tupdesc)
{
	append_envelope_schema(buf, topic, tupdesc, options);
}

/*
 * ts_ms, ts_us and ts_ns of a time, as fields.
 */
static void
append_times(StringInfo buf, TimestampTz t, bool ms, bool us_ns)
{
	int64		us = t + UNIX_EPOCH_OFFSET_US;

	if (ms)
	{
		appendStringInfoString(buf, "\"ts_ms\":");
		append_int64(buf, us / 1000 - (us % 1000 < 0 ? 1 : 0));
	}
	if (ms && us_ns)
		appendStringInfoChar(buf, ',');
	if (us_ns)
	{
		appendStringInfoString(buf, "\"ts_us\":");
		append_int64(buf, us);
		appendStringInfoString(buf, ",\"ts_ns\":");
		append_int64(buf, us * 1000);
	}
}

/*
 * The name of the current database, read once: it cannot be renamed while
 * a session is connected to it.
 */
static const char *
database_name(void)
{
	static char name[NAMEDATALEN];

	if (name[0] == '\0')
	{
		char	   *current = get_database_name(MyDatabaseId);

		if (current == NULL)
			elog(ERROR, "cache lookup failed for database %u", MyDatabaseId);
		strlcpy(name, current, sizeof(name));
		pfree(current);
	}
	return name;
}

/*
 * The value of a change event: op c, u, d, r or t; before and after as
 * the op has them (both NULL for a truncate); the columns of after that
 * unavailable says (if not NULL) as unchanged TOASTed values; with
 * schemas, {"schema":...,"payload":...}.  source.txId is the current
 * transaction's id, as 32-bit, as the connector reports it; source.lsn the
 * end of the WAL written so far, which for each row grows with each change
 * (a later change of a row waits for the earlier one to commit), but is
 * not the position of the change's own record.
 */
void
outbox_debezium_envelope(StringInfo buf, const DebeziumOptions *options,
						 const DebeziumSource *source, char op, TupleDesc tupdesc,
						 HeapTuple before, HeapTuple after, const bool *unavailable)
{
	TimestampTz now = GetCurrentTimestamp();

	if (options->schemas)
	{
		appendStringInfoString(buf, "{\"schema\":");
		append_envelope_schema(buf, outbox_debezium_topic(source->prefix, source->schema,
														  source->table),
							   tupdesc, options);
		appendStringInfoString(buf, ",\"payload\":");
	}
	appendStringInfoString(buf, "{\"before\":");
	append_row(buf, options, tupdesc, before, NULL);
	appendStringInfoString(buf, ",\"after\":");
	append_row(buf, options, tupdesc, after, unavailable);
	appendStringInfoString(buf, ",\"source\":{\"version\":\"" OUTBOX_DEBEZIUM_VERSION "\""
						   ",\"connector\":\"postgresql\",\"name\":");
	escape_json(buf, source->prefix);
	appendStringInfoChar(buf, ',');
	append_times(buf, source->changed_at, true, false);
	appendStringInfoString(buf, ",\"snapshot\":");
	escape_json(buf, source->snapshot);
	appendStringInfoString(buf, ",\"db\":");
	escape_json(buf, database_name());
	appendStringInfoString(buf, ",\"sequence\":null,");
	append_times(buf, source->changed_at, false, true);
	appendStringInfoString(buf, ",\"schema\":");
	escape_json(buf, source->schema);
	appendStringInfoString(buf, ",\"table\":");
	escape_json(buf, source->table);
	appendStringInfoString(buf, ",\"txId\":");
	append_uint64(buf, XidFromFullTransactionId(GetTopFullTransactionId()));
	appendStringInfoString(buf, ",\"lsn\":");
	append_uint64(buf, GetXLogInsertRecPtr());
	appendStringInfoString(buf, ",\"xmin\":null,\"origin\":null,\"origin_lsn\":null}"
						   ",\"transaction\":null,\"op\":\"");
	appendStringInfoChar(buf, op);
	appendStringInfoString(buf, "\",");
	append_times(buf, now, true, true);
	appendStringInfoChar(buf, '}');
	if (options->schemas)
		appendStringInfoChar(buf, '}');
}

/*
 * The topic of a table's change events, <prefix>.<schema>.<table>, each
 * character that Kafka refuses in a topic name replaced by "_", as the
 * connector does.  palloc'd.
 */
char *
outbox_debezium_topic(const char *prefix, const char *schema, const char *table)
{
	char	   *name = psprintf("%s.%s.%s", prefix, schema, table);
	StringInfoData topic;

	initStringInfo(&topic);
	for (const char *c = name; *c;)
	{
		int			len = pg_mblen(c);

		if (len == 1 && ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
						 (*c >= '0' && *c <= '9') || *c == '.' || *c == '_' || *c == '-'))
			appendStringInfoChar(&topic, *c);
		else
			appendStringInfoChar(&topic, '_');
		c += len;
	}
	pfree(name);
	return topic.data;
}

/*
 * Does a value of type typid go through its type's text, which settings
 * may change?
 */
static bool
needs_settings(Oid typid, int32 typmod)
{
	Encoding	enc = encoding_of(&typid, &typmod);

	if (enc == ENC_ARRAY)
		return needs_settings(get_element_type(typid), typmod);
	return enc == ENC_TEXT;
}

/*
 * Does the text of a value of one of the columns of tupdesc depend on
 * settings that outbox_debezium_pin_settings pins?
 */
bool
outbox_debezium_needs_settings(TupleDesc tupdesc)
{
	for (int i = 0; i < tupdesc->natts; i++)
	{
		Form_pg_attribute attr = TupleDescAttr(tupdesc, i);

		if (!attr->attisdropped && needs_settings(attr->atttypid, attr->atttypmod))
			return true;
	}
	return false;
}

/*
 * The settings that the text of some types depends on, pinned to fixed
 * values while the events of a row with such columns are built (tupdesc
 * NULL: whatever the columns); returns the GUC nest level to give back to
 * outbox_debezium_unpin_settings, or -1 if no column needs them.
 */
int
outbox_debezium_pin_settings(TupleDesc tupdesc)
{
	static const char *const settings[][2] = {
		{"DateStyle", "ISO, MDY"},
		{"IntervalStyle", "postgres"},
		{"TimeZone", "UTC"},
		{"extra_float_digits", "1"},
		{"bytea_output", "hex"},
	};
	int			nestlevel;

	if (tupdesc != NULL && !outbox_debezium_needs_settings(tupdesc))
		return -1;
	nestlevel = NewGUCNestLevel();
	for (int i = 0; i < lengthof(settings); i++)
		(void) set_config_option(settings[i][0], settings[i][1], PGC_USERSET,
								 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	return nestlevel;
}

/*
 * Give back the settings pinned by outbox_debezium_pin_settings.
 */
void
outbox_debezium_unpin_settings(int nestlevel)
{
	if (nestlevel >= 0)
		AtEOXact_GUC(true, nestlevel);
}
