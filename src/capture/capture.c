/*-------------------------------------------------------------------------
 *
 * capture.c
 *		Row changes as events: the capture trigger's arguments
 *		(CaptureConfig), the table as its events name it (CaptureTable),
 *		and the events of one row's change in either format, the
 *		extension's envelope or Debezium's (debezium.c), which the trigger
 *		(attach.c) and the snapshot's chunks (snapshot.c) both build.  The
 *		formats are in README.md (outbox_attach) and docs/debezium.md;
 *		docs/design.md, "Capture, the router and snapshots", says why.
 *
 * src/capture/capture.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "access/xact.h"
#include "catalog/pg_class.h"
#include "catalog/pg_index.h"
#include "catalog/pg_trigger.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "common/base64.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/relcache.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "base/catalog.h"
#include "base/event.h"
#include "capture/capture.h"
#include "format/debezium_avro.h"
#include "format/debezium_json.h"
#include "format/format.h"
#include "queue/enqueue.h"

/*
 * Is arg "name=value"?  Then *value points at value.
 */
static bool
keyword_arg(const char *arg, const char *name, const char **value)
{
	size_t		len = strlen(name);

	if (strncmp(arg, name, len) != 0 || arg[len] != '=')
		return false;
	*value = arg + len + 1;
	return true;
}

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
 * The configuration of a captured table from its trigger's arguments:
 * (topic [, key_column ...]) for the outbox format, keywords
 * (format=debezium, topic=..., decimal_handling=..., tombstones=...,
 * skipped_operations=..., schemas_enable=..., key=... ...) otherwise;
 * "=" cannot be in a topic name, so the two do not mix.  A 1.2 trigger
 * has no decimal_handling: it keeps what 1.2 wrote (decimals as strings,
 * whole rows, hstore as its text, truncates, tombstones if it says so).
 * Bad arguments are an error.
 */
void
outbox_capture_config(int nargs, char **args, CaptureConfig *config)
{
	const char *value;

	memset(config, 0, sizeof(*config));
	if (nargs < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("no topic given"),
				 errdetail("The trigger's first argument is the topic."),
				 errhint("Use outbox_attach() to create the trigger.")));
	if (!keyword_arg(args[0], "format", &value))
	{
		config->format = CAPTURE_FORMAT_OUTBOX;
		config->topic = args[0];
		config->nkeys = nargs - 1;
		config->keys = args + 1;
		return;
	}

	config->keys = palloc(nargs * sizeof(char *));
	config->options.decimals = DEBEZIUM_DECIMALS_STRING;
	for (int i = 0; i < nargs; i++)
	{
		if (keyword_arg(args[i], "format", &value))
		{
			if (strcmp(value, "debezium") == 0)
				config->format = CAPTURE_FORMAT_DEBEZIUM;
			else if (strcmp(value, "outbox") == 0)
				config->format = CAPTURE_FORMAT_OUTBOX;
			else
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("unknown format \"%s\"", value),
						 errhint("Use outbox_attach() to create the trigger.")));
		}
		else if (keyword_arg(args[i], "topic", &value))
			config->topic = (char *) value;
		else if (keyword_arg(args[i], "tombstones", &value))
			config->tombstones = strcmp(value, "true") == 0;
		else if (keyword_arg(args[i], "decimal_handling", &value) &&
				 parse_decimals(value, &config->options.decimals))
		{
			/* a 1.3 trigger: the connector's rows */
			config->by_identity = true;
			config->options.hstore_json = true;
		}
		else if (keyword_arg(args[i], "skipped_operations", &value) &&
				 parse_skipped(value, config->skipped))
			;
		else if (keyword_arg(args[i], "schemas_enable", &value))
			config->options.schemas = strcmp(value, "true") == 0;
		else if (keyword_arg(args[i], "converter", &value) && strcmp(value, "avro") == 0)
			config->options.avro = true;
		else if (keyword_arg(args[i], "key", &value))
			config->keys[config->nkeys++] = (char *) value;
		else
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("unknown argument \"%s\"", args[i]),
					 errhint("Use outbox_attach() to create the trigger.")));
	}
	if (config->topic == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("no topic given"),
				 errdetail("The trigger's arguments name no topic."),
				 errhint("Use outbox_attach() to create the trigger.")));
}

