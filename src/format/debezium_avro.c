/*-------------------------------------------------------------------------
 *
 * debezium_avro.c
 *		Change events as Confluent's AvroConverter writes the records of
 *		Debezium's PostgreSQL connector.
 *
 * The connector hands Kafka Connect a schema and a value; the converter
 * maps the schema to Avro (AvroData.fromConnectSchema), registers it under
 * the subject (TopicNameStrategy: <topic>-key, <topic>-value), and writes
 * the value as Avro binary after the registry's wire-format prefix.  Here
 * the connector's side is src/format/debezium_json.c, which writes schema and
 * value as the JSON converter does ({"schema":...,"payload":...}); this
 * file is the converter's side, read from that JSON:
 *
 * - a struct is a record named by the struct's name, split at its last
 *   dot into namespace and name; a record met again is written as its
 *   name, as Avro writes a type it has defined;
 * - int8 and int16 are int with "connect.type"; int32 int, int64 long,
 *   float32 float, float64 double, arrays arrays; Kafka Connect's Decimal
 *   bytes with "scale", "precision" (64 when the schema has none) and
 *   logicalType decimal;
 * - a schema's doc, version, parameters, default and name are the
 *   properties connect.doc, connect.version, connect.parameters,
 *   connect.default and connect.name (AvroData's connect.meta.data);
 * - an optional schema is a union with null, null first (a field's
 *   default null), or last when it has a default (the field's default it).
 *
 * A schema's id comes from the registry's cache (outbox_registry_id),
 * which keeps it in outbox_schema_ids, in the application's transaction: a
 * session meets the registry for a schema that no session registered
 * before (a table attached, or changed by DDL), not at its first change of
 * a table, so a registry that is down fails only the changes that need a
 * new schema.
 *
 * Names that Avro refuses are an error, as they are to the converter
 * (Debezium's schema.name.adjustment.mode is none by default).  The
 * schema's text is in UTF-8, as the registry reads it, as are strings in
 * the values.
 *
 * src/format/debezium_avro.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/base64.h"
#include "mb/pg_wchar.h"
#include "nodes/pg_list.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"

#include "format/avro_binary.h"
#include "format/debezium_avro.h"
#include "kafka/registry.h"

/* AvroData's CONNECT_AVRO_DECIMAL_PRECISION_DEFAULT */
#define DECIMAL_PRECISION_DEFAULT 64

/*
 * Member key of the JSON object c, or NULL if it has none or it is null.
 */
static JsonbValue *
member(JsonbContainer *c, const char *key)
{
	JsonbValue *v = getKeyJsonValueFromContainer(c, key, strlen(key), NULL);

	return v == NULL || v->type == jbvNull ? NULL : v;
}

/* a string member, NUL-terminated, or NULL */
static char *
string_member(JsonbContainer *c, const char *key)
{
	JsonbValue *v = member(c, key);

	if (v == NULL)
		return NULL;
	if (v->type != jbvString)
		elog(ERROR, "Kafka Connect schema member \"%s\" is not a string", key);
	return pnstrdup(v->val.string.val, v->val.string.len);
}

/* an object or array member, or NULL */
static JsonbContainer *
container_member(JsonbContainer *c, const char *key)
{
	JsonbValue *v = member(c, key);

	if (v == NULL)
		return NULL;
	if (v->type != jbvBinary)
		elog(ERROR, "Kafka Connect schema member \"%s\" is not an object or array", key);
	return v->val.binary.data;
}

static bool
is_optional(JsonbContainer *schema)
{
	JsonbValue *v = member(schema, "optional");

	return v != NULL && v->type == jbvBool && v->val.boolean;
}

/*
 * Refuse name, a part of a record's name or a field's name, if Avro
 * refuses it: a letter or "_", then letters, digits and "_".
 */
static void
check_name(const char *name, const char *fullname)
{
	bool		valid = name[0] != '\0' && !(name[0] >= '0' && name[0] <= '9');

	for (const char *c = name; *c && valid; c++)
		valid = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
			(*c >= '0' && *c <= '9') || *c == '_';
	if (!valid)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("\"%s\" is not a valid Avro name", fullname),
				 errdetail("Avro names are made of parts that start with a letter or \"_\" and hold only letters, digits and \"_\"; the records are named after the topic, the fields after the columns."),
				 errhint("Rename the column or the table, or choose a topic prefix of such parts.")));
}

