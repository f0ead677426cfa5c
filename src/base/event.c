/*-------------------------------------------------------------------------
 *
 * event.c
 *		What an event is made of: the row as stored, and its parts on the
 *		wire (its text as UTF-8, its headers, the size of its Kafka record).
 *
 * outbox_enqueue and the capture trigger use these to refuse what could
 * not be published; the worker uses the same functions to unpack a claimed
 * event, and turns whatever they still refuse into that event's failure
 * alone.  None of them raises an error about the data: each returns what
 * is wrong, for the caller to report.
 *
 * src/base/event.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/detoast.h"
#include "access/tupdesc.h"
#include "catalog/namespace.h"
#include "common/base64.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/jsonb.h"
#include "utils/uuid.h"

#include "base/event.h"

const char *const outbox_log_column_names[OUTBOX_LOG_COLUMNS] = {
	"id", "txid", "event_id", "topic", "key", "payload", "headers", "created_at"
};

/* Kafka's own limit on topic names */
#define KAFKA_TOPIC_MAX_LENGTH 249

/*
 * What is wrong with a topic name, or NULL if Kafka would take it.
 */
const char *
outbox_topic_problem(const char *topic, int len)
{
	if (len == 0)
		return "A topic name must not be empty.";
	if (len > KAFKA_TOPIC_MAX_LENGTH)
		return "Kafka topic names are at most 249 characters.";
	if ((len == 1 && topic[0] == '.') ||
		(len == 2 && topic[0] == '.' && topic[1] == '.'))
		return "\".\" and \"..\" are not valid topic names.";
	for (int i = 0; i < len; i++)
	{
		char		c = topic[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			  (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-'))
			return "Kafka topic names may contain only ASCII letters, digits, \".\", \"_\" and \"-\".";
	}
	return NULL;
}

/*
 * Does JSON text json nest objects and arrays deeper than max_depth?
 * Looked at before the text is parsed: a parser that recursed a hundred
 * thousand levels down would stop with "stack depth limit exceeded", not
 * with what is wrong.
 */
bool
outbox_json_too_deep(const char *json, int max_depth)
{
	int			depth = 0;
	bool		in_string = false;

	for (const char *p = json; *p; p++)
	{
		if (in_string)
		{
			if (*p == '\\' && p[1] != '\0')
				p++;
			else if (*p == '"')
				in_string = false;
		}
		else if (*p == '"')
			in_string = true;
		else if ((*p == '{' || *p == '[') && ++depth > max_depth)
			return true;
		else if (*p == '}' || *p == ']')
			depth--;
	}
	return false;
}

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
 * Refuse text that cannot be published as UTF-8.
 */
void
outbox_refuse_not_utf8(const char *what)
{
	ereport(ERROR,
			(errcode(GetDatabaseEncoding() == PG_SQL_ASCII ?
					 ERRCODE_CHARACTER_NOT_IN_REPERTOIRE :
					 ERRCODE_UNTRANSLATABLE_CHARACTER),
			 errmsg("event %s cannot be converted to UTF-8", what),
			 errdetail("Kafka clients read keys, headers and text payloads as UTF-8.")));
}

/*
 * Text in the server encoding as the UTF-8 bytes that will be published.
 * In a UTF-8 database that is the text itself.
 */
bytea *
outbox_utf8_payload(text *t)
{
	char	   *utf8;
	int			len;
	bytea	   *result;

	if (GetDatabaseEncoding() == PG_UTF8)
		return (bytea *) t;		/* text and bytea share their layout */
	utf8 = outbox_to_utf8(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t), &len);
	if (utf8 == NULL)
		outbox_refuse_not_utf8("payload");
	result = (bytea *) palloc(VARHDRSZ + len);
	SET_VARSIZE(result, VARHDRSZ + len);
	memcpy(VARDATA(result), utf8, len);
	return result;
}

/*
 * Walk a headers object into ev's name and value arrays, as UTF-8.
 * Returns NULL, or what is wrong with the headers (ev is then left
 * half-filled); *not_utf8 says whether that is a character UTF-8 cannot
 * hold.  "event_id" is reserved: every record carries the event's
 * own id under that name.  OUTBOX_KEY_BASE64_HEADER is not published: it
 * sets ev->key_base64.
 */
const char *
outbox_unpack_headers(Jsonb *headers, OutboxEvent *ev, bool *not_utf8)
{
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken r;
	int			n;
	int			len;
	bool		skip_value = false;

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
		if (r == WJB_VALUE && skip_value)
		{
			skip_value = false;
			continue;
		}
		if (r == WJB_KEY && v.val.string.len == strlen(OUTBOX_KEY_BASE64_HEADER) &&
			memcmp(v.val.string.val, OUTBOX_KEY_BASE64_HEADER, v.val.string.len) == 0)
		{
			ev->key_base64 = true;
			skip_value = true;
			continue;
		}
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
			ev->headers_bytes += OUTBOX_HEADER_OVERHEAD;
		}
		else
			ev->header_values[ev->nheaders++] = utf8;
	}
	return NULL;
}

/*
 * Replace ev's key, base64 as OUTBOX_KEY_BASE64_HEADER says, with its
 * bytes; NULL, or what is wrong.
 */
