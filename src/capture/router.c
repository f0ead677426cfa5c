/*-------------------------------------------------------------------------
 *
 * router.c
 *		An outbox table as Debezium's outbox event router reads it: the
 *		outbox_router() trigger, AFTER INSERT (each row inserted is one
 *		event), and outbox_attach_router(), which installs it.  Its options
 *		and the records it writes are in docs/debezium.md; docs/design.md,
 *		"Capture, the router and snapshots", says why the trigger reads its
 *		columns as it does.
 *
 * src/capture/router.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/timestamp.h"

#include "base/catalog.h"
#include "base/event.h"
#include "capture/capture.h"
#include "capture/trigger_cache.h"
#include "format/debezium.h"
#include "format/debezium_json.h"
#include "queue/enqueue.h"

PG_FUNCTION_INFO_V1(outbox_router);
PG_FUNCTION_INFO_V1(outbox_attach_router);

#define ROUTED_BY_VALUE "${routedByValue}"

/*
 * The trigger's arguments.  Those that 1.3 added are absent from the
 * triggers that 1.2 made: their absence keeps what 1.2 did.
 */
typedef struct RouterConfig
{
	char	   *topic_pattern;
	char	   *route_by;		/* NULL: the pattern is the topic */
	char	   *key;			/* NULL: no key */
	char	   *id;
	char	   *payload;
	char	   *timestamp;		/* NULL: the start of the transaction */
	RouterOptions options;
	bool		any_id;			/* ids=any: an id of any type; 1.2: a UUID */
	int			nheaders;
	char	  **header_columns;
	char	  **header_names;
} RouterConfig;

/*
 * What the trigger keeps of its table between its calls (trigger_cache.c):
 * its arguments, and the columns they name as the table has them, by
 * attribute number (<= 0: no such column, an error at each row where the
 * column is read, as when it was looked up by name at each row).
 */
typedef struct RouterTable
{
	RouterConfig config;
	int			route_by;
	int			key;
	int			id;
	int			payload;
	int			timestamp;
	int		   *headers;		/* config.nheaders of them */
	bool		id_uuid;		/* the id column is a uuid (its base type) */
	Oid			timestamp_type; /* the base type of the timestamp column */
	bool		pin_settings;	/* outbox_debezium_needs_settings */
	bool		pin_search_path;	/* the text of a column read may read it */
} RouterTable;

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
 * The key converter named name: json, string or avro; -1 for another name.
 */
static int
key_converter(const char *name)
{
	if (strcmp(name, "json") == 0)
		return ROUTER_KEY_JSON;
	if (strcmp(name, "string") == 0)
		return ROUTER_KEY_STRING;
	if (strcmp(name, "avro") == 0)
		return ROUTER_KEY_AVRO;
	return -1;
}

/*
 * The configuration from the trigger's arguments.
 */
