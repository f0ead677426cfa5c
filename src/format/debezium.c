/*-------------------------------------------------------------------------
 *
 * debezium.c
 *		The debezium format: the events of a row's change as Debezium's
 *		PostgreSQL connector writes them (which rows an event shows, keys
 *		that change, tombstones, headers, the Avro converter's schemas
 *		registered on attach), with the values of debezium_json.c and
 *		debezium_avro.c; and the key and value of an outbox table's row as
 *		Debezium's outbox event router writes them.  docs/debezium.md says
 *		what each writes.
 *
 * src/format/debezium.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "common/base64.h"
#include "common/jsonapi.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "base/event.h"
#include "format/debezium.h"
#include "format/debezium_avro.h"
#include "format/debezium_defaults.h"
#include "format/debezium_json.h"
#include "format/format.h"
#include "format/format_internal.h"

/* the connector's settings, as a capture trigger's arguments say them */
typedef struct DebeziumConfig
{
	bool		tombstones;		/* tombstones.on.delete */
	char		skipped[5];		/* skipped.operations: of c, u, d, t */
	DebeziumOptions options;	/* decimal.handling.mode, the converter and
								 * the like */
	bool		by_identity;	/* before and TOASTed values as REPLICA IDENTITY
								 * has them; false for a 1.2 trigger: whole rows */
	bool		defaults;		/* the columns' defaults, and the named types
								 * of options; false for a 1.3 trigger */
} DebeziumConfig;

/*
 * The operations of skipped.operations: "none", or a list of c, u, d and
 * t, separated by commas; into skipped, as letters.  False if value is
 * not such a list.
 */
static bool
parse_skipped(const char *value, char *skipped)
{
	int			n = 0;

	skipped[0] = '\0';
	if (strcmp(value, "none") == 0)
		return true;
	for (const char *c = value;; c++)
	{
		while (*c == ' ')
			c++;
		if (*c == '\0' || strchr("cudt", *c) == NULL)
			return false;
		if (strchr(skipped, *c) == NULL)
		{
			skipped[n++] = *c;
			skipped[n] = '\0';
		}
		c++;
		while (*c == ' ')
			c++;
		if (*c == '\0')
			return true;
		if (*c != ',')
			return false;
	}
}

/*
 * decimal.handling.mode's value, into *decimals; false if unknown.
 */
static bool
parse_decimals(const char *value, DebeziumDecimals *decimals)
{
	if (strcmp(value, "precise") == 0)
		*decimals = DEBEZIUM_DECIMALS_PRECISE;
	else if (strcmp(value, "string") == 0)
		*decimals = DEBEZIUM_DECIMALS_STRING;
	else if (strcmp(value, "double") == 0)
		*decimals = DEBEZIUM_DECIMALS_DOUBLE;
	else
		return false;
	return true;
}

/*
 * The connector's settings among outbox_attach's arguments, into
 * settings->options: tombstones (1.2: the last; false if NULL), then (1.3:
 * the last five; 1.4: six) each NULL giving the connector's default:
 * decimal_handling (precise), tombstones (true), skipped_operations ('t'),
 * schemas_enable (false), converter (json) and replace_null_with_default
 * (true).  A 1.3 database's triggers write no defaults, as 1.3 did.
 */
