/*-------------------------------------------------------------------------
 *
 * change.c
 *		Row changes as the formats of their events see them: the options of
 *		a captured table, read from and written to its capture trigger's
 *		arguments (CaptureConfig), and the table as its events name it
 *		(CaptureTable).
 *
 * src/format/change.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_index.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "format/change.h"

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