static void write_schema(StringInfo out, JsonbContainer *schema, const char *ns,
						 List **defined);

/*
 * The default of a Connect schema, as AvroData writes it
 * (defaultValueFromConnect): as the JSON converter writes it, but bytes (a
 * Decimal too), which are base64 there, as a string of one character per
 * byte, U+0000 to U+00FF (ISO-8859-1).
 */
static void
write_default(StringInfo out, JsonbContainer *schema, JsonbValue *deflt)
{
	JsonbValue	scalar = *deflt;
	char	   *type = string_member(schema, "type");

	if (strcmp(type, "bytes") == 0 && deflt->type == jbvString)
	{
		int			len = deflt->val.string.len;
		unsigned char *bytes = palloc(pg_b64_dec_len(len) + 1);
		int			n = pg_b64_decode(deflt->val.string.val, len, (char *) bytes,
									  pg_b64_dec_len(len));

		if (n < 0)
			elog(ERROR, "a bytes default is not base64");
		appendStringInfoChar(out, '"');
		for (int i = 0; i < n; i++)
		{
			if (bytes[i] == '"' || bytes[i] == '\\')
				appendStringInfo(out, "\\%c", bytes[i]);
			else if (bytes[i] >= 0x20 && bytes[i] < 0x7f)
				appendStringInfoChar(out, bytes[i]);
			else
				appendStringInfo(out, "\\u%04x", bytes[i]);
		}
		appendStringInfoChar(out, '"');
		return;
	}
	appendStringInfoString(out, JsonbToCString(NULL, &JsonbValueToJsonb(&scalar)->root, -1));
}

/*
 * The props AvroData adds to a schema that is not a union, from its Connect
 * schema: connect.doc, connect.version, connect.parameters,
 * connect.default, connect.name, connect.type; for a Decimal, its scale,
 * precision and logical type.  Each is preceded by a comma.
 */
static void
write_props(StringInfo out, JsonbContainer *schema, const char *type, const char *name)
{
	JsonbValue *version = member(schema, "version");
	JsonbValue *deflt = member(schema, "default");
	JsonbContainer *parameters = container_member(schema, "parameters");
	char	   *doc = string_member(schema, "doc");

	if (name != NULL && strcmp(name, "org.apache.kafka.connect.data.Decimal") == 0)
	{
		char	   *scale = string_member(parameters, "scale");
		char	   *precision = string_member(parameters, "connect.decimal.precision");

		appendStringInfo(out, ",\"scale\":%d,\"precision\":%d,\"logicalType\":\"decimal\"",
						 atoi(scale),
						 precision ? atoi(precision) : DECIMAL_PRECISION_DEFAULT);
	}
	if (doc != NULL)
	{
		appendStringInfoString(out, ",\"connect.doc\":");
		escape_json(out, doc);
	}
	if (version != NULL)
		appendStringInfo(out, ",\"connect.version\":%s",
						 DatumGetCString(DirectFunctionCall1(numeric_out,
															 NumericGetDatum(version->val.numeric))));
	if (parameters != NULL)
		appendStringInfo(out, ",\"connect.parameters\":%s",
						 JsonbToCString(NULL, parameters, -1));
	if (deflt != NULL)
	{
		appendStringInfoString(out, ",\"connect.default\":");
		write_default(out, schema, deflt);
	}
	if (name != NULL)
	{
		appendStringInfoString(out, ",\"connect.name\":");
		escape_json(out, name);
	}
	if (strcmp(type, "int8") == 0 || strcmp(type, "int16") == 0)
		appendStringInfo(out, ",\"connect.type\":\"%s\"", type);
}

/*
 * A struct's record: its definition the first time its name is met (in
 * *defined), else its name, qualified unless in namespace ns, as Avro
 * writes a named type again.
 */