static void
debezium_attach_options(FunctionCallInfo fcinfo, CaptureConfig *config)
{
	DebeziumConfig *settings = palloc0(sizeof(DebeziumConfig));

	config->options = settings;
	settings->tombstones = PG_NARGS() >= 6 && !PG_ARGISNULL(5) && PG_GETARG_BOOL(5);
	if (PG_NARGS() < 10)
		return;
	if (PG_NARGS() == 11)
	{
		settings->defaults = true;
		settings->options.named_types = true;
		settings->options.replace_nulls = PG_ARGISNULL(10) || PG_GETARG_BOOL(10);
	}
	settings->by_identity = true;
	settings->options.hstore_json = true;
	settings->tombstones = PG_ARGISNULL(5) || PG_GETARG_BOOL(5);
	settings->options.decimals = DEBEZIUM_DECIMALS_PRECISE;
	if (!PG_ARGISNULL(6) &&
		!parse_decimals(text_to_cstring(PG_GETARG_TEXT_PP(6)), &settings->options.decimals))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown decimal_handling \"%s\"", text_to_cstring(PG_GETARG_TEXT_PP(6))),
				 errdetail("The modes are \"precise\", \"string\" and \"double\", as the connector's decimal.handling.mode.")));
	strcpy(settings->skipped, "t");
	if (!PG_ARGISNULL(7) &&
		!parse_skipped(text_to_cstring(PG_GETARG_TEXT_PP(7)), settings->skipped))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid skipped_operations \"%s\"", text_to_cstring(PG_GETARG_TEXT_PP(7))),
				 errdetail("It is \"none\" or a list of c, u, d and t separated by commas, as the connector's skipped.operations.")));
	settings->options.schemas = !PG_ARGISNULL(8) && PG_GETARG_BOOL(8);
	if (!PG_ARGISNULL(9))
	{
		char	   *converter = text_to_cstring(PG_GETARG_TEXT_PP(9));

		settings->options.avro = strcmp(converter, "avro") == 0;
		if (!settings->options.avro && strcmp(converter, "json") != 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("unknown converter \"%s\"", converter),
					 errdetail("The converters are \"json\" (Kafka Connect's JsonConverter) and \"avro\" (Confluent's AvroConverter).")));
	}
	if (settings->options.avro && settings->options.schemas)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("schemas_enable applies to the json converter only"),
				 errdetail("The avro converter registers the schemas with the Schema Registry; records carry their ids.")));
}

/*
 * The connector's settings among a capture trigger's keyword arguments,
 * into config->options, those a 1.2 trigger has not keeping what it wrote
 * (decimals as strings, whole rows, hstore as its text), and those a 1.3
 * one has not (defaults, named types); see OutboxFormat.read_args.
 */
static const char *
debezium_read_args(CaptureConfig *config, List *args)
{
	DebeziumConfig *settings = palloc0(sizeof(DebeziumConfig));
	ListCell   *lc;

	config->options = settings;
	settings->options.decimals = DEBEZIUM_DECIMALS_STRING;
	foreach(lc, args)
	{
		const char *arg = lfirst(lc);
		const char *value;

		if (outbox_keyword_arg(arg, "tombstones", &value))
			settings->tombstones = strcmp(value, "true") == 0;
		else if (outbox_keyword_arg(arg, "decimal_handling", &value) &&
				 parse_decimals(value, &settings->options.decimals))
		{
			/* a 1.3 trigger: the connector's rows */
			settings->by_identity = true;
			settings->options.hstore_json = true;
		}
		else if (outbox_keyword_arg(arg, "skipped_operations", &value) &&
				 parse_skipped(value, settings->skipped))
			;
		else if (outbox_keyword_arg(arg, "schemas_enable", &value))
			settings->options.schemas = strcmp(value, "true") == 0;
		else if (outbox_keyword_arg(arg, "converter", &value) && strcmp(value, "avro") == 0)
			settings->options.avro = true;
		else if (outbox_keyword_arg(arg, "replace_null_with_default", &value))
		{
			/* a 1.4 trigger */
			settings->defaults = true;
			settings->options.named_types = true;
			settings->options.replace_nulls = strcmp(value, "true") == 0;
		}
		else
			return arg;
	}
	return NULL;
}

/*
 * The trigger arguments that say config's connector settings, appended to
 * args: those of a 1.4 or 1.3 trigger, or only tombstones of a 1.2 one.
 */
