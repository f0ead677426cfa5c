/*-------------------------------------------------------------------------
 *
 * enqueue.c
 *		outbox_enqueue(): store an event in the caller's transaction.
 *
 * The row goes straight into the table and its indexes.  The headers of the
 * transaction (outbox.headers) are merged under the event's own.
 * Validation happens before the insert, so bad input leaves nothing
 * behind, and the worker is asked to wake up when the transaction commits.
 *
 * src/enqueue.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/dependency.h"
#include "catalog/pg_enum.h"
#include "catalog/pg_type.h"
#include "commands/sequence.h"
#include "executor/executor.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/fmgrprotos.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "outbox.h"

PG_FUNCTION_INFO_V1(outbox_enqueue);

/* Kafka's own limit on topic names */
#define KAFKA_TOPIC_MAX_LENGTH 249

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
 * The columns of outbox_messages that an insert fills; the others are
 * left NULL.
 */
typedef enum EventColumn
{
	COL_ID,
	COL_EVENT_ID,
	COL_TOPIC,
	COL_KEY,
	COL_PAYLOAD,
	COL_HEADERS,
	COL_STATUS,
	COL_ATTEMPTS,
	COL_CREATED_AT,
	NUM_EVENT_COLUMNS
} EventColumn;

static const char *const event_column_names[NUM_EVENT_COLUMNS] = {
	"id", "event_id", "topic", "key", "payload", "headers", "status",
	"attempts", "created_at"
};

/*
 * What an insert needs to know about the events table of one schema,
 * looked up once per session.  The relation is opened by oid at each call
 * and checked to still be that table, so a dropped and re-created
 * extension is found again.
 */
typedef struct EventsTable
{
	Oid			nspid;			/* the extension's schema */
	Oid			relid;			/* its outbox_messages */
	Oid			id_sequence;	/* the identity sequence of id */
	Oid			pending;		/* the enum value 'pending' of status */
	AttrNumber	attnum[NUM_EVENT_COLUMNS];
} EventsTable;

static EventsTable events_table;

/*
 * Look up the events table of schema nspid, its columns, its id sequence
 * and the status 'pending'.
 */
static void
look_up_events_table(Oid nspid)
{
	Oid			relid = get_relname_relid("outbox_messages", nspid);
	Oid			status_type;
	HeapTuple	tup;

	if (!OidIsValid(relid))
		elog(ERROR, "outbox_messages not found in schema %u", nspid);
	for (int i = 0; i < NUM_EVENT_COLUMNS; i++)
	{
		AttrNumber	attnum = get_attnum(relid, event_column_names[i]);

		if (attnum == InvalidAttrNumber)
			elog(ERROR, "outbox_messages has no column \"%s\"", event_column_names[i]);
		events_table.attnum[i] = attnum;
	}
	status_type = get_atttype(relid, events_table.attnum[COL_STATUS]);
	tup = SearchSysCache2(ENUMTYPOIDNAME, ObjectIdGetDatum(status_type),
						  CStringGetDatum("pending"));
	if (!HeapTupleIsValid(tup))
		elog(ERROR, "status \"pending\" not found");
	events_table.pending = ((Form_pg_enum) GETSTRUCT(tup))->oid;
	ReleaseSysCache(tup);
	events_table.id_sequence = getIdentitySequence(relid, events_table.attnum[COL_ID], false);
	events_table.relid = relid;
	events_table.nspid = nspid;
}

/*
 * Open the events table of schema nspid for an insert.
 */
static Relation
open_events_table(Oid nspid)
{
	Relation	rel = NULL;

	if (events_table.nspid == nspid)
		rel = try_table_open(events_table.relid, RowExclusiveLock);
	if (rel != NULL &&
		(RelationGetNamespace(rel) != nspid ||
		 strcmp(RelationGetRelationName(rel), "outbox_messages") != 0))
	{
		table_close(rel, RowExclusiveLock);
		rel = NULL;
	}
	if (rel == NULL)
	{
		events_table.nspid = InvalidOid;
		look_up_events_table(nspid);
		rel = table_open(events_table.relid, RowExclusiveLock);
	}
	return rel;
}

/*
 * Insert the row straight into the heap and its indexes, as the executor
 * would, without SQL: no parse, plan or permission check.  The caller's
 * right to enqueue is the EXECUTE privilege on outbox_enqueue.  Nothing
 * here is looked up by name at run time, and the only functions evaluated
 * are built in: the predicates of the partial indexes (bound to
 * pg_catalog's operators when the index was made), nextval and the uuid
 * generator.  The table's CHECK constraint holds by check_event().
 * Returns the new row's id.
 */
