/*-------------------------------------------------------------------------
 *
 * router.c
 *		An outbox table as Debezium's outbox event router reads it: the
 *		outbox_router() trigger and outbox_attach_router(), which installs
 *		it.
 *
 * The application inserts its events into a table of its own (id,
 * aggregatetype, aggregateid, type, payload, by default); each insert
 * becomes one event, in the inserting transaction, as the router would
 * write it with the JSON converter and schemas.enable=false:
 *
 * - topic: the topic pattern, ${routedByValue} replaced by the route_by
 *   column's value ("outbox.event.${routedByValue}");
 * - key: the key column's value, a string as it is (StringConverter), no
 *   key if it is null;
 * - value: the payload column's JSON, expanded (table.expand.json.payload
 *   =true: an object or an array, without white space, members whose value
 *   is null or an empty array left out, as the router's defaults
 *   table.json.payload.null.behavior and .empty.array.behavior do), or as
 *   a JSON string (the payload's text, escaped: what the router writes
 *   without expansion, and for a payload that is not an object or an
 *   array, or not JSON); a null payload is a tombstone;
 * - headers: "id", the id column (also the event's event_id, so the
 *   "event_id" header every record carries equals it), and the columns of
 *   header_columns under their names;
 * - timestamp: the timestamp column (a timestamp without time zone is
 *   UTC), else the start of the transaction.
 *
 * Updates and deletes emit nothing: the trigger is AFTER INSERT only, so
 * "insert, then delete in the same transaction" keeps the table empty.
 *
 * The configuration is the trigger's arguments, keyword=value, checked by
 * outbox_attach_router.  The trigger runs with the rights of the role that
 * inserted the row, as the capture trigger does (src/capture.c).
 *
 * src/router.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "common/jsonapi.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "capture.h"
#include "catalog.h"
#include "debezium.h"
#include "enqueue.h"

PG_FUNCTION_INFO_V1(outbox_router);
PG_FUNCTION_INFO_V1(outbox_attach_router);

#define ROUTED_BY_VALUE "${routedByValue}"

/* the trigger's arguments */
typedef struct RouterConfig
{
	char	   *topic_pattern;
	char	   *route_by;		/* NULL: the pattern is the topic */
	char	   *key;			/* NULL: no key */
	char	   *id;
	char	   *payload;
	char	   *timestamp;		/* NULL: the start of the transaction */
	bool		expand;
	int			nheaders;
	char	  **header_columns;
	char	  **header_names;
} RouterConfig;

/*
 * Split "column:header" at its first colon; false if it has none, or an
 * empty side.
 */
static bool
split_header(const char *entry, char **column, char **header)
{
	const char *colon = strchr(entry, ':');

	if (colon == NULL || colon == entry || colon[1] == '\0')
		return false;
	*column = pnstrdup(entry, colon - entry);
	*header = pstrdup(colon + 1);
	return true;
}

/*
 * The configuration from the trigger's arguments.
 */
static void
router_config(int nargs, char **args, RouterConfig *config)
{
	memset(config, 0, sizeof(*config));
	config->header_columns = palloc((nargs + 1) * sizeof(char *));
	config->header_names = palloc((nargs + 1) * sizeof(char *));
	for (int i = 0; i < nargs; i++)
	{
		char	   *eq = strchr(args[i], '=');
		char	   *name;
		char	   *value;

		if (eq == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("outbox_router: bad argument \"%s\"", args[i]),
					 errhint("Use outbox_attach_router() to create the trigger.")));
		name = pnstrdup(args[i], eq - args[i]);
		value = eq + 1;
		if (strcmp(name, "topic") == 0)
			config->topic_pattern = value;
		else if (strcmp(name, "route_by") == 0)
			config->route_by = value;
		else if (strcmp(name, "key") == 0)
			config->key = value;
		else if (strcmp(name, "id") == 0)
			config->id = value;
		else if (strcmp(name, "payload") == 0)
			config->payload = value;
		else if (strcmp(name, "timestamp") == 0)
			config->timestamp = value;
		else if (strcmp(name, "expand") == 0)
			config->expand = strcmp(value, "true") == 0;
		else if (strcmp(name, "header") == 0 &&
				 split_header(value, &config->header_columns[config->nheaders],
							  &config->header_names[config->nheaders]))
			config->nheaders++;
		else
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("outbox_router: bad argument \"%s\"", args[i]),
					 errhint("Use outbox_attach_router() to create the trigger.")));
	}
	if (config->topic_pattern == NULL || config->id == NULL || config->payload == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("outbox_router: the topic pattern, the id column and the payload column must be given"),
				 errhint("Use outbox_attach_router() to create the trigger.")));
}