/*
 * The trigger arguments that say config (the inverse of
 * outbox_capture_config); palloc'd.
 */
char	  **
outbox_capture_args(const CaptureConfig *config, int *nargs)
{
	char	  **args = palloc((config->nkeys + 7) * sizeof(char *));
	int			n = 0;

	if (config->format == CAPTURE_FORMAT_OUTBOX)
	{
		args[n++] = config->topic;
		for (int i = 0; i < config->nkeys; i++)
			args[n++] = config->keys[i];
	}
	else
	{
		args[n++] = "format=debezium";
		args[n++] = psprintf("topic=%s", config->topic);
		if (config->by_identity)
		{
			static const char *const decimals[] = {"precise", "string", "double"};

			StringInfoData skipped;

			initStringInfo(&skipped);
			for (const char *c = config->skipped; *c; c++)
				appendStringInfo(&skipped, "%s%c", c > config->skipped ? "," : "", *c);
			args[n++] = psprintf("decimal_handling=%s", decimals[config->options.decimals]);
			args[n++] = config->tombstones ? "tombstones=true" : "tombstones=false";
			args[n++] = psprintf("skipped_operations=%s", skipped.len > 0 ? skipped.data : "none");
			args[n++] = config->options.schemas ? "schemas_enable=true" : "schemas_enable=false";
			if (config->options.avro)
				args[n++] = "converter=avro";
		}
		else if (config->tombstones)
			args[n++] = "tombstones=true";
		for (int i = 0; i < config->nkeys; i++)
			args[n++] = psprintf("key=%s", config->keys[i]);
	}
	*nargs = n;
	return args;
}

/*
 * The names of the primary key columns of rel, in key order, or NULL if it
 * has no primary key.
 */
char	  **
outbox_primary_key(Relation rel, int *nkeys)
{
	Oid			pkey = RelationGetPrimaryKeyIndex(rel);
	HeapTuple	indtuple;
	Form_pg_index index;
	char	  **names;

	*nkeys = 0;
	if (!OidIsValid(pkey))
		return NULL;
	indtuple = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(pkey));
	if (!HeapTupleIsValid(indtuple))
		elog(ERROR, "cache lookup failed for index %u", pkey);
	index = (Form_pg_index) GETSTRUCT(indtuple);
	*nkeys = index->indnkeyatts;
	names = palloc(*nkeys * sizeof(char *));
	for (int i = 0; i < *nkeys; i++)
		names[i] = get_attname(RelationGetRelid(rel), index->indkey.values[i], false);
	ReleaseSysCache(indtuple);
	return names;
}

/*
 * What the events of rows of rel, given with tupdesc, need to know: the
 * table's names, and where the key columns are in tupdesc.  An unknown key
 * column is an error.
 */
void
outbox_capture_table(const CaptureConfig *config, Relation rel, TupleDesc tupdesc,
					 CaptureTable *table)
{
	char	  **names = config->keys;
	int			nkeys = config->nkeys;

	table->schema = get_namespace_name(RelationGetNamespace(rel));
	table->table = pstrdup(RelationGetRelationName(rel));
	table->tupdesc = tupdesc;
	table->identity = rel->rd_rel->relreplident;
	table->identity_attrs = RelationGetIndexAttrBitmap(rel, INDEX_ATTR_BITMAP_IDENTITY_KEY);
	if (nkeys == 0)
		names = outbox_primary_key(rel, &nkeys);
	table->nkeys = nkeys;
	table->key_attnums = palloc(Max(nkeys, 1) * sizeof(AttrNumber));
	for (int i = 0; i < nkeys; i++)
	{
		int			attnum = SPI_fnumber(tupdesc, names[i]);

		if (attnum == SPI_ERROR_NOATTRIBUTE || attnum <= 0)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_COLUMN),
					 errmsg("key column \"%s\" does not exist", names[i]),
					 errcontext("table %s", quote_qualified_identifier(table->schema, table->table))));
		table->key_attnums[i] = attnum;
	}
}

