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
#include "format/debezium_json.h"
#include "format/format.h"

/*
 * The headers of a debezium event: {"name": "value"} if name is not NULL,
 * and with the avro converter, the one that says its key (if it has one)
 * is stored as base64; NULL if none.
 */
static Jsonb *
debezium_headers(const CaptureConfig *config, text *key, const char *name, const char *value)
{
	StringInfoData buf;

	if (name == NULL && !(config->options.avro && key != NULL))
		return NULL;
	initStringInfo(&buf);
	appendStringInfoChar(&buf, '{');
	if (name != NULL)
	{
		escape_json(&buf, name);
		appendStringInfoChar(&buf, ':');
		escape_json(&buf, value);
	}
	if (config->options.avro && key != NULL)
		appendStringInfo(&buf, "%s\"" OUTBOX_KEY_BASE64_HEADER "\":\"true\"",
						 name != NULL ? "," : "");
	appendStringInfoChar(&buf, '}');
	return DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(buf.data)));
}

/*
 * The key of a row's debezium events as stored: json, its JSON, or with
 * the avro converter, the base64 of its Avro record, its schema registered
 * under <topic>-key.
 */
static text *
stored_key(const OutboxExtension *ext, const CaptureConfig *config,
		   const CaptureTable *table, const char *topic, HeapTuple tuple, const char *json)
{
	DebeziumOptions options = config->options;
	StringInfoData record;
	bytea	   *avro;
	char	   *base64;
	int			len;

	if (!config->options.avro)
		return cstring_to_text(json);
	options.schemas = true;
	initStringInfo(&record);
	outbox_debezium_key(&record, &options, topic, table->tupdesc, tuple,
						table->nkeys, table->key_attnums);
	avro = outbox_debezium_avro(ext, record.data, psprintf("%s-key", topic));
	base64 = palloc(pg_b64_enc_len(VARSIZE_ANY_EXHDR(avro)) + 1);
	len = pg_b64_encode(VARDATA_ANY(avro), VARSIZE_ANY_EXHDR(avro), base64,
						pg_b64_enc_len(VARSIZE_ANY_EXHDR(avro)));
	return cstring_to_text_with_len(base64, len);
}

/*
 * One change event of the debezium format: its value as the JSON converter
 * writes it, or the avro converter, its schema registered under
 * <topic>-value.
 */
static OutboxDraft *
debezium_draft(const OutboxExtension *ext, const CaptureConfig *config, text *topic,
			   const DebeziumSource *source, const CaptureTable *table, char op,
			   HeapTuple before, HeapTuple after, const bool *unavailable,
			   text *key, Jsonb *headers)
{
	DebeziumOptions options = config->options;
	OutboxDraft *draft = palloc0(sizeof(OutboxDraft));
	StringInfoData value;

	options.schemas = options.schemas || config->options.avro;
	initStringInfo(&value);
	outbox_debezium_envelope(&value, &options, source, op, table->tupdesc,
							 before, after, unavailable);
	if (config->options.avro)
		draft->payload = outbox_debezium_avro(ext, value.data,
											  psprintf("%s-value", text_to_cstring(topic)));
	else
		draft->payload = outbox_utf8_payload(cstring_to_text_with_len(value.data, value.len));
	draft->topic = topic;
	draft->key = key;
	draft->headers = headers;
	draft->json = !config->options.avro;
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
 * The events of a change in the debezium format (docs/debezium.md).
 */
List *
outbox_debezium_format_event(const OutboxExtension *ext, const CaptureConfig *config,
							 const CaptureTable *table, char op, HeapTuple before,
							 HeapTuple after, const char *snapshot)
{
	char	   *topic_name = outbox_debezium_topic(config->topic, table->schema, table->table);
	text	   *topic = cstring_to_text(topic_name);
	DebeziumSource source;
	int			nestlevel;
	char	   *old_key = NULL;
	char	   *new_key = NULL;
	HeapTuple	old_row = before;	/* the before that the events show */
	bool	   *unavailable = NULL;
	List	   *drafts = NIL;

	/* skipped.operations: an update of the key too, as one update */
	if (strchr(config->skipped, op) != NULL)
		return NIL;
	nestlevel = outbox_debezium_pin_settings(table->tupdesc);
	if (config->by_identity && table->identity != REPLICA_IDENTITY_FULL && before != NULL)
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
			outbox_debezium_key(&buf, &config->options, topic_name,
								table->tupdesc, before,
								table->nkeys, table->key_attnums);
			old_key = buf.data;
		}
		if (after != NULL)
		{
			initStringInfo(&buf);
			outbox_debezium_key(&buf, &config->options, topic_name,
								table->tupdesc, after,
								table->nkeys, table->key_attnums);
			new_key = buf.data;
		}
	}

	if (op == 'u' && old_key != NULL && strcmp(old_key, new_key) != 0)
	{
		/* a new key: the old one deleted, the new one created */
		text	   *old_stored = stored_key(ext, config, table, topic_name, before, old_key);
		text	   *new_stored = stored_key(ext, config, table, topic_name, after, new_key);

		drafts = lappend(drafts,
						 debezium_draft(ext, config, topic, &source, table, 'd', old_row, NULL,
										NULL, old_stored,
										debezium_headers(config, old_stored,
														 "__debezium.newkey", new_key)));
		if (config->tombstones)
			drafts = lappend(drafts,
							 tombstone(topic, old_stored,
									   debezium_headers(config, old_stored, NULL, NULL)));
		drafts = lappend(drafts,
						 debezium_draft(ext, config, topic, &source, table, 'c', NULL, after,
										unavailable, new_stored,
										debezium_headers(config, new_stored,
														 "__debezium.oldkey", old_key)));
	}
	else
	{
		char	   *key = after != NULL ? new_key : old_key;
		text	   *stored = key ? stored_key(ext, config, table, topic_name,
											  after != NULL ? after : before, key) : NULL;

		drafts = lappend(drafts,
						 debezium_draft(ext, config, topic, &source, table, op, old_row, after,
										unavailable, stored,
										debezium_headers(config, stored, NULL, NULL)));
		if (op == 'd' && config->tombstones && stored != NULL)
			drafts = lappend(drafts,
							 tombstone(topic, stored,
									   debezium_headers(config, stored, NULL, NULL)));
	}
	outbox_debezium_unpin_settings(nestlevel);
	return drafts;
}

