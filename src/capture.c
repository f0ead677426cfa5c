/*-------------------------------------------------------------------------
 *
 * capture.c
 *		Capture row changes as events: the outbox_capture() trigger and
 *		outbox_attach(), which installs it.
 *
 * Each changed row becomes one event in the changing transaction, with a
 * Debezium-like JSON envelope:
 *
 *		{"op": "c", "before": null, "after": {...},
 *		 "source": {"schema": "public", "table": "orders",
 *					"txid": 745, "ts_ms": 1732260000000}}
 *
 * op is c (insert), u (update), d (delete) or t (truncate).  The key is the
 * text of the key column; with several key columns, a JSON array of their
 * texts.
 *
 * Security: the trigger runs with the rights of the role that changed the
 * row, because building the envelope runs code of the table's owner (output
 * functions of its types, its casts to json).  The event is stored as
 * outbox_enqueue stores it, straight into the table without a permission
 * check and without evaluating anything but built-in functions
 * (src/enqueue.c); the EXECUTE privilege that CREATE TRIGGER needs on
 * outbox_capture is the gate.
 *
 * src/capture.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_class.h"
#include "catalog/pg_index.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/relcache.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "catalog.h"
#include "enqueue.h"

PG_FUNCTION_INFO_V1(outbox_capture);
PG_FUNCTION_INFO_V1(outbox_attach);

/*
 * A row as a JSON object, or "null".
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
 * The attribute number of a key column; an unknown column is an error.
 */
static int
key_attnum(TupleDesc tupdesc, const char *name)
{
	int			attnum = SPI_fnumber(tupdesc, name);

	if (attnum == SPI_ERROR_NOATTRIBUTE || attnum <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("outbox_capture: key column \"%s\" does not exist", name)));
	return attnum;
}

/*
 * The event key of a row: the text of its one key column, or a JSON array
 * of the texts of several.  Key columns are the trigger's arguments after
 * the topic, else the primary key; no key columns, no key.
 */
static text *
row_key(Relation rel, Trigger *trigger, HeapTuple tuple)
{
	TupleDesc	tupdesc = RelationGetDescr(rel);
	int			nkeys = 0;
	int		   *attnums;
	StringInfoData buf;

	if (trigger->tgnargs > 1)
	{
		nkeys = trigger->tgnargs - 1;
		attnums = palloc(nkeys * sizeof(int));
		for (int i = 0; i < nkeys; i++)
			attnums[i] = key_attnum(tupdesc, trigger->tgargs[i + 1]);
	}
	else
	{
		Oid			pkey = RelationGetPrimaryKeyIndex(rel);
		HeapTuple	indtuple;
		Form_pg_index index;

		if (!OidIsValid(pkey))
			return NULL;
		indtuple = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(pkey));
		if (!HeapTupleIsValid(indtuple))
			elog(ERROR, "cache lookup failed for index %u", pkey);
		index = (Form_pg_index) GETSTRUCT(indtuple);
		nkeys = index->indnkeyatts;
		attnums = palloc(nkeys * sizeof(int));
		for (int i = 0; i < nkeys; i++)
			attnums[i] = index->indkey.values[i];
		ReleaseSysCache(indtuple);
	}

	if (nkeys == 1)
	{
		char	   *value = SPI_getvalue(tuple, tupdesc, attnums[0]);

		return value ? cstring_to_text(value) : NULL;
	}

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '[');
	for (int i = 0; i < nkeys; i++)
	{
		char	   *value = SPI_getvalue(tuple, tupdesc, attnums[i]);

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
 * outbox_capture(): AFTER INSERT OR UPDATE OR DELETE FOR EACH ROW, and
 * AFTER TRUNCATE FOR EACH STATEMENT; arguments (topic [, key_column ...]).
 */
Datum
outbox_capture(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	Relation	rel;
	TupleDesc	tupdesc;
	HeapTuple	before = NULL;
	HeapTuple	after = NULL;
	const char *op;
	StringInfoData payload;
	TimestampTz now = GetCurrentTimestamp();
	text	   *key = NULL;

	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("outbox_capture: must be called as trigger")));
	if (!TRIGGER_FIRED_AFTER(trigdata->tg_event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("outbox_capture: must be fired AFTER the change"),
				 errhint("Use outbox_attach() to create the trigger.")));
	if (TRIGGER_FIRED_BY_TRUNCATE(trigdata->tg_event))
		op = "t";
	else if (!TRIGGER_FIRED_FOR_ROW(trigdata->tg_event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("outbox_capture: must be fired FOR EACH ROW"),
				 errhint("Use outbox_attach() to create the trigger.")));
	else if (TRIGGER_FIRED_BY_INSERT(trigdata->tg_event))
	{
		op = "c";
		after = trigdata->tg_trigtuple;
	}
	else if (TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event))
	{
		op = "u";
		before = trigdata->tg_trigtuple;
		after = trigdata->tg_newtuple;
	}
	else
	{
		op = "d";
		before = trigdata->tg_trigtuple;
	}
	if (trigdata->tg_trigger->tgnargs < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("outbox_capture: no topic given"),
				 errdetail("The trigger's first argument is the topic."),
				 errhint("Use outbox_attach() to create the trigger.")));

	rel = trigdata->tg_relation;
	tupdesc = RelationGetDescr(rel);
	if (before != NULL || after != NULL)
		key = row_key(rel, trigdata->tg_trigger, after ? after : before);

	initStringInfo(&payload);
	appendStringInfo(&payload, "{\"op\": \"%s\", \"before\": ", op);
	append_row_json(&payload, before, tupdesc);
	appendStringInfoString(&payload, ", \"after\": ");
	append_row_json(&payload, after, tupdesc);
	appendStringInfoString(&payload, ", \"source\": {\"schema\": ");
	escape_json(&payload, get_namespace_name(RelationGetNamespace(rel)));
	appendStringInfoString(&payload, ", \"table\": ");
	escape_json(&payload, RelationGetRelationName(rel));
	appendStringInfo(&payload, ", \"txid\": " UINT64_FORMAT ", \"ts_ms\": " INT64_FORMAT "}}",
					 U64FromFullTransactionId(GetTopFullTransactionId()),
					 (int64) (now / 1000 + (int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY * 1000));

	outbox_store_event(outbox_entry(fcinfo),
					   cstring_to_text(trigdata->tg_trigger->tgargs[0]),
					   key,
					   outbox_utf8_payload(cstring_to_text_with_len(payload.data, payload.len)),
					   NULL, (Datum) 0, true);

	return PointerGetDatum(NULL);
}