static List *
debezium_write_args(const CaptureConfig *config, List *args)
{
	const DebeziumConfig *settings = config->options;

	if (settings->by_identity)
	{
		static const char *const decimals[] = {"precise", "string", "double"};

		StringInfoData skipped;

		initStringInfo(&skipped);
		for (const char *c = settings->skipped; *c; c++)
			appendStringInfo(&skipped, "%s%c", c > settings->skipped ? "," : "", *c);
		args = lappend(args, psprintf("decimal_handling=%s",
									  decimals[settings->options.decimals]));
		args = lappend(args, settings->tombstones ? "tombstones=true" : "tombstones=false");
		args = lappend(args, psprintf("skipped_operations=%s",
									  skipped.len > 0 ? skipped.data : "none"));
		args = lappend(args, settings->options.schemas ? "schemas_enable=true" :
					   "schemas_enable=false");
		if (settings->options.avro)
			args = lappend(args, "converter=avro");
		if (settings->defaults)
			args = lappend(args, settings->options.replace_nulls ?
						   "replace_null_with_default=true" :
						   "replace_null_with_default=false");
	}
	else if (settings->tombstones)
		args = lappend(args, "tombstones=true");
	return args;
}

/* the topic of a table's events: the prefix, then schema and table */
static char *
debezium_topic(const CaptureConfig *config, const char *schema, const char *table)
{
	return outbox_debezium_topic(config->topic, schema, table);
}

/*
 * The headers of a debezium event: {"name": "value"} if name is not NULL,
 * and with the avro converter, the one that says its key (if it has one)
 * is stored as base64; NULL if none.
 */
static Jsonb *
debezium_headers(const CaptureConfig *config, text *key, const char *name, const char *value)
{
	const DebeziumConfig *settings = config->options;
	StringInfoData buf;

	if (name == NULL && !(settings->options.avro && key != NULL))
		return NULL;
	initStringInfo(&buf);
	appendStringInfoChar(&buf, '{');
	if (name != NULL)
	{
		escape_json(&buf, name);
		appendStringInfoChar(&buf, ':');
		escape_json(&buf, value);
	}
	if (settings->options.avro && key != NULL)
		appendStringInfo(&buf, "%s\"" OUTBOX_KEY_BASE64_HEADER "\":\"true\"",
						 name != NULL ? "," : "");
	appendStringInfoChar(&buf, '}');
	return DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(buf.data)));
}

/*
 * A key, given as the JSON converter writes it with its schema, as the
 * AvroConverter writes it, stored as base64 (the event's headers say so
 * with OUTBOX_KEY_BASE64_HEADER): its schema registered under
 * <topic>-key.
 */
static text *
avro_key(const OutboxExtension *ext, const char *record, const char *topic)
{
	bytea	   *avro = outbox_debezium_avro(ext, record, psprintf("%s-key", topic));
	char	   *base64 = palloc(pg_b64_enc_len(VARSIZE_ANY_EXHDR(avro)) + 1);
	int			len;

	len = pg_b64_encode(VARDATA_ANY(avro), VARSIZE_ANY_EXHDR(avro), base64,
						pg_b64_enc_len(VARSIZE_ANY_EXHDR(avro)));
	return cstring_to_text_with_len(base64, len);
}

/*
 * The key of a row's debezium events as stored: json, its JSON, or with
 * the avro converter, the base64 of its Avro record, its schema registered
 * under <topic>-key; written with options.
 */
static text *
stored_key(const OutboxExtension *ext, const DebeziumOptions *table_options,
		   const CaptureTable *table, const char *topic, HeapTuple tuple, const char *json)
{
	DebeziumOptions options = *table_options;
	StringInfoData record;

	if (!options.avro)
		return cstring_to_text(json);
	options.schemas = true;
	initStringInfo(&record);
	outbox_debezium_key(&record, &options, topic, table->tupdesc, tuple,
						table->nkeys, table->key_attnums);
	return avro_key(ext, record.data, topic);
}

/*
 * One change event of the debezium format: its value as the JSON converter
 * writes it with options, or the avro converter, its schema registered
 * under <topic>-value.
 */