/*
 * The pattern with every ${routedByValue} replaced by value.
 */
static char *
route(const char *pattern, const char *value)
{
	StringInfoData topic;
	const char *p = pattern;
	const char *found;

	initStringInfo(&topic);
	while ((found = strstr(p, ROUTED_BY_VALUE)) != NULL)
	{
		appendBinaryStringInfo(&topic, p, found - p);
		appendStringInfoString(&topic, value);
		p = found + strlen(ROUTED_BY_VALUE);
	}
	appendStringInfoString(&topic, p);
	return topic.data;
}

/*
 * The expansion of a JSON text: the same values, without white space,
 * members whose value is null or [] left out.  One level per nested
 * object or array.
 */
typedef struct Expansion
{
	StringInfo	out;
	int			depth;
	int			size;
	bool	   *first;			/* nothing written at this level yet */
	int		   *member_start;	/* where the member being written starts */
	bool		empty_array;	/* the value just written is [] */
} Expansion;

static void
expansion_push(Expansion *x, char c)
{
	if (++x->depth >= x->size)
	{
		x->size *= 2;
		x->first = repalloc(x->first, x->size * sizeof(bool));
		x->member_start = repalloc(x->member_start, x->size * sizeof(int));
	}
	x->first[x->depth] = true;
	appendStringInfoChar(x->out, c);
}

static void
expansion_object_start(void *state)
{
	expansion_push((Expansion *) state, '{');
}

static void
expansion_object_end(void *state)
{
	Expansion  *x = (Expansion *) state;

	appendStringInfoChar(x->out, '}');
	x->depth--;
	x->empty_array = false;
}

static void
expansion_array_start(void *state)
{
	expansion_push((Expansion *) state, '[');
}

static void
expansion_array_end(void *state)
{
	Expansion  *x = (Expansion *) state;

	appendStringInfoChar(x->out, ']');
	x->empty_array = x->first[x->depth];
	x->depth--;
}

static void
expansion_field_start(void *state, char *fname, bool isnull)
{
	Expansion  *x = (Expansion *) state;

	x->member_start[x->depth] = x->out->len;
	if (!x->first[x->depth])
		appendStringInfoChar(x->out, ',');
	escape_json(x->out, fname);
	appendStringInfoChar(x->out, ':');
}

static void
expansion_field_end(void *state, char *fname, bool isnull)
{
	Expansion  *x = (Expansion *) state;

	if (isnull || x->empty_array)
	{
		/* left out */
		x->out->len = x->member_start[x->depth];
		x->out->data[x->out->len] = '\0';
	}
	else
		x->first[x->depth] = false;
	x->empty_array = false;
}

static void
expansion_element_start(void *state, bool isnull)
{
	Expansion  *x = (Expansion *) state;

	if (!x->first[x->depth])
		appendStringInfoChar(x->out, ',');
	x->first[x->depth] = false;
}

static void
expansion_scalar(void *state, char *token, JsonTokenType tokentype)
{
	Expansion  *x = (Expansion *) state;

	if (tokentype == JSON_TOKEN_STRING)
		escape_json(x->out, token);
	else
		appendStringInfoString(x->out, token);
	x->empty_array = false;
}

/*
 * Append the expansion of JSON text json to out; false (out as it was) if
 * it is not valid JSON.
 */
static bool
expand_json(StringInfo out, char *json, int len)
{
	JsonLexContext *lex = makeJsonLexContextCstringLen(json, len, GetDatabaseEncoding(), true);
	JsonSemAction sem = {0};
	Expansion	x = {0};
	int			start = out->len;

	x.out = out;
	x.size = 8;
	x.first = palloc(x.size * sizeof(bool));
	x.member_start = palloc(x.size * sizeof(int));
	sem.semstate = &x;
	sem.object_start = expansion_object_start;
	sem.object_end = expansion_object_end;
	sem.array_start = expansion_array_start;
	sem.array_end = expansion_array_end;
	sem.object_field_start = expansion_field_start;
	sem.object_field_end = expansion_field_end;
	sem.array_element_start = expansion_element_start;
	sem.scalar = expansion_scalar;
	if (pg_parse_json(lex, &sem) != JSON_SUCCESS)
	{
		out->len = start;
		out->data[start] = '\0';
		return false;
	}
	return true;
}