static void
write_record(StringInfo out, JsonbContainer *schema, const char *ns, List **defined)
{
	char	   *fullname = string_member(schema, "name");
	char	   *dot = strrchr(fullname, '.');
	char	   *space = dot ? pnstrdup(fullname, dot - fullname) : NULL;
	char	   *name = dot ? dot + 1 : fullname;
	JsonbContainer *fields = container_member(schema, "fields");
	ListCell   *lc;
	int			n = JsonContainerSize(fields);

	foreach(lc, *defined)
	{
		if (strcmp(lfirst(lc), fullname) == 0)
		{
			escape_json(out, space != NULL && ns != NULL && strcmp(space, ns) == 0 ?
						name : fullname);
			return;
		}
	}
	*defined = lappend(*defined, fullname);
	for (char *part = pstrdup(fullname), *next; part != NULL; part = next)
	{
		next = strchr(part, '.');
		if (next != NULL)
			*next++ = '\0';
		check_name(part, fullname);
	}

	appendStringInfoString(out, "{\"type\":\"record\",\"name\":");
	escape_json(out, name);
	if (space != NULL && (ns == NULL || strcmp(space, ns) != 0))
	{
		appendStringInfoString(out, ",\"namespace\":");
		escape_json(out, space);
	}
	else if (space == NULL && ns != NULL)
		appendStringInfoString(out, ",\"namespace\":\"\"");
	appendStringInfoString(out, ",\"fields\":[");
	for (int i = 0; i < n; i++)
	{
		JsonbContainer *field = getIthJsonbValueFromContainer(fields, i)->val.binary.data;
		char	   *fieldname = string_member(field, "field");
		JsonbValue *deflt = member(field, "default");

		check_name(fieldname, fieldname);
		appendStringInfoString(out, i > 0 ? ",{\"name\":" : "{\"name\":");
		escape_json(out, fieldname);
		appendStringInfoString(out, ",\"type\":");
		write_schema(out, field, space, defined);
		if (deflt != NULL)
		{
			appendStringInfoString(out, ",\"default\":");
			write_default(out, field, deflt);
		}
		else if (is_optional(field))
			appendStringInfoString(out, ",\"default\":null");
		appendStringInfoChar(out, '}');
	}
	appendStringInfoChar(out, ']');
	write_props(out, schema, "struct", fullname);
	appendStringInfoChar(out, '}');
}

/*
 * A Connect schema that is not optional, in Avro: a record, an array, or
 * a primitive type (its name alone when it has no props, as Avro writes
 * it).
 */
static void
write_base(StringInfo out, JsonbContainer *schema, const char *ns, List **defined)
{
	char	   *type = string_member(schema, "type");
	char	   *name = string_member(schema, "name");
	const char *avro;
	StringInfoData props;

	if (strcmp(type, "struct") == 0)
	{
		write_record(out, schema, ns, defined);
		return;
	}
	if (strcmp(type, "array") == 0)
	{
		appendStringInfoString(out, "{\"type\":\"array\",\"items\":");
		write_schema(out, container_member(schema, "items"), ns, defined);
		write_props(out, schema, type, name);
		appendStringInfoChar(out, '}');
		return;
	}
	if (strcmp(type, "int8") == 0 || strcmp(type, "int16") == 0 || strcmp(type, "int32") == 0)
		avro = "int";
	else if (strcmp(type, "int64") == 0)
		avro = "long";
	else if (strcmp(type, "float") == 0)
		avro = "float";
	else if (strcmp(type, "double") == 0 || strcmp(type, "boolean") == 0 ||
			 strcmp(type, "string") == 0 || strcmp(type, "bytes") == 0)
		avro = type;
	else
		elog(ERROR, "Kafka Connect schema type \"%s\" has no Avro mapping here", type);

	initStringInfo(&props);
	write_props(&props, schema, type, name);
	if (props.len == 0)
		appendStringInfo(out, "\"%s\"", avro);
	else
		appendStringInfo(out, "{\"type\":\"%s\"%s}", avro, props.data);
}

/*
 * A Connect schema in Avro, in namespace ns; an optional one is a union
 * with null, null last when it has a default.
 */