static OutboxDraft *
debezium_draft(const OutboxExtension *ext, const DebeziumOptions *table_options, text *topic,
			   const DebeziumSource *source, const CaptureTable *table, char op,
			   HeapTuple before, HeapTuple after, const bool *unavailable,
			   text *key, Jsonb *headers)
{
	DebeziumOptions options = *table_options;
	OutboxDraft *draft = palloc0(sizeof(OutboxDraft));
	StringInfoData value;

	options.schemas = options.schemas || options.avro;
	initStringInfo(&value);
	outbox_debezium_envelope(&value, &options, source, op, table->tupdesc,
							 before, after, unavailable);
	if (options.avro)
		draft->payload = outbox_debezium_avro(ext, value.data,
											  psprintf("%s-value", text_to_cstring(topic)));
	else
		draft->payload = outbox_utf8_payload(cstring_to_text_with_len(value.data, value.len));
	draft->topic = topic;
	draft->key = key;
	draft->headers = headers;
	draft->json = !options.avro;
	return draft;
}

/*
 * The tombstone of key on topic, with headers.
 */
static OutboxDraft *
tombstone(text *topic, text *key, Jsonb *headers)
{
	OutboxDraft *draft = palloc0(sizeof(OutboxDraft));

	draft->topic = topic;
	draft->key = key;
	draft->headers = headers;
	return draft;
}

/*
 * The old row of an update or a delete as logical decoding has it when the
 * table's REPLICA IDENTITY is not FULL: the identity's columns, the others
 * null; NULL without identity, or for an update that changes none of them
 * (and has none stored out of line, which PostgreSQL logs then too).
 */
static HeapTuple
identity_before(const CaptureTable *table, char op, HeapTuple before, HeapTuple after)
{
	TupleDesc	tupdesc = table->tupdesc;
	Datum	   *values;
	bool	   *nulls;
	bool		logged = op == 'd';
	int			attnum = -1;

	if (bms_is_empty(table->identity_attrs))
		return NULL;
	while (!logged &&
		   (attnum = bms_next_member(table->identity_attrs, attnum)) >= 0)
	{
		AttrNumber	attno = attnum + FirstLowInvalidHeapAttributeNumber;
		Form_pg_attribute attr = TupleDescAttr(tupdesc, attno - 1);
		bool		oldnull;
		bool		newnull;
		Datum		old = heap_getattr(before, attno, tupdesc, &oldnull);
		Datum		new = heap_getattr(after, attno, tupdesc, &newnull);

		logged = oldnull != newnull ||
			(!oldnull && !datumIsEqual(old, new, attr->attbyval, attr->attlen)) ||
			(!oldnull && attr->attlen == -1 && VARATT_IS_EXTERNAL(DatumGetPointer(old)));
	}
	if (!logged)
		return NULL;
	values = palloc(tupdesc->natts * sizeof(Datum));
	nulls = palloc(tupdesc->natts * sizeof(bool));
	heap_deform_tuple(before, tupdesc, values, nulls);
	for (int i = 0; i < tupdesc->natts; i++)
		if (!bms_is_member(i + 1 - FirstLowInvalidHeapAttributeNumber, table->identity_attrs))
			nulls[i] = true;
	return heap_form_tuple(tupdesc, values, nulls);
}

/*
 * The columns of an update's new row that are TOASTed values it left
 * unchanged (the old row points to the same stored value), which logical
 * decoding does not have when the REPLICA IDENTITY is not FULL; NULL if
 * there are none.
 */
static bool *
unchanged_toasted(const CaptureTable *table, HeapTuple before, HeapTuple after)
{
	TupleDesc	tupdesc = table->tupdesc;
	bool	   *unchanged = NULL;

	for (int i = 0; i < tupdesc->natts; i++)
	{
		Form_pg_attribute attr = TupleDescAttr(tupdesc, i);
		bool		oldnull;
		bool		newnull;
		Datum		old;
		Datum		new;

		if (attr->attisdropped || attr->attlen != -1)
			continue;
		old = heap_getattr(before, i + 1, tupdesc, &oldnull);
		new = heap_getattr(after, i + 1, tupdesc, &newnull);
		if (oldnull || newnull ||
			!VARATT_IS_EXTERNAL_ONDISK(DatumGetPointer(new)) ||
			!VARATT_IS_EXTERNAL_ONDISK(DatumGetPointer(old)) ||
			memcmp(DatumGetPointer(old), DatumGetPointer(new),
				   VARSIZE_EXTERNAL(DatumGetPointer(new))) != 0)
			continue;
		if (unchanged == NULL)
			unchanged = palloc0(tupdesc->natts * sizeof(bool));
		unchanged[i] = true;
	}
	return unchanged;
}