/*
 * The record value of a payload: see the file header.  NULL: a tombstone.
 */
static bytea *
router_value(Datum value, bool isnull, Oid typid, bool expand)
{
	Oid			basetype = getBaseType(typid);
	char	   *json;
	StringInfoData out;

	if (isnull)
		return NULL;
	if (basetype == JSONBOID)
	{
		Jsonb	   *jb = DatumGetJsonbP(value);

		json = JsonbToCString(NULL, &jb->root, VARSIZE(jb));
	}
	else
		json = TextDatumGetCString(value);
	initStringInfo(&out);
	if (!expand || (json[0] != '{' && json[0] != '[') ||
		!expand_json(&out, json, strlen(json)))
		escape_json(&out, json);
	return outbox_utf8_payload(cstring_to_text_with_len(out.data, out.len));
}

/*
 * The attribute number of column name of tupdesc; an error if there is
 * none.
 */
static int
router_attnum(TupleDesc tupdesc, const char *name)
{
	int			attnum = SPI_fnumber(tupdesc, name);

	if (attnum == SPI_ERROR_NOATTRIBUTE || attnum <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("outbox_router: column \"%s\" does not exist", name)));
	return attnum;
}

/*
 * A column's value, its type and its typmod.
 */
static Datum
column_value(HeapTuple tuple, TupleDesc tupdesc, const char *name, bool *isnull,
			 Oid *typid, int32 *typmod)
{
	int			attnum = router_attnum(tupdesc, name);
	Form_pg_attribute attr = TupleDescAttr(tupdesc, attnum - 1);

	*typid = attr->atttypid;
	*typmod = attr->atttypmod;
	return heap_getattr(tuple, attnum, tupdesc, isnull);
}

/*
 * outbox_router(): AFTER INSERT FOR EACH ROW; arguments keyword=value, as
 * outbox_attach_router writes them.  See the file header.
 */
Datum
outbox_router(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	RouterConfig config;
	TupleDesc	tupdesc;
	HeapTuple	tuple;
	Datum		value;
	bool		isnull;
	Oid			typid;
	int32		typmod;
	char	   *topic;
	text	   *key = NULL;
	char	   *id_text;
	Datum		event_id;
	bytea	   *payload;
	StringInfoData headers;
	TimestampTz created_at;
	bool		timestamped = false;

	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("outbox_router: must be called as trigger")));
	if (!TRIGGER_FIRED_AFTER(trigdata->tg_event) ||
		!TRIGGER_FIRED_FOR_ROW(trigdata->tg_event) ||
		!TRIGGER_FIRED_BY_INSERT(trigdata->tg_event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("outbox_router: must be fired AFTER INSERT FOR EACH ROW"),
				 errhint("Use outbox_attach_router() to create the trigger.")));
	router_config(trigdata->tg_trigger->tgnargs, trigdata->tg_trigger->tgargs, &config);
	tupdesc = RelationGetDescr(trigdata->tg_relation);
	tuple = trigdata->tg_trigtuple;

	/* the topic */
	if (config.route_by == NULL)
		topic = config.topic_pattern;
	else
	{
		value = column_value(tuple, tupdesc, config.route_by, &isnull, &typid, &typmod);
		if (isnull)
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("outbox_router: column \"%s\" is null", config.route_by),
					 errdetail("The topic of the event is made from its value.")));
		topic = route(config.topic_pattern, outbox_debezium_text(value, typid, typmod));
	}

	/* the key */
	if (config.key != NULL)
	{
		value = column_value(tuple, tupdesc, config.key, &isnull, &typid, &typmod);
		if (!isnull)
			key = cstring_to_text(outbox_debezium_text(value, typid, typmod));
	}

	/* the event id, which is the id header */
	value = column_value(tuple, tupdesc, config.id, &isnull, &typid, &typmod);
	if (isnull)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("outbox_router: column \"%s\" is null", config.id),
				 errdetail("It is the id of the event.")));
	id_text = outbox_debezium_text(value, typid, typmod);
	event_id = getBaseType(typid) == UUIDOID ? value :
		DirectFunctionCall1(uuid_in, CStringGetDatum(id_text));

	/* the value */
	value = column_value(tuple, tupdesc, config.payload, &isnull, &typid, &typmod);
	payload = router_value(value, isnull, typid, config.expand);

	/* the headers */
	initStringInfo(&headers);
	appendStringInfoString(&headers, "{\"id\":");
	escape_json(&headers, id_text);
	for (int i = 0; i < config.nheaders; i++)
	{
		value = column_value(tuple, tupdesc, config.header_columns[i], &isnull, &typid, &typmod);
		if (isnull)
			continue;
		appendStringInfoChar(&headers, ',');
		escape_json(&headers, config.header_names[i]);
		appendStringInfoChar(&headers, ':');
		escape_json(&headers, outbox_debezium_text(value, typid, typmod));
	}
	appendStringInfoChar(&headers, '}');

	/* the record's timestamp */
	if (config.timestamp != NULL)
	{
		value = column_value(tuple, tupdesc, config.timestamp, &isnull, &typid, &typmod);
		if (!isnull)
		{
			/* a timestamp without time zone is taken as UTC: the same number */
			created_at = DatumGetTimestampTz(value);
			timestamped = true;
		}
	}

	outbox_store_event(outbox_entry(fcinfo), cstring_to_text(topic), key, payload,
					   DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(headers.data))),
					   event_id, false, timestamped ? &created_at : NULL);
	return PointerGetDatum(NULL);
}