static void
write_schema(StringInfo out, JsonbContainer *schema, const char *ns, List **defined)
{
	if (!is_optional(schema))
		write_base(out, schema, ns, defined);
	else if (member(schema, "default") != NULL)
	{
		appendStringInfoChar(out, '[');
		write_base(out, schema, ns, defined);
		appendStringInfoString(out, ",\"null\"]");
	}
	else
	{
		appendStringInfoString(out, "[\"null\",");
		write_base(out, schema, ns, defined);
		appendStringInfoChar(out, ']');
	}
}

/*
 * The Avro schema, as JSON text in UTF-8, that AvroData gives the Kafka
 * Connect schema schema (as the JSON converter writes it).
 */
static char *
avro_schema(JsonbContainer *schema)
{
	StringInfoData out;
	List	   *defined = NIL;

	initStringInfo(&out);
	write_schema(&out, schema, NULL, &defined);
	return pg_server_to_any(out.data, out.len, PG_UTF8);
}

/* errcontext of a registration: the subject */
static void
registering_context(void *subject)
{
	errcontext("registering the Avro schema of subject \"%s\"", (const char *) subject);
}

/*
 * The id of schema (Avro, JSON text) under subject, from the registry's
 * cache (outbox_registry_id), errors saying the subject.
 */
static int32
schema_id(const OutboxExtension *ext, const char *subject, const char *schema)
{
	ErrorContextCallback callback;
	int32		id;

	callback.callback = registering_context;
	callback.arg = (void *) subject;
	callback.previous = error_context_stack;
	error_context_stack = &callback;
	id = outbox_registry_id(ext, subject, schema);
	error_context_stack = callback.previous;
	return id;
}

/*
 * Register the Avro schema of a Kafka Connect schema, given as the JSON
 * converter writes it, under subject; its id.
 */
int32
outbox_debezium_avro_register(const OutboxExtension *ext, const char *connect_schema,
							  const char *subject)
{
	Jsonb	   *jb = DatumGetJsonbP(DirectFunctionCall1(jsonb_in,
														CStringGetDatum(connect_schema)));

	return schema_id(ext, subject, avro_schema(&jb->root));
}

/* a number, or "NaN", "Infinity", "-Infinity", as a C double */
static double
float_value(JsonbValue *v)
{
	char	   *text;

	if (v->type == jbvString)
		text = pnstrdup(v->val.string.val, v->val.string.len);
	else
		text = DatumGetCString(DirectFunctionCall1(numeric_out,
												   NumericGetDatum(v->val.numeric)));
	return strtod(text, NULL);
}

static void write_value(StringInfo out, JsonbContainer *schema, JsonbValue *value);

/*
 * The zero of a required Connect schema of type type, which the connector
 * writes for a NOT NULL column that a delete's before lacks (outside the
 * REPLICA IDENTITY): 0, false, "", no bytes (a Decimal: 0), no items; a
 * struct's fields null or zero.
 */
static void
write_zero(StringInfo out, JsonbContainer *schema, const char *type)
{
	if (strcmp(type, "struct") == 0)
	{
		JsonbContainer *fields = container_member(schema, "fields");

		for (int i = 0; i < JsonContainerSize(fields); i++)
			write_value(out, getIthJsonbValueFromContainer(fields, i)->val.binary.data, NULL);
	}
	else if (strcmp(type, "boolean") == 0)
		outbox_avro_write_boolean(out, false);
	else if (strcmp(type, "float") == 0)
		outbox_avro_write_float(out, 0);
	else if (strcmp(type, "double") == 0)
		outbox_avro_write_double(out, 0);
	else if (strcmp(type, "bytes") == 0 && member(schema, "name") != NULL &&
			 strcmp(string_member(schema, "name"), "org.apache.kafka.connect.data.Decimal") == 0)
		outbox_avro_write_bytes(out, "\0", 1);
	else
		outbox_avro_write_long(out, 0); /* numbers, and empty strings, bytes, arrays */
}

/*
 * A value of the Connect schema schema as Avro binary; value NULL for
 * null.  A value that does not fit its schema (a multidimensional array)
 * is an error.
 */