/*
 * The events of a change in the debezium format (docs/debezium.md); see
 * OutboxFormat.change.
 */
static List *
debezium_change(const OutboxExtension *ext, const CaptureConfig *config,
				const CaptureTable *table, char op, HeapTuple before, HeapTuple after,
				const char *snapshot)
{
	const DebeziumConfig *settings = config->options;
	char	   *topic_name = table->topic != NULL ? table->topic :
		outbox_debezium_topic(config->topic, table->schema, table->table);
	text	   *topic = cstring_to_text(topic_name);
	DebeziumSource source;
	int			nestlevel;
	char	   *old_key = NULL;
	char	   *new_key = NULL;
	HeapTuple	old_row = before;	/* the before that the events show */
	bool	   *unavailable = NULL;
	List	   *drafts = NIL;
	DebeziumOptions options = settings->options;

	/* skipped.operations: an update of the key too, as one update */
	if (strchr(settings->skipped, op) != NULL)
		return NIL;
	if (settings->defaults)
		options.defaults = outbox_debezium_defaults(table->relid, table->tupdesc);
	nestlevel = outbox_debezium_pin_settings(table->tupdesc);
	if (settings->by_identity && table->identity != REPLICA_IDENTITY_FULL && before != NULL)
	{
		old_row = identity_before(table, op, before, after);
		if (after != NULL)
			unavailable = unchanged_toasted(table, before, after);
	}

	source.prefix = config->topic;
	source.schema = table->schema;
	source.table = table->table;
	source.snapshot = snapshot;
	source.changed_at = GetCurrentTransactionStartTimestamp();

	if (table->nkeys > 0)
	{
		StringInfoData buf;

		if (before != NULL)
		{
			initStringInfo(&buf);
			outbox_debezium_key(&buf, &options, topic_name,
								table->tupdesc, before,
								table->nkeys, table->key_attnums);
			old_key = buf.data;
		}
		if (after != NULL)
		{
			initStringInfo(&buf);
			outbox_debezium_key(&buf, &options, topic_name,
								table->tupdesc, after,
								table->nkeys, table->key_attnums);
			new_key = buf.data;
		}
	}

	if (op == 'u' && old_key != NULL && strcmp(old_key, new_key) != 0)
	{
		/* a new key: the old one deleted, the new one created */
		text	   *old_stored = stored_key(ext, &options, table, topic_name, before, old_key);
		text	   *new_stored = stored_key(ext, &options, table, topic_name, after, new_key);

		drafts = lappend(drafts,
						 debezium_draft(ext, &options, topic, &source, table, 'd', old_row, NULL,
										NULL, old_stored,
										debezium_headers(config, old_stored,
														 "__debezium.newkey", new_key)));
		if (settings->tombstones)
			drafts = lappend(drafts,
							 tombstone(topic, old_stored,
									   debezium_headers(config, old_stored, NULL, NULL)));
		drafts = lappend(drafts,
						 debezium_draft(ext, &options, topic, &source, table, 'c', NULL, after,
										unavailable, new_stored,
										debezium_headers(config, new_stored,
														 "__debezium.oldkey", old_key)));
	}
	else
	{
		char	   *key = after != NULL ? new_key : old_key;
		text	   *stored = key ? stored_key(ext, &options, table, topic_name,
											  after != NULL ? after : before, key) : NULL;

		drafts = lappend(drafts,
						 debezium_draft(ext, &options, topic, &source, table, op, old_row, after,
										unavailable, stored,
										debezium_headers(config, stored, NULL, NULL)));
		if (op == 'd' && settings->tombstones && stored != NULL)
			drafts = lappend(drafts,
							 tombstone(topic, stored,
									   debezium_headers(config, stored, NULL, NULL)));
	}
	outbox_debezium_unpin_settings(nestlevel);
	return drafts;
}

/*
 * With the avro converter, register the Avro schemas of the keys (if it has
 * key columns) and values of rel's change events, as the converter writes
 * them: now for a table, at their first change for the partitions of a
 * partitioned one.
 */