/*
 * The errcontext of a trigger of the extension: its name and its table;
 * arg is the call's TriggerData.
 */
void
outbox_trigger_error_context(void *arg)
{
	TriggerData *trigdata = (TriggerData *) arg;
	Relation	rel = trigdata->tg_relation;

	errcontext("trigger \"%s\" on table %s", trigdata->tg_trigger->tgname,
			   quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
										  RelationGetRelationName(rel)));
}

/*
 * The relcache trigger of rel called name, if it runs a function of the
 * extension ext; NULL if there is none.
 */
static Trigger *
find_trigger(const OutboxExtension *ext, Relation rel, const char *name)
{
	TriggerDesc *trigdesc = rel->trigdesc;

	if (trigdesc == NULL)
		return NULL;
	for (int i = 0; i < trigdesc->numtriggers; i++)
	{
		Trigger    *trigger = &trigdesc->triggers[i];

		if (strcmp(trigger->tgname, name) == 0 &&
			get_func_namespace(trigger->tgfoid) == ext->schema)
			return trigger;
	}
	return NULL;
}

/*
 * Has rel the trigger called name, running a function of the extension?
 */
bool
outbox_has_trigger(const OutboxExtension *ext, Relation rel, const char *name)
{
	return find_trigger(ext, rel, name) != NULL;
}

/*
 * Open table relid to put a trigger of the extension on it, with the lock
 * that CREATE TRIGGER takes (taken once); the caller needs the right to
 * make triggers on it.
 */
Relation
outbox_open_to_attach(Oid relid)
{
	char		relkind = get_rel_relkind(relid);
	AclResult	aclresult;

	if (relkind != RELKIND_RELATION && relkind != RELKIND_PARTITIONED_TABLE)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not a table", get_rel_name(relid))));
	aclresult = pg_class_aclcheck(relid, GetUserId(), ACL_TRIGGER);
	if (aclresult != ACLCHECK_OK)
		aclcheck_error(aclresult, OBJECT_TABLE, get_rel_name(relid));
	return table_open(relid, ShareRowExclusiveLock);
}

/* who attached a table, and when (outbox_attachments) */
static OutboxPlan attached_plan = {
	"INSERT INTO %1$s.outbox_attached AS a (relid, attached_by, attached_at)"
	" VALUES ($1, $2, now())"
	" ON CONFLICT (relid) DO UPDATE"
	" SET attached_by = excluded.attached_by, attached_at = excluded.attached_at",
	2, {OIDOID, NAMEOID}
};

static OutboxPlan detached_plan = {
	"DELETE FROM %1$s.outbox_attached WHERE relid = $1",
	1, {OIDOID}
};

/*
 * Note that the current user attached relid now (attached), or that it is
 * attached no longer; from 1.3 on.  Runs as the extension's owner: the
 * caller needs no right on its table.
 */
void
outbox_note_attachment(const OutboxExtension *ext, Oid relid, bool attached)
{
	Datum		values[2];
	Oid			save_userid;
	int			save_sec;

	if (ext->version < OUTBOX_VERSION(1, 3))
		return;
	values[0] = ObjectIdGetDatum(relid);
	values[1] = DirectFunctionCall1(namein, CStringGetDatum(GetUserNameFromId(GetUserId(), false)));
	SPI_connect();
	GetUserIdAndSecContext(&save_userid, &save_sec);
	SetUserIdAndSecContext(ext->owner, save_sec | SECURITY_LOCAL_USERID_CHANGE);
	outbox_run(ext, attached ? &attached_plan : &detached_plan, values, -1);
	SetUserIdAndSecContext(save_userid, save_sec);
	SPI_finish();
}

/*
 * The arguments of the trigger of rel called name, running a function of
 * the extension, or NULL if it has none such; palloc'd.
 */