const char *
outbox_decode_key(OutboxEvent *ev)
{
	char	   *bytes = palloc(pg_b64_dec_len(ev->key_len) + 1);
	int			len = pg_b64_decode(ev->key, ev->key_len, bytes, pg_b64_dec_len(ev->key_len));

	if (len < 0)
		return "The key is not base64, which header \"" OUTBOX_KEY_BASE64_HEADER "\" says it is.";
	ev->key = bytes;
	ev->key_len = len;
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

/*
 * Keep a row of the log (or of the retry table, whose first columns are
 * the log's, txid null) in ev: copies of its values in the current memory
 * context, detoasted, and what a batch's byte limit counts of it.
 */
void
outbox_event_store(OutboxEvent *ev, TupleDesc desc, Datum *values, bool *isnull)
{
	memset(ev, 0, sizeof(*ev));
	for (int i = 0; i < OUTBOX_LOG_COLUMNS; i++)
	{
		Form_pg_attribute attr = TupleDescAttr(desc, i);

		ev->isnull[i] = isnull[i];
		if (isnull[i])
			ev->values[i] = (Datum) 0;
		else if (attr->attlen == -1)
			ev->values[i] = PointerGetDatum(PG_DETOAST_DATUM_COPY(values[i]));
		else
			ev->values[i] = datumCopy(values[i], attr->attbyval, attr->attlen);
	}
	ev->id = DatumGetInt64(ev->values[LOG_ID]);
	ev->from_log = !ev->isnull[LOG_TXID];
	ev->created_at = DatumGetTimestampTz(ev->values[LOG_CREATED_AT]);
	for (int i = LOG_KEY; i <= LOG_HEADERS; i++)
		if (!ev->isnull[i])
			ev->bytes += VARSIZE_ANY_EXHDR(DatumGetPointer(ev->values[i]));
}

/*
 * Text of a stored value as UTF-8, NUL-terminated; NULL if it cannot be
 * converted.
 */
static char *
utf8_of(Datum d, int *len)
{
	text	   *t = (text *) DatumGetPointer(d);

	return outbox_to_utf8(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t), len);
}

/* The text form of a uuid, as uuid_out writes it, into buf (37 bytes). */
static void
uuid_text(const pg_uuid_t *uuid, char *buf)
{
	static const char hex[] = "0123456789abcdef";

	for (int i = 0; i < UUID_LEN; i++)
	{
		if (i == 4 || i == 6 || i == 8 || i == 10)
			*buf++ = '-';
		*buf++ = hex[uuid->data[i] >> 4];
		*buf++ = hex[uuid->data[i] & 0x0F];
	}
	*buf = '\0';
}

/*
 * Set ev's parts on the wire from its stored row; previous, if not NULL,
 * is the event unpacked before it in the same batch.  An event that cannot
 * go on the wire (a row stored before enqueue checked the encoding) is
 * refused for good here, so that it fails alone instead of failing its
 * batch.
 */
void
outbox_event_unpack(OutboxEvent *ev, const OutboxEvent *previous)
{
	const char *problem = NULL;
	bool		not_utf8;
	int			len;

	ev->outcome = OUTBOX_IN_FLIGHT;
	uuid_text(DatumGetUUIDP(ev->values[LOG_EVENT_ID]), ev->event_id);
	/* events of a batch mostly share their topic: one copy of it */
	if (previous != NULL && previous->topic != NULL &&
		datumIsEqual(previous->values[LOG_TOPIC], ev->values[LOG_TOPIC], false, -1))
		ev->topic = previous->topic;
	else
		ev->topic = utf8_of(ev->values[LOG_TOPIC], &len);
	if (!ev->isnull[LOG_KEY])
	{
		text	   *key = DatumGetTextPP(ev->values[LOG_KEY]);

		/* a key goes out as bytes and a length: the stored text, if UTF-8 */
		if (GetDatabaseEncoding() == PG_UTF8)
		{
			ev->key = VARDATA_ANY(key);
			ev->key_len = VARSIZE_ANY_EXHDR(key);
		}
		else if ((ev->key = utf8_of(ev->values[LOG_KEY], &ev->key_len)) == NULL)
			problem = "The key cannot be converted to UTF-8.";
	}
	if (!ev->isnull[LOG_PAYLOAD])
	{
		bytea	   *payload = (bytea *) DatumGetPointer(ev->values[LOG_PAYLOAD]);

		/* the bytes as stored are the bytes published: no copy */
		ev->payload = VARDATA_ANY(payload);
		ev->payload_len = VARSIZE_ANY_EXHDR(payload);
	}
	if (!ev->isnull[LOG_HEADERS] && problem == NULL)
		problem = outbox_unpack_headers(DatumGetJsonbP(ev->values[LOG_HEADERS]),
										ev, &not_utf8);
	if (ev->topic == NULL)
		problem = "The topic cannot be converted to UTF-8.";
	if (problem == NULL && ev->key_base64 && ev->key != NULL)
		problem = outbox_decode_key(ev);

	if (problem != NULL)
	{
		ev->outcome = OUTBOX_REFUSED;
		ev->error = problem;
		ev->permanent = true;
	}
}