static void
write_value(StringInfo out, JsonbContainer *schema, JsonbValue *value)
{
	char	   *type = string_member(schema, "type");

	/* an array's items are one call each */
	CHECK_FOR_INTERRUPTS();

	if (is_optional(schema))
	{
		bool		null_last = member(schema, "default") != NULL;

		/* the branch of the union */
		outbox_avro_write_long(out, (value == NULL) == null_last ? 1 : 0);
		if (value == NULL)
			return;
	}
	else if (value == NULL)
	{
		write_zero(out, schema, type);
		return;
	}

	if (strcmp(type, "struct") == 0 || strcmp(type, "array") == 0)
	{
		JsonbContainer *c = value->type == jbvBinary ? value->val.binary.data : NULL;
		bool		is_struct = type[0] == 's';

		if (c == NULL || (is_struct ? !JsonContainerIsObject(c) : !JsonContainerIsArray(c)))
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("a value does not fit its Avro schema, a %s", is_struct ? "record" : "array"),
					 errdetail("Multidimensional arrays have no Avro schema.")));
		if (is_struct)
		{
			JsonbContainer *fields = container_member(schema, "fields");

			for (int i = 0; i < JsonContainerSize(fields); i++)
			{
				JsonbContainer *field = getIthJsonbValueFromContainer(fields, i)->val.binary.data;

				write_value(out, field, member(c, string_member(field, "field")));
			}
		}
		else
		{
			JsonbContainer *items = container_member(schema, "items");
			int			n = JsonContainerSize(c);

			if (n > 0)
				outbox_avro_write_long(out, n);
			for (int i = 0; i < n; i++)
			{
				JsonbValue *item = getIthJsonbValueFromContainer(c, i);

				write_value(out, items, item->type == jbvNull ? NULL : item);
			}
			outbox_avro_write_long(out, 0);
		}
	}
	else if (strcmp(type, "boolean") == 0)
		outbox_avro_write_boolean(out, value->val.boolean);
	else if (strncmp(type, "int", 3) == 0)
		outbox_avro_write_long(out,
							   DatumGetInt64(DirectFunctionCall1(numeric_int8,
																 NumericGetDatum(value->val.numeric))));
	else if (strcmp(type, "float") == 0)
		outbox_avro_write_float(out, (float4) float_value(value));
	else if (strcmp(type, "double") == 0)
		outbox_avro_write_double(out, float_value(value));
	else if (strcmp(type, "bytes") == 0)
	{
		int			len = value->val.string.len;
		char	   *bytes = palloc(pg_b64_dec_len(len) + 1);
		int			n = pg_b64_decode(value->val.string.val, len, bytes, pg_b64_dec_len(len));

		if (n < 0)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("a value does not fit its Avro schema, bytes"),
					 errdetail("Value \"%.*s\" is not bytes.", len, value->val.string.val)));
		outbox_avro_write_bytes(out, bytes, n);
	}
	else
	{
		char	   *utf8 = pg_server_to_any(value->val.string.val, value->val.string.len, PG_UTF8);

		outbox_avro_write_bytes(out, utf8,
								utf8 == value->val.string.val ? value->val.string.len :
								strlen(utf8));
	}
}

/*
 * A key or value of a change event, given as the JSON converter writes it
 * with schemas ({"schema":...,"payload":...}), as the AvroConverter writes
 * it: its schema registered under subject (the registry asked only for a
 * schema never registered, see the file header), then the wire format's
 * prefix and the value in Avro binary.  palloc'd.
 */
bytea *
outbox_debezium_avro(const OutboxExtension *ext, const char *connect_record,
					 const char *subject)
{
	Jsonb	   *jb = DatumGetJsonbP(DirectFunctionCall1(jsonb_in,
														CStringGetDatum(connect_record)));
	JsonbContainer *schema = container_member(&jb->root, "schema");
	int32		id = schema_id(ext, subject, avro_schema(schema));
	StringInfoData out;

	initStringInfo(&out);
	appendStringInfoSpaces(&out, VARHDRSZ);
	outbox_registry_frame(&out, id);
	write_value(&out, schema, member(&jb->root, "payload"));
	SET_VARSIZE(out.data, out.len);
	return (bytea *) out.data;
}