char	  **
outbox_trigger_args(const OutboxExtension *ext, Relation rel, const char *name, int *nargs)
{
	Trigger    *trigger = find_trigger(ext, rel, name);
	char	  **args;

	*nargs = 0;
	if (trigger == NULL)
		return NULL;
	*nargs = trigger->tgnargs;
	args = palloc((trigger->tgnargs + 1) * sizeof(char *));
	for (int i = 0; i < trigger->tgnargs; i++)
		args[i] = pstrdup(trigger->tgargs[i]);
	return args;
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
 * The event of a change in the outbox format.
 */
static List *
outbox_format_event(const CaptureConfig *config, const CaptureTable *table, char op,
					HeapTuple before, HeapTuple after)
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
static List *
debezium_format_event(const OutboxExtension *ext, const CaptureConfig *config,
					  const CaptureTable *table, char op, HeapTuple before, HeapTuple after,
					  const char *snapshot)
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
 * Store the events of a change of a row of table, in the current
 * transaction: op c (after), u (before and after), d (before), t (neither)
 * or r (after: read by a snapshot, which snapshot says: "first", "true" or
 * "last").
 */
void
outbox_capture_event(const OutboxExtension *ext, const CaptureConfig *config,
					 const CaptureTable *table, char op, HeapTuple before, HeapTuple after,
					 const char *snapshot)
{
	List	   *drafts;
	ListCell   *lc;

	if (config->format == CAPTURE_FORMAT_DEBEZIUM)
		drafts = debezium_format_event(ext, config, table, op, before, after, snapshot);
	else
		drafts = outbox_format_event(config, table, op, before, after);
	foreach(lc, drafts)
	{
		OutboxDraft *draft = lfirst(lc);

		outbox_store_event(ext, draft->topic, draft->key, draft->payload, draft->headers,
						   (Datum) 0, true, NULL, draft->json);
	}
}

/*
 * The connector's settings among outbox_attach's arguments (1.3: the last
 * five, and tombstones), into config, each NULL giving the connector's
 * default: decimal_handling (precise), tombstones (true),
 * skipped_operations ('t'), schemas_enable (false) and converter (json).
 * Only the debezium format has them.
 */
void
outbox_capture_debezium_settings(FunctionCallInfo fcinfo, CaptureConfig *config)
{
	/* the arguments after tombstones */
	const char *const names[] = {"decimal_handling", "skipped_operations", "schemas_enable",
	"converter"};

	if (config->format != CAPTURE_FORMAT_DEBEZIUM)
	{
		for (int i = 0; i < lengthof(names); i++)
			if (!PG_ARGISNULL(6 + i))
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("%s applies to the debezium format only", names[i])));
		return;
	}
	config->by_identity = true;
	config->options.hstore_json = true;
	config->tombstones = PG_ARGISNULL(5) || PG_GETARG_BOOL(5);
	config->options.decimals = DEBEZIUM_DECIMALS_PRECISE;
	if (!PG_ARGISNULL(6) &&
		!parse_decimals(text_to_cstring(PG_GETARG_TEXT_PP(6)), &config->options.decimals))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown decimal_handling \"%s\"", text_to_cstring(PG_GETARG_TEXT_PP(6))),
				 errdetail("The modes are \"precise\", \"string\" and \"double\", as the connector's decimal.handling.mode.")));
	strcpy(config->skipped, "t");
	if (!PG_ARGISNULL(7) &&
		!parse_skipped(text_to_cstring(PG_GETARG_TEXT_PP(7)), config->skipped))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid skipped_operations \"%s\"", text_to_cstring(PG_GETARG_TEXT_PP(7))),
				 errdetail("It is \"none\" or a list of c, u, d and t separated by commas, as the connector's skipped.operations.")));
	config->options.schemas = !PG_ARGISNULL(8) && PG_GETARG_BOOL(8);
	if (!PG_ARGISNULL(9))
	{
		char	   *converter = text_to_cstring(PG_GETARG_TEXT_PP(9));

		config->options.avro = strcmp(converter, "avro") == 0;
		if (!config->options.avro && strcmp(converter, "json") != 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("unknown converter \"%s\"", converter),
					 errdetail("The converters are \"json\" (Kafka Connect's JsonConverter) and \"avro\" (Confluent's AvroConverter).")));
	}
	if (config->options.avro && config->options.schemas)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("schemas_enable applies to the json converter only"),
				 errdetail("The avro converter registers the schemas with the Schema Registry; records carry their ids.")));
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
