/*-------------------------------------------------------------------------
 *
 * enqueue.c
 *		outbox_enqueue(): store an event in the caller's transaction.
 *
 * The row is inserted through one kept SPI plan.  The headers of the
 * transaction (outbox.headers) are merged under the event's own.
 * Validation happens before the insert, so bad input leaves nothing
 * behind, and the worker is asked to wake up when the transaction commits.
 *
 * src/enqueue.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"

#include "outbox.h"

PG_FUNCTION_INFO_V1(outbox_enqueue);

/* Kafka's own limit on topic names */
#define KAFKA_TOPIC_MAX_LENGTH 249

/* the insert plan, kept for the session, and the schema it was made for */
static SPIPlanPtr insert_plan = NULL;
static Oid	insert_plan_nspid = InvalidOid;

/*
 * What is wrong with a topic name, or NULL if Kafka would take it.  Also
 * the check hook of outbox.dead_letter_topic.
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
 * Refuse a topic name that Kafka would refuse.
 */
void
outbox_check_topic(const char *topic, int len)
{
	const char *problem = outbox_topic_problem(topic, len);

	if (problem != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid topic name \"%.*s\"", Min(len, 64), topic),
				 errdetail("%s", problem)));
}

/*
 * Refuse text that cannot be published as UTF-8.
 */
static void
refuse_not_utf8(const char *what)
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
		refuse_not_utf8("payload");
	result = (bytea *) palloc(VARHDRSZ + len);
	SET_VARSIZE(result, VARHDRSZ + len);
	memcpy(VARDATA(result), utf8, len);
	return result;
}

/*
 * The bytes that will be published: for text and jsonb their UTF-8 text,
 * for bytea the bytes as given.
 */
static bytea *
payload_bytes(FunctionCallInfo fcinfo, int argno)
{
	Oid			argtype = get_fn_expr_argtype(fcinfo->flinfo, argno);

	switch (argtype)
	{
		case BYTEAOID:
			return PG_GETARG_BYTEA_PP(argno);
		case TEXTOID:
			return outbox_utf8_payload(PG_GETARG_TEXT_PP(argno));
		case JSONBOID:
			{
				Jsonb	   *jb = PG_GETARG_JSONB_P(argno);

				return outbox_utf8_payload(cstring_to_text(JsonbToCString(NULL, &jb->root,
																		  VARSIZE(jb))));
			}
		default:
			elog(ERROR, "outbox_enqueue called with payload of type %u", argtype);
			return NULL;		/* keep compiler quiet */
	}
}

/*
 * Refuse an event that the worker could not publish: a bad topic, a
 * tombstone without key, a key or headers that are not UTF-8, headers that
 * are not an object of strings, a record over outbox.max_message_bytes.
 */
static void
check_event(text *topic, text *key, bytea *payload, Jsonb *headers)
{
	OutboxEvent ev = {0};
	const char *problem;
	bool		not_utf8;

	outbox_check_topic(VARDATA_ANY(topic), VARSIZE_ANY_EXHDR(topic));
	if (payload == NULL && key == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("an event without payload needs a key"),
				 errdetail("A null payload is published as a tombstone, which deletes its key from a compacted topic.")));
	if (payload != NULL)
		ev.payload_len = VARSIZE_ANY_EXHDR(payload);
	if (key != NULL &&
		outbox_to_utf8(VARDATA_ANY(key), VARSIZE_ANY_EXHDR(key), &ev.key_len) == NULL)
		refuse_not_utf8("key");
	if (headers != NULL &&
		(problem = outbox_unpack_headers(headers, &ev, &not_utf8)) != NULL)
	{
		if (not_utf8)
			refuse_not_utf8("header");
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid event headers"),
				 errdetail("%s", problem)));
	}
	if (outbox_record_bytes(&ev) > outbox_max_message_bytes)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("event is too large"),
				 errdetail("Payload, key and headers have " INT64_FORMAT " bytes; outbox.max_message_bytes is %d.",
						   outbox_record_bytes(&ev), outbox_max_message_bytes)));
}