static void
router_config(int nargs, char **args, RouterConfig *config)
{
	memset(config, 0, sizeof(*config));
	config->options.null_tombstone = true;
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
					 errmsg("bad argument \"%s\"", args[i]),
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
			config->options.expand = strcmp(value, "true") == 0;
		else if (strcmp(name, "key_converter") == 0 && key_converter(value) >= 0)
			config->options.key_converter = key_converter(value);
		else if (strcmp(name, "converter") == 0 &&
				 (strcmp(value, "json") == 0 || strcmp(value, "avro") == 0))
			config->options.avro = strcmp(value, "avro") == 0;
		else if (strcmp(name, "schemas_enable") == 0)
			config->options.schemas = strcmp(value, "true") == 0;
		else if (strcmp(name, "tombstone_on_empty_payload") == 0)
			config->options.null_tombstone = config->options.blank_tombstone =
				strcmp(value, "true") == 0;
		else if (strcmp(name, "ids") == 0 && strcmp(value, "any") == 0)
			config->any_id = true;
		else if (strcmp(name, "header") == 0 &&
				 split_header(value, &config->header_columns[config->nheaders],
							  &config->header_names[config->nheaders]))
			config->nheaders++;
		else
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("bad argument \"%s\"", args[i]),
					 errhint("Use outbox_attach_router() to create the trigger.")));
	}
	if (config->topic_pattern == NULL || config->id == NULL || config->payload == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the topic pattern, the id column and the payload column must be given"),
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

/* the types a timestamp column can have (its base type, if a domain) */
#define TIMESTAMP_TYPES "timestamp with time zone, or timestamp without time zone (taken as UTC)"
static bool
timestamp_type(Oid typid)
{
	return typid == TIMESTAMPTZOID || typid == TIMESTAMPOID;
}

/*
 * A column's value, and its attribute (its type), the column called name
 * of attribute number attnum in the table as the trigger keeps it: the
 * table's owner may have renamed, dropped or retyped the column since the
 * router was attached.  An error if there is no such column.
 */
static Datum
column_value(HeapTuple tuple, TupleDesc tupdesc, int attnum, const char *name, bool *isnull,
			 Form_pg_attribute *attr)
{
	if (attnum <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column \"%s\" does not exist", name),
				 errdetail("The outbox router was attached to read it."),
				 errhint("Attach the router again with the table's columns.")));
	*attr = TupleDescAttr(tupdesc, attnum - 1);
	return heap_getattr(tuple, attnum, tupdesc, isnull);
}

/*
 * The attribute number of column name of tupdesc (<= 0 if it has none),
 * noting in table whether the text of its values may read search_path.
 */
static int
column_number(TupleDesc tupdesc, const char *name, RouterTable *table)
{
	int			attnum = SPI_fnumber(tupdesc, name);

	if (attnum > 0 && outbox_text_reads_search_path(TupleDescAttr(tupdesc, attnum - 1)->atttypid))
		table->pin_search_path = true;
	return attnum;
}

/*
 * Make what the router trigger of trigdata keeps of its table, in the
 * current memory context: its arguments parsed, its columns looked up.
 * The caller has the trigger in the error context.
 */
static void *
make_router_table(const OutboxExtension *ext, TriggerData *trigdata)
{
	Trigger    *trigger = trigdata->tg_trigger;
	TupleDesc	tupdesc = RelationGetDescr(trigdata->tg_relation);
	RouterTable *table = palloc0(sizeof(RouterTable));
	RouterConfig *config = &table->config;
	char	  **args = palloc(Max(trigger->tgnargs, 1) * sizeof(char *));

	for (int i = 0; i < trigger->tgnargs; i++)
		args[i] = pstrdup(trigger->tgargs[i]);
	router_config(trigger->tgnargs, args, config);
	if (config->route_by != NULL)
		table->route_by = column_number(tupdesc, config->route_by, table);
	if (config->key != NULL)
		table->key = column_number(tupdesc, config->key, table);
	table->id = column_number(tupdesc, config->id, table);
	table->id_uuid = table->id > 0 &&
		getBaseType(TupleDescAttr(tupdesc, table->id - 1)->atttypid) == UUIDOID;
	table->payload = column_number(tupdesc, config->payload, table);
	table->headers = palloc(Max(config->nheaders, 1) * sizeof(int));
	for (int i = 0; i < config->nheaders; i++)
		table->headers[i] = column_number(tupdesc, config->header_columns[i], table);
	if (config->timestamp != NULL)
	{
		table->timestamp = column_number(tupdesc, config->timestamp, table);
		if (table->timestamp > 0)
			table->timestamp_type =
				getBaseType(TupleDescAttr(tupdesc, table->timestamp - 1)->atttypid);
	}
	table->pin_settings = outbox_debezium_needs_settings(tupdesc);
	return table;
}

/*
 * The record's timestamp from the value of the timestamp column name (its
 * base type typid): a Kafka timestamp, from 1970 on, and at most an hour
 * ahead of the inserting transaction, so that no broker refuses it
 * (message.timestamp.after.max.ms) and latencies stay true.
 */