static int64
insert_event(Oid nspid, Datum *columns, bool *nulls)
{
	Relation	rel = open_events_table(nspid);
	TupleDesc	tupdesc = RelationGetDescr(rel);
	EState	   *estate = CreateExecutorState();
	MemoryContext caller_context = MemoryContextSwitchTo(estate->es_query_cxt);
	ResultRelInfo *rri = makeNode(ResultRelInfo);
	TupleTableSlot *slot;
	int64		id = nextval_internal(events_table.id_sequence, false);

	columns[COL_ID] = Int64GetDatum(id);
	nulls[COL_ID] = false;
	if (nulls[COL_EVENT_ID])
	{
		columns[COL_EVENT_ID] = OidFunctionCall0(F_GEN_RANDOM_UUID);
		nulls[COL_EVENT_ID] = false;
	}
	columns[COL_STATUS] = ObjectIdGetDatum(events_table.pending);
	nulls[COL_STATUS] = false;
	columns[COL_ATTEMPTS] = Int32GetDatum(0);
	nulls[COL_ATTEMPTS] = false;
	columns[COL_CREATED_AT] = TimestampTzGetDatum(GetCurrentTransactionStartTimestamp());
	nulls[COL_CREATED_AT] = false;

	slot = ExecInitExtraTupleSlot(estate, tupdesc, &TTSOpsVirtual);
	memset(slot->tts_isnull, true, tupdesc->natts * sizeof(bool));
	for (int i = 0; i < NUM_EVENT_COLUMNS; i++)
	{
		AttrNumber	attnum = events_table.attnum[i];

		slot->tts_values[attnum - 1] = columns[i];
		slot->tts_isnull[attnum - 1] = nulls[i];
	}
	ExecStoreVirtualTuple(slot);

	InitResultRelInfo(rri, rel, 1, NULL, 0);
	ExecOpenIndices(rri, false);
	table_tuple_insert(rel, slot, GetCurrentCommandId(true), 0, NULL);
	ExecInsertIndexTuples(rri, slot, estate, false, false, NULL, NIL);
	ExecCloseIndices(rri);
	ExecResetTupleTable(estate->es_tupleTable, false);
	MemoryContextSwitchTo(caller_context);
	FreeExecutorState(estate);
	table_close(rel, NoLock);
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
	Datum		columns[NUM_EVENT_COLUMNS];
	bool		nulls[NUM_EVENT_COLUMNS];
	int64		id;

	/* the insert below bypasses the executor, which would check this */
	PreventCommandIfReadOnly("outbox_enqueue()");

	/* the transaction's headers (outbox.headers), under the call's own */
	if (outbox_transaction_headers != NULL)
		headers = headers == NULL ? outbox_transaction_headers :
			DatumGetJsonbP(DirectFunctionCall2(jsonb_concat,
											   JsonbPGetDatum(outbox_transaction_headers),
											   JsonbPGetDatum(headers)));
	check_event(topic, key, payload, headers);

	columns[COL_EVENT_ID] = event_id;
	nulls[COL_EVENT_ID] = event_id_isnull;
	columns[COL_TOPIC] = PointerGetDatum(topic);
	nulls[COL_TOPIC] = false;
	columns[COL_KEY] = PointerGetDatum(key);
	nulls[COL_KEY] = key == NULL;
	columns[COL_PAYLOAD] = PointerGetDatum(payload);
	nulls[COL_PAYLOAD] = payload == NULL;
	columns[COL_HEADERS] = PointerGetDatum(headers);
	nulls[COL_HEADERS] = headers == NULL;

	id = insert_event(nspid, columns, nulls);

	outbox_wake_worker_at_commit();
	return id;
}

/*
 * The schema of the called function, the extension's, looked up at the
 * first call through an FmgrInfo and kept in its fn_extra.
 */
Oid
outbox_function_namespace(FunctionCallInfo fcinfo)
{
	Oid		   *nspid = (Oid *) fcinfo->flinfo->fn_extra;

	if (nspid == NULL)
	{
		nspid = MemoryContextAlloc(fcinfo->flinfo->fn_mcxt, sizeof(Oid));
		*nspid = get_func_namespace(fcinfo->flinfo->fn_oid);
		fcinfo->flinfo->fn_extra = nspid;
	}
	return *nspid;
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

	id = outbox_store_event(outbox_function_namespace(fcinfo),
							PG_GETARG_TEXT_PP(0),
							PG_ARGISNULL(2) ? NULL : PG_GETARG_TEXT_PP(2),
							PG_ARGISNULL(1) ? NULL : payload_bytes(fcinfo, 1),
							PG_ARGISNULL(3) ? NULL : PG_GETARG_JSONB_P(3),
							PG_GETARG_DATUM(4),
							PG_ARGISNULL(4));
	PG_RETURN_INT64(id);
}
