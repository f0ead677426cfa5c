/*-------------------------------------------------------------------------
 *
 * outbox.c
 *		The outbox format: a payload as given to outbox_enqueue (the
 *		records of a topic without a format), and the extension's own
 *		envelope of a row's change ({"op", "before", "after", "source"}),
 *		its rows as row_to_json writes them, its key the text of the key
 *		columns.
 *
 * src/format/outbox.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/timestamp.h"

#include "base/event.h"
#include "format/format.h"
#include "format/format_internal.h"
#include "format/topics.h"

/*
 * The bytes that will be published of payload, a value of type type given
 * to outbox_enqueue: for text and jsonb their UTF-8 text, for bytea the
 * bytes as given; NULL for a tombstone.  The key is any text.
 */
static bytea *
as_given(const OutboxTopicSetting *setting, text *key, Datum payload, bool isnull,
		 Oid type, bool *json)
{
	*json = type == JSONBOID;
	if (isnull)
		return NULL;
	switch (type)
	{
		case BYTEAOID:
			return DatumGetByteaPP(payload);
		case TEXTOID:
			return outbox_utf8_payload(DatumGetTextPP(payload));
		case JSONBOID:
			{
				Jsonb	   *jb = DatumGetJsonbP(payload);
				StringInfoData buf;

				/* printed straight into a text datum */
				initStringInfo(&buf);
				appendStringInfoSpaces(&buf, VARHDRSZ);
				(void) JsonbToCString(&buf, &jb->root, VARSIZE(jb));
				SET_VARSIZE(buf.data, buf.len);
				return outbox_utf8_payload((text *) buf.data);
			}
		default:
			elog(ERROR, "outbox_enqueue called with payload of type %u", type);
			return NULL;		/* keep compiler quiet */
	}
}

/*
 * A row as a JSON object, or "null".  tupdesc must be a row type's (a
 * relation's, or blessed).
 */
static void
append_row_json(StringInfo buf, HeapTuple tuple, TupleDesc tupdesc)
{
	Datum		row;

	if (tuple == NULL)
	{
		appendStringInfoString(buf, "null");
		return;
	}
	row = heap_copy_tuple_as_datum(tuple, tupdesc);
	appendStringInfoString(buf, TextDatumGetCString(DirectFunctionCall1(row_to_json, row)));
}

/*
 * The outbox format's key of a row: the text of its one key column, or a
 * JSON array of the texts of several; no key columns, no key.
 */
static text *
outbox_format_key(const CaptureTable *table, HeapTuple tuple)
{
	StringInfoData buf;

	if (table->nkeys == 0)
		return NULL;
	if (table->nkeys == 1)
	{
		char	   *value = SPI_getvalue(tuple, table->tupdesc, table->key_attnums[0]);

		return value ? cstring_to_text(value) : NULL;
	}

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '[');
	for (int i = 0; i < table->nkeys; i++)
	{
		char	   *value = SPI_getvalue(tuple, table->tupdesc, table->key_attnums[i]);

		if (i > 0)
			appendStringInfoChar(&buf, ',');
		if (value)
			escape_json(&buf, value);
		else
			appendStringInfoString(&buf, "null");
	}
	appendStringInfoChar(&buf, ']');
	return cstring_to_text_with_len(buf.data, buf.len);
}

/*
 * The event of a change in the outbox format; see OutboxFormat.change.
 */
static List *
outbox_change(const OutboxExtension *ext, const CaptureConfig *config,
			  const CaptureTable *table, char op, HeapTuple before, HeapTuple after,
			  const char *snapshot)
{
	OutboxDraft *draft = palloc0(sizeof(OutboxDraft));
	StringInfoData payload;
	TimestampTz now = GetCurrentTimestamp();
	text	   *key = NULL;

	if (before != NULL || after != NULL)
		key = outbox_format_key(table, after ? after : before);

	initStringInfo(&payload);
	appendStringInfo(&payload, "{\"op\": \"%c\", \"before\": ", op);
	append_row_json(&payload, before, table->tupdesc);
	appendStringInfoString(&payload, ", \"after\": ");
	append_row_json(&payload, after, table->tupdesc);
	appendStringInfoString(&payload, ", \"source\": {\"schema\": ");
	escape_json(&payload, table->schema);
	appendStringInfoString(&payload, ", \"table\": ");
	escape_json(&payload, table->table);
	appendStringInfo(&payload, ", \"txid\": " UINT64_FORMAT ", \"ts_ms\": " INT64_FORMAT "}}",
					 U64FromFullTransactionId(GetTopFullTransactionId()),
					 (int64) (now / 1000 + (int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY * 1000));

	draft->topic = cstring_to_text(config->topic);
	draft->key = key;
	draft->payload = outbox_utf8_payload(cstring_to_text_with_len(payload.data, payload.len));
	draft->json = true;
	return list_make1(draft);
}

/*
 * outbox_attach's arguments after snapshot are of the debezium format: an
 * error for any given.
 */
static void
outbox_attach_options(FunctionCallInfo fcinfo, CaptureConfig *config)
{
	const char *const names[] = {"decimal_handling", "skipped_operations", "schemas_enable",
	"converter", "replace_null_with_default"};

	if (PG_NARGS() >= 6 && !PG_ARGISNULL(5) && PG_GETARG_BOOL(5))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("tombstones are written in the debezium format only")));
	for (int i = 6; i < PG_NARGS() && i - 6 < lengthof(names); i++)
		if (!PG_ARGISNULL(i))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("%s applies to the debezium format only", names[i - 6])));
}

const OutboxFormat outbox_outbox_format = {
	.name = "outbox",
	.encode = as_given,
	.attach_options = outbox_attach_options,
	.change = outbox_change,
};