static TimestampTz
record_timestamp(const char *name, Datum value, Oid typid)
{
	/* a timestamp without time zone is taken as UTC: the same number */
	TimestampTz ts = DatumGetTimestampTz(value);

	if (TIMESTAMP_NOT_FINITE(ts) || ts < SetEpochTimestamp() ||
		ts > GetCurrentTransactionStartTimestamp() + USECS_PER_HOUR)
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("timestamp column \"%s\" holds %s, out of the range of Kafka timestamps",
						name, DatumGetCString(DirectFunctionCall1(typid == TIMESTAMPOID ?
																  timestamp_out : timestamptz_out,
																  value))),
				 errdetail("A record's timestamp is from 1970-01-01 00:00:00 UTC up to an hour after the start of the inserting transaction.")));
	return ts;
}

/*
 * outbox_router(): AFTER INSERT FOR EACH ROW; arguments keyword=value, as
 * outbox_attach_router writes them.  docs/debezium.md says what it writes.
 */
Datum
outbox_router(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	const OutboxExtension *ext;
	RouterTable *table;
	const RouterConfig *config;
	TupleDesc	tupdesc;
	HeapTuple	tuple;
	Datum		value;
	bool		isnull;
	Form_pg_attribute attr;
	int			nestlevel;
	char	   *topic;
	text	   *key = NULL;
	char	   *id_text;
	Datum		event_id = (Datum) 0;
	bool		event_id_isnull = false;
	bytea	   *payload;
	StringInfoData headers;
	TimestampTz created_at;
	bool		timestamped = false;
	bool		payload_json;
	ErrorContextCallback errcallback;

	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("function \"%s\" was not called by trigger manager", "outbox_router")));
	errcallback.callback = outbox_trigger_error_context;
	errcallback.arg = trigdata;
	errcallback.previous = error_context_stack;
	error_context_stack = &errcallback;
	if (!TRIGGER_FIRED_AFTER(trigdata->tg_event) ||
		!TRIGGER_FIRED_FOR_ROW(trigdata->tg_event) ||
		!TRIGGER_FIRED_BY_INSERT(trigdata->tg_event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("function \"%s\" must be fired AFTER INSERT FOR EACH ROW", "outbox_router"),
				 errhint("Use outbox_attach_router() to create the trigger.")));

	/*
	 * What the session keeps of the table: the arguments and columns, as
	 * they were at the first row since the table last changed.
	 */
	ext = outbox_entry(fcinfo);
	table = outbox_trigger_cache(ext, trigdata, make_router_table);
	config = &table->config;
	/* before 1.4, outbox_schema_ids has a unique key that sessions wait on */
	if ((config->options.avro || config->options.key_converter == ROUTER_KEY_AVRO) &&
		ext->version < OUTBOX_VERSION(1, 4))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("the router's avro converter needs outbox 1.4"),
				 errhint("Update the extension: ALTER EXTENSION outbox UPDATE.")));
	tupdesc = RelationGetDescr(trigdata->tg_relation);
	tuple = trigdata->tg_trigtuple;

	/*
	 * The same row gives the same topic, key and headers in any session:
	 * the settings that the text of its values reads are pinned, and so is
	 * search_path (as 1.3 pinned it for the whole function) while the text
	 * of a column read may read it.
	 */
	nestlevel = table->pin_settings ? outbox_debezium_pin_settings(NULL) : -1;
	if (table->pin_search_path)
		nestlevel = outbox_pin_search_path(nestlevel);

	/* the topic */
	if (config->route_by == NULL)
		topic = config->topic_pattern;
	else
	{
		value = column_value(tuple, tupdesc, table->route_by, config->route_by, &isnull, &attr);
		if (isnull)
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("column \"%s\" is null", config->route_by),
					 errdetail("The topic of the event is made from its value.")));
		topic = route(config->topic_pattern,
					  outbox_debezium_text(value, attr->atttypid, attr->atttypmod));
	}

	/* the key */
	if (config->key != NULL)
	{
		value = column_value(tuple, tupdesc, table->key, config->key, &isnull, &attr);
		key = outbox_router_key(ext, &config->options, topic, attr, value, isnull);
	}

	/*
	 * The id header, the text of the id column.  A UUID is the event's
	 * event_id too; an id of another type gets an event_id of its own (1.2
	 * took only UUIDs, or texts holding one).  An id used again is published
	 * again, as the router does, with an event_id of its own (enqueue.c).
	 */
	value = column_value(tuple, tupdesc, table->id, config->id, &isnull, &attr);
	if (isnull)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("column \"%s\" is null", config->id),
				 errdetail("It is the id of the event.")));
	id_text = outbox_debezium_text(value, attr->atttypid, attr->atttypmod);
	if (table->id_uuid)
		event_id = value;
	else if (config->any_id)
		event_id_isnull = true;
	else
		event_id = DirectFunctionCall1(uuid_in, CStringGetDatum(id_text));

	/* the value */
	value = column_value(tuple, tupdesc, table->payload, config->payload, &isnull, &attr);
	payload = outbox_router_value(ext, &config->options, topic, config->payload, attr, value,
								  isnull);
	/* JSON but for Avro, and the bytes of a bytea payload, which go as they are */
	payload_json = !config->options.avro &&
		(isnull || getBaseType(attr->atttypid) != BYTEAOID);

	/* the headers */
	initStringInfo(&headers);
	appendStringInfoString(&headers, "{\"id\":");
	escape_json(&headers, id_text);
	if (key != NULL && config->options.key_converter == ROUTER_KEY_AVRO)
		appendStringInfoString(&headers, ",\"" OUTBOX_KEY_BASE64_HEADER "\":\"true\"");
	for (int i = 0; i < config->nheaders; i++)
	{
		value = column_value(tuple, tupdesc, table->headers[i], config->header_columns[i],
							 &isnull, &attr);
		if (isnull)
			continue;
		appendStringInfoChar(&headers, ',');
		escape_json(&headers, config->header_names[i]);
		appendStringInfoChar(&headers, ':');
		escape_json(&headers, outbox_debezium_text(value, attr->atttypid, attr->atttypmod));
	}
	appendStringInfoChar(&headers, '}');

	/* the record's timestamp */
	if (config->timestamp != NULL)
	{
		value = column_value(tuple, tupdesc, table->timestamp, config->timestamp, &isnull,
							 &attr);
		if (!timestamp_type(table->timestamp_type))
			outbox_router_wrong_type(config->timestamp, table->timestamp_type, "timestamp",
									 TIMESTAMP_TYPES);
		if (!isnull)
		{
			created_at = record_timestamp(config->timestamp, value, table->timestamp_type);
			timestamped = true;
		}
	}
	if (nestlevel >= 0)
		AtEOXact_GUC(true, nestlevel);

	outbox_store_event(ext, cstring_to_text(topic), key, payload,
					   DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(headers.data))),
					   event_id, event_id_isnull, timestamped ? &created_at : NULL,
					   payload_json);
	error_context_stack = errcallback.previous;
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
 *		expand_payload boolean DEFAULT false, key_converter text DEFAULT NULL,
 *		schemas_enable boolean DEFAULT false,
 *		tombstone_on_empty_payload boolean DEFAULT false,
 *		converter text DEFAULT 'json')
 *
 * Publish each row inserted into tbl as the event that Debezium's outbox
 * event router makes of it, with the trigger outbox_router (replaced if it
 * exists).  Every argument is checked here.  Called with the first nine
 * arguments (1.2's signature, expand_payload DEFAULT true), it makes the
 * trigger 1.2 made: keys as strings, a null payload a tombstone, ids UUIDs;
 * with twelve (1.3's, key_converter DEFAULT 'json'), the JSON converter's
 * records.  A null key_converter is the converter's.
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

	if (PG_NARGS() != 9 && PG_NARGS() != 12 && PG_NARGS() != 13)
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
	config.options.expand = PG_ARGISNULL(8) ? PG_NARGS() == 9 : PG_GETARG_BOOL(8);
	if (PG_NARGS() >= 12)
	{
		char	   *converter = PG_NARGS() == 13 ? text_arg(fcinfo, 12) : "json";
		char	   *key = text_arg(fcinfo, 9);

		if (converter == NULL ||
			(strcmp(converter, "json") != 0 && strcmp(converter, "avro") != 0))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid converter \"%s\"", converter ? converter : "null"),
					 errdetail("It is \"json\" (Kafka's JsonConverter) or \"avro\" (Confluent's AvroConverter).")));
		config.options.avro = strcmp(converter, "avro") == 0;
		if (key == NULL && PG_NARGS() == 13)
			key = converter;
		if (key == NULL || key_converter(key) < 0 ||
			(PG_NARGS() == 12 && key_converter(key) == ROUTER_KEY_AVRO))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid key_converter \"%s\"", key ? key : "null"),
					 PG_NARGS() == 12 ?
					 errdetail("It is \"json\" (Kafka's JsonConverter) or \"string\" (StringConverter).") :
					 errdetail("It is \"json\" (Kafka's JsonConverter), \"string\" (StringConverter), \"avro\" (Confluent's AvroConverter), or null for the converter's.")));
		config.options.key_converter = key_converter(key);
		config.options.schemas = !PG_ARGISNULL(10) && PG_GETARG_BOOL(10);
		config.options.blank_tombstone = !PG_ARGISNULL(11) && PG_GETARG_BOOL(11);
		if (config.options.schemas && config.options.expand)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("schemas_enable cannot be combined with expand_payload"),
					 errdetail("An expanded payload would need the schema that the router infers from each document.")));
		if (config.options.avro && config.options.schemas)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("schemas_enable applies to the json converter only"),
					 errdetail("The AvroConverter's records carry their schema's id; the schema is in the registry.")));
		if (config.options.avro && config.options.expand)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("converter avro cannot be combined with expand_payload"),
					 errdetail("An expanded payload would need the schema that the router infers from each document.")));
	}

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
	if (PG_NARGS() == 9 &&
		typid != UUIDOID && typid != TEXTOID && typid != VARCHAROID && typid != BPCHAROID)
		outbox_router_wrong_type(config.id, typid, "id", "uuid, or text holding a UUID");
	args = lappend(args, psprintf("id=%s", config.id));
	typid = column_type(relid, config.payload, "payload");
	if (!outbox_router_payload_type(typid))
		outbox_router_wrong_type(config.payload, typid, "payload",
								 OUTBOX_ROUTER_PAYLOAD_TYPES);
	args = lappend(args, psprintf("payload=%s", config.payload));
	if (config.timestamp != NULL)
	{
		typid = column_type(relid, config.timestamp, "timestamp");
		if (!timestamp_type(typid))
			outbox_router_wrong_type(config.timestamp, typid, "timestamp", TIMESTAMP_TYPES);
		args = lappend(args, psprintf("timestamp=%s", config.timestamp));
	}
	args = lappend(args, config.options.expand ? "expand=true" : "expand=false");
	if (PG_NARGS() >= 12)
	{
		args = lappend(args, psprintf("key_converter=%s",
									  config.options.key_converter == ROUTER_KEY_JSON ? "json" :
									  config.options.key_converter == ROUTER_KEY_AVRO ? "avro" :
									  "string"));
		if (config.options.avro)
			args = lappend(args, "converter=avro");
		args = lappend(args, config.options.schemas ? "schemas_enable=true" :
					   "schemas_enable=false");
		args = lappend(args, config.options.blank_tombstone ? "tombstone_on_empty_payload=true" :
					   "tombstone_on_empty_payload=false");
		args = lappend(args, "ids=any");
	}
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
			if (strcmp(names[i], OUTBOX_KEY_BASE64_HEADER) == 0)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("header \"%s\" is reserved", names[i]),
						 errdetail("It says that a stored key is base64, and is not published.")));
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