/*
 * Register the Avro schemas of the keys (if it has key columns) and values
 * of rel's change events, as the avro converter of config writes them.
 */
void
outbox_capture_register_avro(const OutboxExtension *ext, const CaptureConfig *config,
					  Relation rel)
{
	CaptureTable table;
	char	   *topic;
	StringInfoData schema;

	outbox_capture_table(config, rel, RelationGetDescr(rel), &table);
	topic = outbox_debezium_topic(config->topic, table.schema, table.table);
	initStringInfo(&schema);
	if (table.nkeys > 0)
	{
		outbox_debezium_key_schema(&schema, &config->options, topic, table.tupdesc,
								   table.nkeys, table.key_attnums);
		(void) outbox_debezium_avro_register(ext, schema.data, psprintf("%s-key", topic));
		resetStringInfo(&schema);
	}
	outbox_debezium_value_schema(&schema, &config->options, topic, table.tupdesc);
	(void) outbox_debezium_avro_register(ext, schema.data, psprintf("%s-value", topic));
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

/* the connector's defaults, with which the router's keys and values are written */
static const DebeziumOptions router_options = {DEBEZIUM_DECIMALS_PRECISE, true, false};

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
 * The record value of a payload, the value of column attr called name: see
 * the file header.  NULL: a tombstone.
 */
bytea *
outbox_router_value(const RouterOptions *options, const char *name,
					Form_pg_attribute attr, Datum value, bool isnull)
{
	Oid			typid = getBaseType(attr->atttypid);
	char	   *json = NULL;
	StringInfoData out;

	if (!outbox_router_payload_type(typid))
		outbox_router_wrong_type(name, typid, "payload", OUTBOX_ROUTER_PAYLOAD_TYPES);
	if (isnull && options->null_tombstone)
		return NULL;
	if (!isnull && typid == BYTEAOID)
		return DatumGetByteaPCopy(value);	/* its bytes, as ByteArrayConverter */
	if (!isnull && typid == JSONBOID)
	{
		Jsonb	   *jb = DatumGetJsonbP(value);

		json = JsonbToCString(NULL, &jb->root, VARSIZE(jb));
	}
	else if (!isnull)
		json = TextDatumGetCString(value);
	if (json != NULL && options->blank_tombstone && blank(json))
		return NULL;

	initStringInfo(&out);
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
 * The record key of the value of key column attr, as the key converter
 * writes it: JSON (with its schema if schemas_enable), or the text of the
 * value (Kafka's StringConverter).  NULL: no key.
 */
text *
outbox_router_key(const RouterOptions *options, Form_pg_attribute attr, Datum value,
				  bool isnull)
{
	StringInfoData out;

	if (!options->key_json)
		return isnull ? NULL : cstring_to_text(outbox_debezium_text(value, attr->atttypid,
																	 attr->atttypmod));
	initStringInfo(&out);
	if (options->schemas)
	{
		appendStringInfoString(&out, "{\"schema\":");
		outbox_debezium_schema(&out, &router_options, attr->atttypid, attr->atttypmod,
							   !attr->attnotnull);
		appendStringInfoString(&out, ",\"payload\":");
	}
	outbox_debezium_column(&out, &router_options, value, isnull, attr->atttypid,
						   attr->atttypmod);
	if (options->schemas)
		appendStringInfoChar(&out, '}');
	return cstring_to_text_with_len(out.data, out.len);
}