/*
 * The type of column name of relid, its base type if a domain; an error
 * if there is no such column.
 */
static Oid
column_type(Oid relid, const char *name, const char *what)
{
	AttrNumber	attnum = get_attnum(relid, name);

	if (attnum <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column \"%s\" of relation \"%s\" does not exist", name, get_rel_name(relid)),
				 errdetail("It is the %s column.", what)));
	return getBaseType(get_atttype(relid, attnum));
}

/*
 * The type of a column given for one purpose is not one of those it can
 * have.
 */
static void
wrong_type(const char *name, Oid typid, const char *what, const char *types)
{
	ereport(ERROR,
			(errcode(ERRCODE_DATATYPE_MISMATCH),
			 errmsg("%s column \"%s\" is of type %s", what, name, format_type_be(typid)),
			 errdetail("It must be %s.", types)));
}

/*
 * A text argument of outbox_attach_router, NULL if null.
 */
static char *
text_arg(FunctionCallInfo fcinfo, int argno)
{
	return PG_ARGISNULL(argno) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(argno));
}

/*
 * outbox_attach_router(tbl regclass,
 *		topic_pattern text DEFAULT 'outbox.event.${routedByValue}',
 *		route_by text DEFAULT 'aggregatetype', key_column text DEFAULT 'aggregateid',
 *		id_column text DEFAULT 'id', payload_column text DEFAULT 'payload',
 *		timestamp_column text DEFAULT NULL, header_columns text[] DEFAULT NULL,
 *		expand_payload boolean DEFAULT true)
 *
 * Publish each row inserted into tbl as the event that Debezium's outbox
 * event router makes of it, with the trigger outbox_router (replaced if it
 * exists).  Every argument is checked here.
 */