/*
 * outbox_attach(tbl regclass, topic text, key_columns text[]): capture the
 * changes of tbl with the triggers outbox_capture (rows) and
 * outbox_capture_truncate, replacing them if they exist.
 */
Datum
outbox_attach(PG_FUNCTION_ARGS)
{
	const OutboxExtension *ext = outbox_entry(fcinfo);
	Oid			relid = PG_GETARG_OID(0);
	text	   *topic;
	char		relkind = get_rel_relkind(relid);
	char	   *relname;
	char	   *function;
	StringInfoData args;

	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("topic must not be null")));
	topic = PG_GETARG_TEXT_PP(1);
	outbox_check_topic(VARDATA_ANY(topic), VARSIZE_ANY_EXHDR(topic));
	if (relkind != RELKIND_RELATION && relkind != RELKIND_PARTITIONED_TABLE)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not a table", get_rel_name(relid))));

	initStringInfo(&args);
	appendStringInfoString(&args, quote_literal_cstr(text_to_cstring(topic)));
	if (!PG_ARGISNULL(2))
	{
		Datum	   *names;
		bool	   *nulls;
		int			n;

		deconstruct_array(PG_GETARG_ARRAYTYPE_P(2), TEXTOID, -1, false, TYPALIGN_INT,
						  &names, &nulls, &n);
		for (int i = 0; i < n; i++)
		{
			char	   *name = nulls[i] ? "" : TextDatumGetCString(names[i]);

			if (get_attnum(relid, name) <= 0)
				ereport(ERROR,
						(errcode(ERRCODE_UNDEFINED_COLUMN),
						 errmsg("column \"%s\" of relation \"%s\" does not exist",
								name, get_rel_name(relid))));
			appendStringInfo(&args, ", %s", quote_literal_cstr(name));
		}
	}

	relname = quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
										 get_rel_name(relid));
	function = quote_qualified_identifier(get_namespace_name(ext->schema), "outbox_capture");
	SPI_connect();
	if (SPI_execute(psprintf("CREATE OR REPLACE TRIGGER outbox_capture "
							 "AFTER INSERT OR UPDATE OR DELETE ON %s "
							 "FOR EACH ROW EXECUTE FUNCTION %s(%s)",
							 relname, function, args.data), false, 0) != SPI_OK_UTILITY ||
		SPI_execute(psprintf("CREATE OR REPLACE TRIGGER outbox_capture_truncate "
							 "AFTER TRUNCATE ON %s "
							 "FOR EACH STATEMENT EXECUTE FUNCTION %s(%s)",
							 relname, function, args.data), false, 0) != SPI_OK_UTILITY)
		elog(ERROR, "creating the capture triggers failed");
	SPI_finish();
	PG_RETURN_VOID();
}