static void
debezium_attached(const OutboxExtension *ext, const CaptureConfig *config, Relation rel)
{
	const DebeziumConfig *settings = config->options;
	DebeziumOptions options = settings->options;
	CaptureTable table;
	char	   *topic;
	StringInfoData schema;

	if (!settings->options.avro || rel->rd_rel->relkind != RELKIND_RELATION)
		return;
	outbox_capture_table(config, rel, RelationGetDescr(rel), &table);
	if (settings->defaults)
		options.defaults = outbox_debezium_defaults(table.relid, table.tupdesc);
	topic = outbox_debezium_topic(config->topic, table.schema, table.table);
	initStringInfo(&schema);
	if (table.nkeys > 0)
	{
		outbox_debezium_key_schema(&schema, &options, topic, table.tupdesc,
								   table.nkeys, table.key_attnums);
		(void) outbox_debezium_avro_register(ext, schema.data, psprintf("%s-key", topic));
		resetStringInfo(&schema);
	}
	outbox_debezium_value_schema(&schema, &options, topic, table.tupdesc);
	(void) outbox_debezium_avro_register(ext, schema.data, psprintf("%s-value", topic));
}

const OutboxFormat outbox_debezium_format = {
	.name = "debezium",
	.attach_options = debezium_attach_options,
	.read_args = debezium_read_args,
	.write_args = debezium_write_args,
	.topic = debezium_topic,
	.attached = debezium_attached,
	.change = debezium_change,
};

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

/* the deepest nesting expanded, Jackson's (StreamReadConstraints) */
#define MAX_JSON_DEPTH 1000

/*
 * Append the expansion of JSON text json to out; false (out as it was) if
 * it is not valid JSON.  name is the payload column.
 */
static bool
expand_json(StringInfo out, char *json, const char *name)
{
	JsonLexContext *lex;
	JsonSemAction sem = {0};
	Expansion	x = {0};
	int			start = out->len;

	if (outbox_json_too_deep(json, MAX_JSON_DEPTH))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("payload column \"%s\" nests JSON deeper than %d levels", name, MAX_JSON_DEPTH),
				 errdetail("An expanded payload may nest objects and arrays %d levels deep, as Jackson parses it for Debezium.",
						   MAX_JSON_DEPTH),
				 errhint("Attach the router with expand_payload => false to publish the payload as a JSON string.")));
	lex = makeJsonLexContextCstringLen(json, strlen(json), GetDatabaseEncoding(), true);
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
 * The type of a column given for one purpose is not one of those it can
 * have.
 */
void
outbox_router_wrong_type(const char *name, Oid typid, const char *what,
						 const char *types)
{
	ereport(ERROR,
			(errcode(ERRCODE_DATATYPE_MISMATCH),
			 errmsg("%s column \"%s\" is of type %s", what, name, format_type_be(typid)),
			 errdetail("It must be %s.", types)));
}

/* Is typid a type that a payload column can have (its base type, if a domain)? */
bool
outbox_router_payload_type(Oid typid)
{
	return typid == JSONBOID || typid == JSONOID || typid == TEXTOID ||
		typid == VARCHAROID || typid == BPCHAROID || typid == BYTEAOID;
}

/*
 * The connector's defaults, with which the router's keys and values are
 * written: with the JSON converter, and with the AvroConverter.
 */
static const DebeziumOptions router_options = {DEBEZIUM_DECIMALS_PRECISE, true, false, false};
static const DebeziumOptions router_avro_options = {DEBEZIUM_DECIMALS_PRECISE, true, true, true};

/*
 * Is str empty or white space only, as Java's String.trim() sees it?
 */
static bool
blank(const char *str)
{
	for (; *str != '\0'; str++)
		if ((unsigned char) *str > ' ')
			return false;
	return true;
}

/*
 * Append to out the JSON converter's record of the value of column attr,
 * with schemas: {"schema":...,"payload":...}.  schema_typid is the type
 * whose schema it has.
 */