Datum
outbox_attach_router(PG_FUNCTION_ARGS)
{
	const OutboxExtension *ext = outbox_entry(fcinfo);
	Oid			relid;
	RouterConfig config = {0};
	List	   *args = NIL;
	Relation	rel;
	Oid			typid;
	char	   *example;
	StringInfoData sql;
	ListCell   *lc;

	if (PG_NARGS() != 9)
		elog(ERROR, "outbox_attach_router called with %d arguments", PG_NARGS());
	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("tbl must not be null")));
	relid = PG_GETARG_OID(0);
	config.topic_pattern = text_arg(fcinfo, 1);
	config.route_by = text_arg(fcinfo, 2);
	config.key = text_arg(fcinfo, 3);
	config.id = text_arg(fcinfo, 4);
	config.payload = text_arg(fcinfo, 5);
	config.timestamp = text_arg(fcinfo, 6);
	config.expand = PG_ARGISNULL(8) || PG_GETARG_BOOL(8);

	if (config.topic_pattern == NULL || config.id == NULL || config.payload == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must not be null",
						config.topic_pattern == NULL ? "topic_pattern" :
						config.id == NULL ? "id_column" : "payload_column")));
	if (config.route_by != NULL && strstr(config.topic_pattern, ROUTED_BY_VALUE) == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("topic pattern \"%s\" does not contain " ROUTED_BY_VALUE, config.topic_pattern),
				 errdetail("Events are routed by column \"%s\": its value replaces " ROUTED_BY_VALUE " in the pattern.",
						   config.route_by),
				 errhint("Put " ROUTED_BY_VALUE " in the pattern, or pass route_by => NULL to publish every event to one topic.")));
	if (config.route_by == NULL && strstr(config.topic_pattern, ROUTED_BY_VALUE) != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("topic pattern \"%s\" contains " ROUTED_BY_VALUE " but route_by is null",
						config.topic_pattern),
				 errhint("Name the column whose value routes the events in route_by.")));
	example = route(config.topic_pattern, "x");
	outbox_check_topic(example, strlen(example));

	rel = outbox_open_to_attach(relid);
	if (outbox_has_trigger(ext, rel, CAPTURE_TRIGGER))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the changes of table \"%s\" are captured", RelationGetRelationName(rel)),
				 errdetail("An outbox router publishes the rows inserted into its table, a captured table all its changes."),
				 errhint("Call outbox_detach() first to route its inserts instead.")));

	/* the columns, and the types they must have */
	args = lappend(args, psprintf("topic=%s", config.topic_pattern));
	if (config.route_by != NULL)
	{
		(void) column_type(relid, config.route_by, "route_by");
		args = lappend(args, psprintf("route_by=%s", config.route_by));
	}
	if (config.key != NULL)
	{
		(void) column_type(relid, config.key, "key");
		args = lappend(args, psprintf("key=%s", config.key));
	}
	typid = column_type(relid, config.id, "id");
	if (typid != UUIDOID && typid != TEXTOID && typid != VARCHAROID && typid != BPCHAROID)
		wrong_type(config.id, typid, "id", "uuid, or text holding a UUID");
	args = lappend(args, psprintf("id=%s", config.id));
	typid = column_type(relid, config.payload, "payload");
	if (typid != JSONBOID && typid != JSONOID && typid != TEXTOID && typid != VARCHAROID)
		wrong_type(config.payload, typid, "payload", "jsonb, json or text");
	args = lappend(args, psprintf("payload=%s", config.payload));
	if (config.timestamp != NULL)
	{
		typid = column_type(relid, config.timestamp, "timestamp");
		if (typid != TIMESTAMPTZOID && typid != TIMESTAMPOID)
			wrong_type(config.timestamp, typid, "timestamp",
					   "timestamp with time zone, or timestamp without time zone (taken as UTC)");
		args = lappend(args, psprintf("timestamp=%s", config.timestamp));
	}
	args = lappend(args, config.expand ? "expand=true" : "expand=false");
	if (!PG_ARGISNULL(7))
	{
		Datum	   *entries;
		bool	   *nulls;
		int			n;
		char	  **names;

		deconstruct_array(PG_GETARG_ARRAYTYPE_P(7), TEXTOID, -1, false, TYPALIGN_INT,
						  &entries, &nulls, &n);
		names = palloc((n + 1) * sizeof(char *));
		for (int i = 0; i < n; i++)
		{
			char	   *entry = nulls[i] ? "" : TextDatumGetCString(entries[i]);
			char	   *column;

			if (!split_header(entry, &column, &names[i]))
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("invalid header_columns entry \"%s\"", entry),
						 errdetail("Each entry is column:header, as in \"type:eventType\".")));
			if (strcmp(names[i], "id") == 0 || strcmp(names[i], "event_id") == 0)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("header \"%s\" is reserved", names[i]),
						 errdetail("Every event carries the id column in header \"id\" and in header \"event_id\".")));
			for (int j = 0; j < i; j++)
				if (strcmp(names[i], names[j]) == 0)
					ereport(ERROR,
							(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							 errmsg("header \"%s\" is named twice in header_columns", names[i])));
			(void) column_type(relid, column, "header");
			args = lappend(args, psprintf("header=%s", entry));
		}
	}

	initStringInfo(&sql);
	appendStringInfo(&sql, "CREATE OR REPLACE TRIGGER " ROUTER_TRIGGER " AFTER INSERT ON %s "
					 "FOR EACH ROW EXECUTE FUNCTION %s(",
					 quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
												RelationGetRelationName(rel)),
					 quote_qualified_identifier(get_namespace_name(ext->schema), "outbox_router"));
	foreach(lc, args)
		appendStringInfo(&sql, "%s%s", foreach_current_index(lc) > 0 ? ", " : "",
						 quote_literal_cstr((char *) lfirst(lc)));
	appendStringInfoChar(&sql, ')');
	SPI_connect();
	if (SPI_execute(sql.data, false, 0) != SPI_OK_UTILITY)
		elog(ERROR, "creating the router trigger failed");
	SPI_finish();
	outbox_note_attachment(ext, relid, true);
	table_close(rel, NoLock);
	PG_RETURN_VOID();
}