/*
 * Insert the row through the kept plan; returns its id.  The plan names the
 * table of the extension in schema nspid.
 */
static int64
insert_event(Oid nspid, Datum *values, const char *nulls)
{
	int64		id;
	bool		isnull;
	int			ret;

	if (insert_plan == NULL || insert_plan_nspid != nspid)
	{
		Oid			argtypes[5] = {UUIDOID, TEXTOID, TEXTOID, BYTEAOID, JSONBOID};
		char	   *sql;
		SPIPlanPtr	plan;

		sql = psprintf("INSERT INTO %s.outbox_messages (event_id, topic, key, payload, headers) "
					   "VALUES (coalesce($1, pg_catalog.gen_random_uuid()), $2, $3, $4, $5) "
					   "RETURNING id",
					   quote_identifier(get_namespace_name(nspid)));
		plan = SPI_prepare(sql, 5, argtypes);
		if (plan == NULL)
			elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
		if (insert_plan != NULL)
			SPI_freeplan(insert_plan);
		SPI_keepplan(plan);
		insert_plan = plan;
		insert_plan_nspid = nspid;
	}

	ret = SPI_execute_plan(insert_plan, values, nulls, false, 1);
	if (ret != SPI_OK_INSERT_RETURNING || SPI_processed != 1)
		elog(ERROR, "inserting into outbox_messages failed: %s", SPI_result_code_string(ret));
	id = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	return id;
}

/*
 * Validate an event and insert it into the outbox_messages table of schema
 * nspid, in the current transaction; returns the new row's id.  A NULL
 * payload is a tombstone; key and headers may be NULL.
 */
int64
outbox_store_event(Oid nspid, text *topic, text *key, bytea *payload,
				   Jsonb *headers, Datum event_id, bool event_id_isnull)
{
	Datum		values[5];
	char		nulls[5] = {' ', ' ', ' ', ' ', ' '};
	int64		id;

	/* the transaction's headers (outbox.headers), under the call's own */
	if (outbox_transaction_headers != NULL)
		headers = headers == NULL ? outbox_transaction_headers :
			DatumGetJsonbP(DirectFunctionCall2(jsonb_concat,
											   JsonbPGetDatum(outbox_transaction_headers),
											   JsonbPGetDatum(headers)));
	check_event(topic, key, payload, headers);

	values[0] = event_id;
	nulls[0] = event_id_isnull ? 'n' : ' ';
	values[1] = PointerGetDatum(topic);
	values[2] = PointerGetDatum(key);
	nulls[2] = key == NULL ? 'n' : ' ';
	values[3] = PointerGetDatum(payload);
	nulls[3] = payload == NULL ? 'n' : ' ';
	values[4] = PointerGetDatum(headers);
	nulls[4] = headers == NULL ? 'n' : ' ';

	SPI_connect();
	id = insert_event(nspid, values, nulls);
	SPI_finish();

	outbox_wake_worker_at_commit();
	return id;
}

/*
 * outbox_enqueue(topic text, payload {jsonb|text|bytea}, key text,
 *				  headers jsonb, event_id uuid) RETURNS bigint
 *
 * One C function serves the three SQL signatures; the declared type of the
 * payload argument says how to turn it into bytes.
 */
Datum
outbox_enqueue(PG_FUNCTION_ARGS)
{
	int64		id;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("topic must not be null")));

	id = outbox_store_event(get_func_namespace(fcinfo->flinfo->fn_oid),
							PG_GETARG_TEXT_PP(0),
							PG_ARGISNULL(2) ? NULL : PG_GETARG_TEXT_PP(2),
							PG_ARGISNULL(1) ? NULL : payload_bytes(fcinfo, 1),
							PG_ARGISNULL(3) ? NULL : PG_GETARG_JSONB_P(3),
							PG_GETARG_DATUM(4),
							PG_ARGISNULL(4));
	PG_RETURN_INT64(id);
}
