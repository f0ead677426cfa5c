/*-------------------------------------------------------------------------
 *
 * event.c
 *		What an event is made of on the wire: its text as UTF-8, its
 *		headers, and the size of its Kafka record.
 *
 * outbox_enqueue and the capture trigger use these to refuse what could
 * not be published; the worker uses the same functions to unpack a claimed
 * event, and turns whatever they still refuse into that event's failure
 * alone.  None of them raises an error about the data: each returns what
 * is wrong, for the caller to report.
 *
 * src/event.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "mb/pg_wchar.h"
#include "utils/jsonb.h"

#include "outbox.h"

/*
 * Bytes that a Kafka record header costs beside its name and value: two
 * varint lengths, at most 5 bytes each.
 */
#define HEADER_OVERHEAD 10

/*
 * Text in the server encoding as a NUL-terminated UTF-8 copy; *utf8_len
 * gets its length.  NULL if it has a character that UTF-8 cannot hold or,
 * in a SQL_ASCII database, bytes that are not UTF-8.
 */
char *
outbox_to_utf8(const char *str, int len, int *utf8_len)
{
	int			encoding = GetDatabaseEncoding();
	char	   *utf8;

	if (encoding == PG_UTF8 || encoding == PG_SQL_ASCII)
	{
		if (encoding == PG_SQL_ASCII && !pg_verify_mbstr(PG_UTF8, str, len, true))
			return NULL;
		*utf8_len = len;
		return pnstrdup(str, len);
	}

	utf8 = palloc((Size) len * MAX_CONVERSION_GROWTH + 1);
	if (pg_do_encoding_conversion_buf(FindDefaultConversionProc(encoding, PG_UTF8),
									  encoding, PG_UTF8,
									  (unsigned char *) str, len,
									  (unsigned char *) utf8,
									  len * MAX_CONVERSION_GROWTH + 1,
									  true) != len)
	{
		pfree(utf8);
		return NULL;
	}
	*utf8_len = strlen(utf8);
	return utf8;
}

/*
 * Walk a headers object into ev's name and value arrays, as UTF-8.
 * Returns NULL, or what is wrong with the headers (ev is then left
 * half-filled); *not_utf8 says whether that is a character UTF-8 cannot
 * hold.  "event_id" is reserved: every record carries the event's
 * own id under that name.
 */
const char *
outbox_unpack_headers(Jsonb *headers, OutboxEvent *ev, bool *not_utf8)
{
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken r;
	int			n;
	int			len;

	ev->nheaders = 0;
	ev->headers_bytes = 0;
	*not_utf8 = false;
	if (!JB_ROOT_IS_OBJECT(headers) || JB_ROOT_IS_SCALAR(headers))
		return "Kafka headers are given as a JSON object {\"name\": \"value\", ...}.";

	n = JB_ROOT_COUNT(headers);
	ev->header_names = palloc(Max(n, 1) * sizeof(char *));
	ev->header_values = palloc(Max(n, 1) * sizeof(char *));
	it = JsonbIteratorInit(&headers->root);
	while ((r = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		char	   *utf8;

		if (r != WJB_KEY && r != WJB_VALUE)
			continue;
		if (r == WJB_VALUE && v.type != jbvString)
			return psprintf("The value of header \"%s\" is not a JSON string.",
							ev->header_names[ev->nheaders]);
		utf8 = outbox_to_utf8(v.val.string.val, v.val.string.len, &len);
		*not_utf8 = utf8 == NULL;
		if (utf8 == NULL)
			return psprintf("A header %s has a character that cannot be converted to UTF-8.",
							r == WJB_KEY ? "name" : "value");
		ev->headers_bytes += len;
		if (r == WJB_KEY)
		{
			if (strcmp(utf8, "event_id") == 0)
				return "The header name \"event_id\" is reserved: every record carries the event's id under it.";
			ev->header_names[ev->nheaders] = utf8;
			ev->headers_bytes += HEADER_OVERHEAD;
		}
		else
			ev->header_values[ev->nheaders++] = utf8;
	}
	return NULL;
}

/*
 * The bytes of an event's Kafka record that count against
 * outbox.max_message_bytes: payload, key and headers.  The producer's own
 * limit leaves room for the event_id header and the record's framing
 * (kafka.c), so what this accepts librdkafka accepts too.
 */
int64
outbox_record_bytes(const OutboxEvent *ev)
{
	return (int64) ev->payload_len + ev->key_len + ev->headers_bytes;
}