static void
router_record(StringInfo out, const DebeziumOptions *options, Form_pg_attribute attr,
			  Oid schema_typid, Datum value, bool isnull)
{
	appendStringInfoString(out, "{\"schema\":");
	outbox_debezium_schema(out, options, schema_typid, attr->atttypmod, !attr->attnotnull);
	appendStringInfoString(out, ",\"payload\":");
	outbox_debezium_column(out, options, value, isnull, attr->atttypid, attr->atttypmod);
	appendStringInfoChar(out, '}');
}

/*
 * The record value of a payload, the value of column attr called name,
 * an event of topic: see the file header.  With the AvroConverter, its
 * schema registered under <topic>-value (the caller holds a transaction).
 * NULL: a tombstone.
 */
bytea *
outbox_router_value(const OutboxExtension *ext, const RouterOptions *options,
					const char *topic, const char *name, Form_pg_attribute attr,
					Datum value, bool isnull)
{
	Oid			typid = getBaseType(attr->atttypid);
	char	   *json = NULL;
	StringInfoData out;

	if (!outbox_router_payload_type(typid))
		outbox_router_wrong_type(name, typid, "payload", OUTBOX_ROUTER_PAYLOAD_TYPES);
	/* the AvroConverter writes a null as no value: a tombstone */
	if (isnull && (options->null_tombstone || options->avro))
		return NULL;
	if (!isnull && typid == BYTEAOID && !options->avro)
		return DatumGetByteaPCopy(value);	/* its bytes, as ByteArrayConverter */
	if (!isnull && typid == JSONBOID)
	{
		Jsonb	   *jb = DatumGetJsonbP(value);

		json = JsonbToCString(NULL, &jb->root, VARSIZE(jb));
	}
	else if (!isnull && typid != BYTEAOID)
		json = TextDatumGetCString(value);
	if (json != NULL && options->blank_tombstone && blank(json))
		return NULL;

	initStringInfo(&out);
	if (options->avro)
	{
		router_record(&out, &router_avro_options, attr, typid, value, isnull);
		return outbox_debezium_avro(ext, out.data, psprintf("%s-value", topic));
	}
	if (options->schemas)
	{
		appendStringInfoString(&out, "{\"schema\":");
		outbox_debezium_schema(&out, &router_options, typid, attr->atttypmod, !attr->attnotnull);
		appendStringInfoString(&out, ",\"payload\":");
	}
	if (json == NULL)
		appendStringInfoString(&out, "null");
	else if (!options->expand || (json[0] != '{' && json[0] != '[') ||
			 !expand_json(&out, json, name))
		escape_json(&out, json);
	if (options->schemas)
		appendStringInfoChar(&out, '}');
	return outbox_utf8_payload(cstring_to_text_with_len(out.data, out.len));
}

/*
 * The record key of the value of key column attr, an event of topic, as
 * the key converter writes it: JSON (with its schema if schemas_enable),
 * the text of the value (Kafka's StringConverter), or the AvroConverter's
 * record stored as base64 (its schema registered under <topic>-key; the
 * caller holds a transaction and adds OUTBOX_KEY_BASE64_HEADER).  NULL:
 * no key.
 */
text *
outbox_router_key(const OutboxExtension *ext, const RouterOptions *options,
				  const char *topic, Form_pg_attribute attr, Datum value, bool isnull)
{
	StringInfoData out;

	if (options->key_converter == ROUTER_KEY_STRING)
		return isnull ? NULL : cstring_to_text(outbox_debezium_text(value, attr->atttypid,
																	 attr->atttypmod));
	initStringInfo(&out);
	if (options->key_converter == ROUTER_KEY_AVRO)
	{
		/* the AvroConverter writes a null as no key */
		if (isnull)
			return NULL;
		router_record(&out, &router_avro_options, attr, attr->atttypid, value, false);
		return avro_key(ext, out.data, topic);
	}
	if (options->schemas)
		router_record(&out, &router_options, attr, attr->atttypid, value, isnull);
	else
		outbox_debezium_column(&out, &router_options, value, isnull, attr->atttypid,
							   attr->atttypmod);
	return cstring_to_text_with_len(out.data, out.len);
}
