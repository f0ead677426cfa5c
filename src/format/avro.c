/*-------------------------------------------------------------------------
 *
 * avro.c
 *		The avro format: records from JSON, with Apache Avro's C library.
 *		A topic's schemas are checked and registered when it is set, parsed
 *		once per process and schema id; each payload is checked against the
 *		value schema and encoded at enqueue, in the caller's transaction,
 *		and each key at publish.  docs/avro.md says how each JSON value
 *		maps to Avro.
 *
 * libavro parses and checks the schema (names, references, unions); it
 * knows no logical types, so the schema's JSON is walked beside its parse
 * for them (decimal, timestamp-millis and -micros, date, uuid) and for the
 * fields' defaults.  A value is walked against that (convert), which
 * writes its binary encoding with avro_binary.c, the writer of Connect's
 * records too: libavro allocates with malloc and writes nothing here, so
 * an error raised halfway through a value leaks nothing.  A parsed schema
 * is held by the cache of this process, for good.
 *
 * src/format/avro.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <float.h>
#include <math.h>

#include <avro.h>

#include "common/base64.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "common/jsonapi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/numeric.h"
#include "utils/resowner.h"

#include "base/event.h"
#include "format/avro_binary.h"
#include "format/decimal.h"
#include "format/format_internal.h"
#include "format/topics.h"
#include "kafka/registry.h"

typedef enum Logical
{
	LOGICAL_NONE,
	LOGICAL_DECIMAL,			/* bytes, fixed */
	LOGICAL_TIMESTAMP_MILLIS,	/* long */
	LOGICAL_TIMESTAMP_MICROS,	/* long */
	LOGICAL_DATE,				/* int */
	LOGICAL_UUID				/* string */
} Logical;

/* a type of the schema, with what libavro does not keep */
typedef struct AvroType
{
	avro_type_t type;
	avro_schema_t schema;
	Logical		logical;
	int			precision;		/* decimal */
	int			scale;
	int			nchildren;		/* fields, branches; 1 for items, values */
	struct AvroType **children;
	const char **names;			/* record: the fields' names */
	JsonbValue **defaults;		/* record: the fields' defaults, or NULL */
	int			null_branch;	/* union: the branch of null, or -1 */
} AvroType;

/* a schema of a topic, parsed */
typedef struct OutboxAvroSchema
{
	const char *json;			/* the hash key: the schema's text */
	AvroType	   *root;
	avro_schema_t schema;
} OutboxAvroSchema;

/*
 * the parsed schemas of this process, by their text: a topic's setting
 * holds its schemas' texts and ids, and the ids are the registry's
 * (src/kafka/registry.c keeps which text an id is); the same id may stand
 * for other texts in another registry.
 */
static HTAB *schemas = NULL;
static MemoryContext schema_context = NULL;

/*
 * The largest precision of a decimal that a topic takes, PostgreSQL's for
 * numeric(p,s): encoding a value costs the square of its digits
 * (decimal.c).  A schema already stored with more (set before the bound,
 * or restored) is served.
 */
#define DECIMAL_MAX_PRECISION 1000

/* the named types met while walking a schema */
typedef struct Walk
{
	List	   *named;			/* avro_schema_t */
	List	   *nodes;			/* their AvroType */
	bool		setting;		/* for a topic being set: bounds checked */
} Walk;

/* a value being checked: where, and the first mismatch */
typedef struct Encoder
{
	StringInfoData path;
	int			probing;		/* > 0: trying a union's branch, quietly */
	int			in_default;		/* > 0: a field's default, Avro's JSON */
	HTAB	   *tried;			/* Tried, once a union tried a container */
	char	   *detail;			/* the mismatch, a sentence */
} Encoder;

/* whether a part of the value (a JSON container) fits a type, once tried */
typedef struct Tried
{
	const AvroType *type;		/* hash key, with container */
	const JsonbContainer *container;
	bool		fits;
} Tried;

/*
 * The member key of the JSON object v, or NULL if v is no object or has
 * no such member.
 */
static JsonbValue *
member(JsonbValue *v, const char *key)
{
	JsonbValue	k;

	if (v == NULL || v->type != jbvBinary || !JsonContainerIsObject(v->val.binary.data))
		return NULL;
	k.type = jbvString;
	k.val.string.val = (char *) key;
	k.val.string.len = strlen(key);
	return findJsonbValueFromContainer(v->val.binary.data, JB_FOBJECT, &k);
}

/* v as a C string if it is a JSON string, else NULL */
static char *
string_of(JsonbValue *v)
{
	if (v == NULL || v->type != jbvString)
		return NULL;
	return pnstrdup(v->val.string.val, v->val.string.len);
}

/* the whole value of jb */
static void
root_of(Jsonb *jb, JsonbValue *v)
{
	if (JB_ROOT_IS_SCALAR(jb))
		JsonbExtractScalar(&jb->root, v);
	else
	{
		v->type = jbvBinary;
		v->val.binary.data = &jb->root;
		v->val.binary.len = VARSIZE(jb) - VARHDRSZ;
	}
}

/*
 * An integer of the JSON schema object js, or dflt if it has none; an
 * error if it is no integer.
 */
static int
schema_int(JsonbValue *js, const char *key, int dflt)
{
	JsonbValue *v = member(js, key);
	char	   *s;

	if (v == NULL)
		return dflt;
	s = v->type == jbvNumeric ? numeric_normalize(v->val.numeric) : "";
	if (strspn(s, "0123456789") != strlen(s) || strlen(s) == 0 || strlen(s) > 6)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid Avro schema"),
				 errdetail("The \"%s\" of a decimal must be a whole number.", key)));
	return atoi(s);
}

/*
 * The AvroType of the type that libavro parsed as s from the JSON js (NULL for
 * a type named by reference, whose definition came first).
 */
static AvroType *
walk(Walk *w, JsonbValue *js, avro_schema_t s)
{
	AvroType	   *n;
	JsonbValue *type = member(js, "type");
	char	   *logical;

	CHECK_FOR_INTERRUPTS();
	if (is_avro_link(s))
	{
		s = avro_schema_link_target(s);
		js = NULL;
	}
	if (is_avro_named_type(s))
	{
		ListCell   *lc,
				   *ln;

		forboth(lc, w->named, ln, w->nodes)
		{
			if (lfirst(lc) == s)
				return lfirst(ln);
		}
	}
	/* {"type": {"type": "array", ...}} is the inner schema */
	if (type != NULL && type->type == jbvBinary)
		return walk(w, type, s);

	n = palloc0(sizeof(AvroType));
	n->type = avro_typeof(s);
	n->schema = s;
	n->null_branch = -1;
	if (is_avro_named_type(s))
	{
		w->named = lappend(w->named, s);
		w->nodes = lappend(w->nodes, n);
	}

	/* any other logical type is its underlying type, as Avro says */
	logical = string_of(member(js, "logicalType"));
	if (logical == NULL)
		n->logical = LOGICAL_NONE;
	else if (strcmp(logical, "decimal") == 0 &&
			 (n->type == AVRO_BYTES || n->type == AVRO_FIXED))
	{
		n->logical = LOGICAL_DECIMAL;
		n->precision = schema_int(js, "precision", 0);
		n->scale = schema_int(js, "scale", 0);
		if (n->precision < 1 || n->scale > n->precision)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid Avro schema"),
					 errdetail("A decimal needs a precision of at least 1, and a scale no greater than its precision.")));
		if (w->setting && n->precision > DECIMAL_MAX_PRECISION)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid Avro schema"),
					 errdetail("A decimal has a precision of at most %d here, as PostgreSQL's numeric has; this one has %d.",
							   DECIMAL_MAX_PRECISION, n->precision)));
	}
	else if (strcmp(logical, "timestamp-millis") == 0 && n->type == AVRO_INT64)
		n->logical = LOGICAL_TIMESTAMP_MILLIS;
	else if (strcmp(logical, "timestamp-micros") == 0 && n->type == AVRO_INT64)
		n->logical = LOGICAL_TIMESTAMP_MICROS;
	else if (strcmp(logical, "date") == 0 && n->type == AVRO_INT32)
		n->logical = LOGICAL_DATE;
	else if (strcmp(logical, "uuid") == 0 && n->type == AVRO_STRING)
		n->logical = LOGICAL_UUID;

	switch (n->type)
	{
		case AVRO_RECORD:
			{
				JsonbValue *fields = member(js, "fields");

				n->nchildren = avro_schema_record_size(s);
				n->children = palloc0(sizeof(AvroType *) * n->nchildren);
				n->names = palloc0(sizeof(char *) * n->nchildren);
				n->defaults = palloc0(sizeof(JsonbValue *) * n->nchildren);
				for (int i = 0; i < n->nchildren; i++)
				{
					JsonbValue *field = NULL;

					if (fields != NULL && fields->type == jbvBinary)
						field = getIthJsonbValueFromContainer(fields->val.binary.data, i);
					n->names[i] = avro_schema_record_field_name(s, i);
					n->defaults[i] = member(field, "default");
					n->children[i] = walk(w, member(field, "type"),
										  avro_schema_record_field_get_by_index(s, i));
				}
				break;
			}
		case AVRO_UNION:
			n->nchildren = avro_schema_union_size(s);
			n->children = palloc0(sizeof(AvroType *) * n->nchildren);
			for (int i = 0; i < n->nchildren; i++)
			{
				JsonbValue *branch = NULL;

				if (js != NULL && js->type == jbvBinary && JsonContainerIsArray(js->val.binary.data))
					branch = getIthJsonbValueFromContainer(js->val.binary.data, i);
				n->children[i] = walk(w, branch, avro_schema_union_branch(s, i));
				if (n->children[i]->type == AVRO_NULL)
					n->null_branch = i;
			}
			break;
		case AVRO_ARRAY:
			n->nchildren = 1;
			n->children = palloc(sizeof(AvroType *));
			n->children[0] = walk(w, member(js, "items"), avro_schema_array_items(s));
			break;
		case AVRO_MAP:
			n->nchildren = 1;
			n->children = palloc(sizeof(AvroType *));
			n->children[0] = walk(w, member(js, "values"), avro_schema_map_values(s));
			break;
		default:
			break;
	}
	return n;
}

/*
 * Parse the schema json (JSON text) with libavro; an error (22023) with
 * libavro's own message if it is no Avro schema.  The caller decrefs the
 * result.
 */
static avro_schema_t
parse_schema(const char *json, const char *what)
{
	avro_schema_t s;

	if (avro_schema_from_json_length(json, strlen(json), &s) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid Avro schema"),
				 errdetail("The %s schema is refused by the Avro library: %s.", what,
						   avro_strerror())));
	return s;
}

/*
 * Raise an error (22023) unless schema (JSON text) is an Avro schema whose
 * logical types are well formed; what names it ("value", "key") in the
 * message.
 */
static void
check_schema(const char *schema, const char *what)
{
	avro_schema_t s = parse_schema(schema, what);

	PG_TRY();
	{
		Walk		w = {NIL, NIL, true};
		JsonbValue	root;

		root_of(DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(schema))),
				&root);
		(void) walk(&w, &root, s);
	}
	PG_FINALLY();
	{
		avro_schema_decref(s);
	}
	PG_END_TRY();
}

/* the hash of a schema's text, the key of schemas */
static uint32
text_hash(const void *key, Size keysize)
{
	const char *json = *(const char *const *) key;

	return hash_any((const unsigned char *) json, strlen(json));
}

static int
text_match(const void *key1, const void *key2, Size keysize)
{
	return strcmp(*(const char *const *) key1, *(const char *const *) key2);
}

/*
 * The parsed schema whose JSON is schema_json: from this process's cache,
 * else parsed now and kept.
 */
static OutboxAvroSchema *
schema_of(const char *schema_json)
{
	OutboxAvroSchema *entry;
	MemoryContext old;
	Jsonb	   *jb;
	JsonbValue	root;
	Walk		w = {NIL, NIL, false};
	avro_schema_t s;
	AvroType	   *node;

	if (schemas == NULL)
	{
		HASHCTL		ctl;

		schema_context = AllocSetContextCreate(TopMemoryContext, "outbox Avro schemas",
											   ALLOCSET_SMALL_SIZES);
		ctl.keysize = sizeof(const char *);
		ctl.entrysize = sizeof(OutboxAvroSchema);
		ctl.hash = text_hash;
		ctl.match = text_match;
		ctl.hcxt = schema_context;
		schemas = hash_create("outbox Avro schemas", 16, &ctl,
							  HASH_ELEM | HASH_FUNCTION | HASH_COMPARE | HASH_CONTEXT);
	}
	entry = hash_search(schemas, &schema_json, HASH_FIND, NULL);
	if (entry != NULL)
		return entry;

	old = MemoryContextSwitchTo(schema_context);
	jb = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(schema_json)));
	s = parse_schema(schema_json, "registered");
	PG_TRY();
	{
		root_of(jb, &root);
		node = walk(&w, &root, s);
	}
	PG_CATCH();
	{
		avro_schema_decref(s);
		PG_RE_THROW();
	}
	PG_END_TRY();
	/* the key's text copied before the entry exists, which points at it */
	schema_json = pstrdup(schema_json);
	MemoryContextSwitchTo(old);
	entry = hash_search(schemas, &schema_json, HASH_ENTER, NULL);
	entry->root = node;
	entry->schema = s;
	return entry;
}

/*
 * Whether values of schema are given as text (a key): a string is the
 * text itself, any other type its JSON.
 */
static bool
takes_text(const OutboxAvroSchema *schema)
{
	return schema->root->type == AVRO_STRING;
}

/* What a type is called in messages. */
static char *
describe(const AvroType *n)
{
	switch (n->logical)
	{
		case LOGICAL_DECIMAL:
			return psprintf("decimal(%d,%d)", n->precision, n->scale);
		case LOGICAL_TIMESTAMP_MILLIS:
			return "timestamp-millis";
		case LOGICAL_TIMESTAMP_MICROS:
			return "timestamp-micros";
		case LOGICAL_DATE:
			return "date";
		case LOGICAL_UUID:
			return "uuid";
		case LOGICAL_NONE:
			break;
	}
	switch (n->type)
	{
		case AVRO_RECORD:
			return psprintf("record %s", avro_schema_name(n->schema));
		case AVRO_ENUM:
			{
				StringInfoData buf;
				int			count = avro_schema_enum_number_of_symbols(n->schema);

				initStringInfo(&buf);
				appendStringInfo(&buf, "enum %s (", avro_schema_name(n->schema));
				for (int i = 0; i < count; i++)
					appendStringInfo(&buf, "%s%s", i > 0 ? ", " : "",
									 avro_schema_enum_get(n->schema, i));
				appendStringInfoChar(&buf, ')');
				return buf.data;
			}
		case AVRO_FIXED:
			return psprintf("fixed %s (" INT64_FORMAT " bytes)", avro_schema_name(n->schema),
							avro_schema_fixed_size(n->schema));
		case AVRO_UNION:
			{
				StringInfoData buf;

				initStringInfo(&buf);
				for (int i = 0; i < n->nchildren; i++)
					appendStringInfo(&buf, "%s%s",
									 i == 0 ? "" : i == n->nchildren - 1 ? " or " : ", ",
									 describe(n->children[i]));
				return buf.data;
			}
		default:
			return (char *) avro_schema_type_name(n->schema);
	}
}

/* What a JSON value is, in messages; NULL is a missing value. */
static char *
describe_json(JsonbValue *v)
{
	if (v == NULL)
		return "missing";
	switch (v->type)
	{
		case jbvNull:
			return "null";
		case jbvBool:
			return v->val.boolean ? "true" : "false";
		case jbvNumeric:
			return numeric_normalize(v->val.numeric);
		case jbvString:
			return psprintf("the string \"%.*s%s\"", Min(v->val.string.len, 40),
							v->val.string.val, v->val.string.len > 40 ? "..." : "");
		case jbvBinary:
			return JsonContainerIsArray(v->val.binary.data) ? "an array" : "an object";
		default:
			return "a JSON value";
	}
}

/*
 * Note that the value v at the current path does not fit n, why adding
 * to what it is; false, for the caller to return.
 */
static bool
mismatch(Encoder *e, const AvroType *n, JsonbValue *v, const char *why)
{
	char	   *got;

	if (e->probing > 0 || e->detail != NULL)
		return false;
	got = describe_json(v);
	if (why != NULL)
		got = psprintf("%s (%s)", got, why);
	if (e->path.len == 0)
		e->detail = psprintf("The value should be %s, not %s.", describe(n), got);
	else
		e->detail = psprintf("Field \"%s\" should be %s, not %s.", e->path.data,
							 describe(n), got);
	return false;
}

/* v as a whole number, if it is one */
static bool
json_integer(JsonbValue *v, int64 *result)
{
	char	   *s,
			   *end;

	if (v == NULL || v->type != jbvNumeric)
		return false;
	s = numeric_normalize(v->val.numeric);
	if (strchr(s, '.') != NULL)
		return false;
	errno = 0;
	*result = strtoi64(s, &end, 10);
	return errno == 0 && *end == '\0';
}

/* the number of n digits at s, or -1 if they are not all digits */
static int
digits_at(const char *s, int n)
{
	int			result = 0;

	for (int i = 0; i < n; i++)
	{
		if (!isdigit((unsigned char) s[i]))
			return -1;
		result = result * 10 + (s[i] - '0');
	}
	return result;
}

/* the number of days since 1970-01-01 of the ISO date s starts with */
static bool
parse_date(const char *s, int *days)
{
	int			y = digits_at(s, 4),
				m,
				d;

	if (y < 0 || s[4] != '-' || (m = digits_at(s + 5, 2)) < 1 || m > 12 ||
		s[7] != '-' || (d = digits_at(s + 8, 2)) < 1 || d > day_tab[isleap(y)][m - 1])
		return false;
	*days = date2j(y, m, d) - UNIX_EPOCH_JDATE;
	return true;
}

/*
 * The time of an RFC 3339 timestamp (2026-11-24T18:30:00.123Z, with an
 * offset or Z) in units per second since 1970 (1000: milliseconds); false
 * if s is none, or finer than the unit.
 */
static bool
parse_timestamp(const char *s, int64 units, int64 *result)
{
	int			days,
				h,
				mi,
				sec;
	int64		frac = 0;
	int			digits = 0;
	int			offset = 0;
	const char *p;

	if (!parse_date(s, &days) || s[10] == '\0' || strchr("Tt", s[10]) == NULL ||
		(h = digits_at(s + 11, 2)) < 0 || h > 23 || s[13] != ':' ||
		(mi = digits_at(s + 14, 2)) < 0 || mi > 59 || s[16] != ':' ||
		(sec = digits_at(s + 17, 2)) < 0 || sec > 59)
		return false;
	p = s + 19;
	if (*p == '.')
	{
		for (p++; isdigit((unsigned char) *p); p++, digits++)
		{
			if (digits >= 9)
				return false;
			frac = frac * 10 + (*p - '0');
		}
		if (digits == 0)
			return false;
	}
	/* frac as a count of units, exactly */
	for (; digits < 9; digits++)
		frac *= 10;
	if (frac % (1000000000 / units) != 0)
		return false;
	frac /= 1000000000 / units;
	if (*p == 'Z' || *p == 'z')
		p++;
	else
	{
		int			oh,
					om;

		if ((*p != '+' && *p != '-') || (oh = digits_at(p + 1, 2)) < 0 || oh > 23 ||
			p[3] != ':' || (om = digits_at(p + 4, 2)) < 0 || om > 59)
			return false;
		offset = (oh * 60 + om) * (*p == '-' ? -1 : 1);
		p += 6;
	}
	if (*p != '\0')
		return false;
	*result = (((int64) days * 86400 + h * 3600 + mi * 60 + sec - offset * 60) * units) + frac;
	return true;
}

/* whether s is a UUID in its text form */
static bool
is_uuid(const char *s, int len)
{
	if (len != 36)
		return false;
	for (int i = 0; i < 36; i++)
		if (i == 8 || i == 13 || i == 18 || i == 23 ? s[i] != '-' : !isxdigit((unsigned char) s[i]))
			return false;
	return true;
}

/*
 * The two's complement, big-endian, of the decimal number at s scaled to
 * n's scale, into out (size bytes, or as few as it takes when size is 0);
 * NULL if it fits, else why not.  Its digits are counted before they are
 * converted, so the work is bounded by n's precision (decimal.c).
 */
static const char *
decimal_bytes(const AvroType *n, const char *s, int size, StringInfo out)
{
	bool		negative = (*s == '-');
	int			int_len,
				frac_len;
	StringInfoData digits;
	int			first;
	int			ndigits;

	if (*s == '-' || *s == '+')
		s++;
	int_len = strspn(s, "0123456789");
	frac_len = s[int_len] == '.' ? strspn(s + int_len + 1, "0123456789") : -1;
	if ((int_len == 0 && frac_len <= 0) || s[int_len + 1 + frac_len] != '\0' || frac_len == 0)
		return "not a decimal number";
	frac_len = Max(frac_len, 0);
	while (frac_len > 0 && s[int_len + frac_len] == '0')
		frac_len--;
	if (frac_len > n->scale)
		return psprintf("more than %d decimals", n->scale);

	/* the unscaled value: the digits, then zeros up to the scale */
	initStringInfo(&digits);
	appendBinaryStringInfo(&digits, s, int_len);
	appendBinaryStringInfo(&digits, s + int_len + 1, frac_len);
	first = strspn(digits.data, "0");
	ndigits = first == digits.len ? 0 : digits.len - first + n->scale - frac_len;
	if (ndigits > n->precision)
		return psprintf("more than %d digits", n->precision);
	if (!outbox_decimal_bytes(out, digits.data + first, digits.len - first,
							  n->scale - frac_len, negative, size))
		return psprintf("more than %d bytes", size);
	return NULL;
}

static bool convert(Encoder *e, const AvroType *n, JsonbValue *v, StringInfo out);

/*
 * Convert v, a member of the record or map at the current path, named
 * name; see convert.
 */
static bool
convert_member(Encoder *e, const AvroType *n, const char *name, int len, JsonbValue *v,
			   StringInfo out)
{
	int			path_len = e->path.len;
	bool		ok;

	if (e->path.len > 0)
		appendStringInfoChar(&e->path, '.');
	appendBinaryStringInfo(&e->path, name, len);
	ok = convert(e, n, v, out);
	e->path.len = path_len;
	e->path.data[path_len] = '\0';
	return ok;
}

/* the JSON value v as the UTF-8 string it holds, or NULL */
static char *
utf8_of(JsonbValue *v, int *len)
{
	if (v == NULL || v->type != jbvString)
		return NULL;
	return outbox_to_utf8(v->val.string.val, v->val.string.len, len);
}

/* null: null, or missing; nothing written */
static bool
convert_null(Encoder *e, const AvroType *n, JsonbValue *v)
{
	if (v != NULL && v->type != jbvNull)
		return mismatch(e, n, v, NULL);
	return true;
}

/* boolean: true or false */
static bool
convert_boolean(Encoder *e, const AvroType *n, JsonbValue *v, StringInfo out)
{
	if (v == NULL || v->type != jbvBool)
		return mismatch(e, n, v, NULL);
	if (out)
		outbox_avro_write_boolean(out, v->val.boolean);
	return true;
}

/* int: a whole number within 32 bits; date: also a string YYYY-MM-DD */
static bool
convert_int(Encoder *e, const AvroType *n, JsonbValue *v, StringInfo out)
{
	int64		i64;
	char	   *str;

	if (n->logical == LOGICAL_DATE && (str = string_of(v)) != NULL)
	{
		int			days;

		if (strlen(str) != 10 || !parse_date(str, &days))
			return mismatch(e, n, v, "not a date YYYY-MM-DD");
		i64 = days;
	}
	else if (!json_integer(v, &i64) || i64 < PG_INT32_MIN || i64 > PG_INT32_MAX)
		return mismatch(e, n, v, v && v->type == jbvNumeric ? "not a 32-bit integer" : NULL);
	if (out)
		outbox_avro_write_long(out, i64);
	return true;
}

/*
 * long: a whole number within 64 bits; timestamp-millis and -micros: also
 * an RFC 3339 string with its offset, no finer than the unit
 */
static bool
convert_long(Encoder *e, const AvroType *n, JsonbValue *v, StringInfo out)
{
	bool		millis = n->logical == LOGICAL_TIMESTAMP_MILLIS;
	int64		i64;
	char	   *str;

	if ((millis || n->logical == LOGICAL_TIMESTAMP_MICROS) && (str = string_of(v)) != NULL)
	{
		if (!parse_timestamp(str, millis ? 1000 : 1000000, &i64))
			return mismatch(e, n, v, millis ?
							"not an RFC 3339 timestamp with an offset, to the millisecond" :
							"not an RFC 3339 timestamp with an offset, to the microsecond");
	}
	else if (!json_integer(v, &i64))
		return mismatch(e, n, v, v && v->type == jbvNumeric ? "not a 64-bit integer" : NULL);
	if (out)
		outbox_avro_write_long(out, i64);
	return true;
}

/* float, double: a number, a float within its range */
static bool
convert_floating(Encoder *e, const AvroType *n, JsonbValue *v, StringInfo out)
{
	double		d;

	if (v == NULL || v->type != jbvNumeric)
		return mismatch(e, n, v, NULL);
	d = DatumGetFloat8(DirectFunctionCall1(numeric_float8, NumericGetDatum(v->val.numeric)));
	if (n->type == AVRO_FLOAT && (isinf((float) d) || fabs(d) > FLT_MAX))
		return mismatch(e, n, v, "out of range");
	if (out && n->type == AVRO_FLOAT)
		outbox_avro_write_float(out, (float) d);
	else if (out)
		outbox_avro_write_double(out, d);
	return true;
}

/* string: a string, in UTF-8; uuid: in the 8-4-4-4-12 hexadecimal form */
static bool
convert_string(Encoder *e, const AvroType *n, JsonbValue *v, StringInfo out)
{
	char	   *str;
	int			len;

	if ((str = utf8_of(v, &len)) == NULL)
		return mismatch(e, n, v, v && v->type == jbvString ? "not UTF-8" : NULL);
	if (n->logical == LOGICAL_UUID && !is_uuid(str, len))
		return mismatch(e, n, v, "not a UUID");
	if (out)
		outbox_avro_write_bytes(out, str, len);
	return true;
}

/*
 * The bytes of the default v, a JSON string, of a bytes or fixed type, as
 * Avro writes them in JSON: code points 0 to 255, one a byte; into out.
 * NULL if they are, else why not.
 */
static const char *
default_bytes(JsonbValue *v, StringInfo out)
{
	char	   *str;
	int			len;
	const unsigned char *c;

	if ((str = utf8_of(v, &len)) == NULL)
		return "not UTF-8";
	for (c = (const unsigned char *) str; c < (const unsigned char *) str + len;
		 c += pg_utf_mblen(c))
	{
		pg_wchar	code = utf8_to_unicode(c);

		if (code > 0xff)
			return "a default with a code point past 255";
		appendStringInfoChar(out, (char) code);
	}
	return NULL;
}

/*
 * bytes, fixed: a string in base64, a fixed of its size; decimal: a
 * number or a string of one, written as its unscaled two's complement.  A
 * field's default (but a decimal's, a number as given) is a string of code
 * points 0 to 255, the bytes themselves, as Avro's defaults are.
 */
static bool
convert_bytes(Encoder *e, const AvroType *n, JsonbValue *v, StringInfo out)
{
	int64		size = n->type == AVRO_FIXED ? avro_schema_fixed_size(n->schema) : -1;
	StringInfoData bytes;
	const char *why = NULL;
	char	   *str;

	initStringInfo(&bytes);
	if (size > (int64) (MaxAllocSize / 2))
		why = "a fixed larger than a value can be";
	else if (n->logical == LOGICAL_DECIMAL)
	{
		if (v != NULL && v->type == jbvNumeric)
			str = numeric_normalize(v->val.numeric);
		else if ((str = string_of(v)) == NULL)
			return mismatch(e, n, v, NULL);
		/* a fixed of no bytes holds no number; size 0 is "as many as it takes" */
		why = size == 0 ? "more than 0 bytes" :
			decimal_bytes(n, str, Max(size, 0), &bytes);
	}
	else if (e->in_default > 0)
	{
		if (v == NULL || v->type != jbvString)
			return mismatch(e, n, v, NULL);
		why = default_bytes(v, &bytes);
	}
	else
	{
		if ((str = string_of(v)) == NULL)
			return mismatch(e, n, v, NULL);
		enlargeStringInfo(&bytes, pg_b64_dec_len(strlen(str)));
		bytes.len = pg_b64_decode(str, strlen(str), bytes.data, bytes.maxlen);
		if (bytes.len < 0)
			why = "not base64";
	}
	if (why == NULL && size >= 0 && bytes.len != size)
		why = psprintf("%d bytes", bytes.len);
	if (why != NULL)
		return mismatch(e, n, v, why);
	if (out && n->type == AVRO_FIXED)
		appendBinaryStringInfo(out, bytes.data, bytes.len);
	else if (out)
		outbox_avro_write_bytes(out, bytes.data, bytes.len);
	return true;
}

/* enum: a string, one of its symbols, written as its index */
static bool
convert_enum(Encoder *e, const AvroType *n, JsonbValue *v, StringInfo out)
{
	char	   *str;
	int			symbol;

	if ((str = string_of(v)) == NULL ||
		(symbol = avro_schema_enum_get_by_name(n->schema, str)) < 0)
		return mismatch(e, n, v, NULL);
	if (out)
		outbox_avro_write_long(out, symbol);
	return true;
}

/* array: an array, each item of the items' type */
static bool
convert_array(Encoder *e, const AvroType *n, JsonbValue *v, StringInfo out)
{
	int			path_len = e->path.len;
	int			count;

	if (v == NULL || v->type != jbvBinary || !JsonContainerIsArray(v->val.binary.data))
		return mismatch(e, n, v, NULL);
	count = JsonContainerSize(v->val.binary.data);
	if (out && count > 0)
		outbox_avro_write_long(out, count);
	for (int i = 0; i < count; i++)
	{
		bool		ok;

		appendStringInfo(&e->path, "[%d]", i);
		ok = convert(e, n->children[0],
					 getIthJsonbValueFromContainer(v->val.binary.data, i), out);
		e->path.len = path_len;
		e->path.data[path_len] = '\0';
		if (!ok)
			return false;
	}
	if (out)
		outbox_avro_write_long(out, 0);
	return true;
}

/* map: an object, each value of the values' type, its keys in UTF-8 */
static bool
convert_map(Encoder *e, const AvroType *n, JsonbValue *v, StringInfo out)
{
	JsonbIterator *it;
	JsonbValue	key,
				value;
	JsonbIteratorToken token;
	int			count;

	if (v == NULL || v->type != jbvBinary || !JsonContainerIsObject(v->val.binary.data))
		return mismatch(e, n, v, NULL);
	count = JsonContainerSize(v->val.binary.data);
	if (out && count > 0)
		outbox_avro_write_long(out, count);
	it = JsonbIteratorInit(v->val.binary.data);
	while ((token = JsonbIteratorNext(&it, &key, true)) != WJB_DONE)
	{
		char	   *str;
		int			len;

		if (token != WJB_KEY)
			continue;
		(void) JsonbIteratorNext(&it, &value, true);
		if ((str = utf8_of(&key, &len)) == NULL)
			return mismatch(e, n, v, "a key that is not UTF-8");
		if (out)
			outbox_avro_write_bytes(out, str, len);
		if (!convert_member(e, n->children[0], key.val.string.val, key.val.string.len,
							&value, out))
			return false;
	}
	if (out)
		outbox_avro_write_long(out, 0);
	return true;
}

/*
 * Note that the object v, whose members record n's fields do not all take,
 * has one that is no field of n; false.
 */
static bool
unknown_field(Encoder *e, const AvroType *n, JsonbValue *v)
{
	JsonbIterator *it = JsonbIteratorInit(v->val.binary.data);
	JsonbValue	key;
	JsonbIteratorToken token;

	if (e->probing > 0)
		return false;
	while ((token = JsonbIteratorNext(&it, &key, true)) != WJB_DONE)
		if (token == WJB_KEY &&
			avro_schema_record_field_get_index(n->schema,
											   pnstrdup(key.val.string.val, key.val.string.len)) < 0)
			break;
	if (e->path.len > 0)
		appendStringInfoChar(&e->path, '.');
	appendBinaryStringInfo(&e->path, key.val.string.val, key.val.string.len);
	e->detail = psprintf("Field \"%s\" is not in %s.", e->path.data, describe(n));
	return false;
}

/*
 * record: an object, each field by name, a missing one its default (else
 * null), no member that is no field
 */
static bool
convert_record(Encoder *e, const AvroType *n, JsonbValue *v, StringInfo out)
{
	int			found = 0;

	if (v == NULL || v->type != jbvBinary || !JsonContainerIsObject(v->val.binary.data))
		return mismatch(e, n, v, NULL);
	for (int i = 0; i < n->nchildren; i++)
	{
		JsonbValue *field = member(v, n->names[i]);
		bool		given = field != NULL;
		bool		ok;

		if (given)
			found++;
		else
			field = n->defaults[i];
		e->in_default += !given;
		ok = convert_member(e, n->children[i], n->names[i], strlen(n->names[i]), field, out);
		e->in_default -= !given;
		if (!ok)
			return false;
	}
	if (found < JsonContainerSize(v->val.binary.data))
		return unknown_field(e, n, v);
	return true;
}

/*
 * Does v fit type n, tried quietly for a union's branch?  What a container
 * was found to fit is kept: unions whose branches take the same values
 * (two records of the same fields, each a branch of the other's field)
 * try each part of the value once per type, where trying it again at each
 * path to it doubled the work at each level.
 */
static bool
try_branch(Encoder *e, const AvroType *n, JsonbValue *v)
{
	Tried		key;
	Tried	   *tried;
	bool		fits;

	if (v->type != jbvBinary)
		return convert(e, n, v, NULL);
	if (e->tried == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = offsetof(Tried, fits);
		ctl.entrysize = sizeof(Tried);
		ctl.hcxt = CurrentMemoryContext;
		e->tried = hash_create("outbox Avro branches tried", 64, &ctl,
							   HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	memset(&key, 0, sizeof(key));
	key.type = n;
	key.container = v->val.binary.data;
	tried = hash_search(e->tried, &key, HASH_FIND, NULL);
	if (tried != NULL)
		return tried->fits;
	fits = convert(e, n, v, NULL);
	tried = hash_search(e->tried, &key, HASH_ENTER, NULL);
	tried->fits = fits;
	return fits;
}

/*
 * The branch of union n that v takes: null (or missing) its null branch;
 * with one other type, that type (any mismatch is then the type's); else
 * the first other branch v fits, tried quietly; -1 if none.
 */
static int
union_branch(Encoder *e, const AvroType *n, JsonbValue *v, bool *checked)
{
	int			branch = -1;

	*checked = false;
	if (v == NULL || v->type == jbvNull)
		return n->null_branch;
	if (n->nchildren == 1)
		return 0;
	if (n->nchildren == 2 && n->null_branch >= 0)
		return 1 - n->null_branch;
	e->probing++;
	for (int i = 0; i < n->nchildren && branch < 0; i++)
		if (i != n->null_branch && try_branch(e, n->children[i], v))
			branch = i;
	e->probing--;
	*checked = branch >= 0;
	return branch;
}

/* union: the value of its branch (union_branch), after the branch's index */
static bool
convert_union(Encoder *e, const AvroType *n, JsonbValue *v, StringInfo out)
{
	bool		checked;
	int			branch = union_branch(e, n, v, &checked);

	if (branch < 0)
		return mismatch(e, n, v, NULL);
	/* checked: converting again would double at each level */
	if (checked && out == NULL)
		return true;
	if (out)
		outbox_avro_write_long(out, branch);
	return convert(e, n->children[branch], v, out);
}

/*
 * Check the JSON value v (NULL: missing) against the type n, and append
 * its Avro binary encoding to out unless out is NULL; false if it does not
 * fit, with the first mismatch noted in e (and out holding a part).
 */
static bool
convert(Encoder *e, const AvroType *n, JsonbValue *v, StringInfo out)
{
	/* a recursive schema follows the payload as deep as it goes */
	check_stack_depth();
	CHECK_FOR_INTERRUPTS();
	switch (n->type)
	{
		case AVRO_NULL:
			return convert_null(e, n, v);
		case AVRO_BOOLEAN:
			return convert_boolean(e, n, v, out);
		case AVRO_INT32:
			return convert_int(e, n, v, out);
		case AVRO_INT64:
			return convert_long(e, n, v, out);
		case AVRO_FLOAT:
		case AVRO_DOUBLE:
			return convert_floating(e, n, v, out);
		case AVRO_STRING:
			return convert_string(e, n, v, out);
		case AVRO_BYTES:
		case AVRO_FIXED:
			return convert_bytes(e, n, v, out);
		case AVRO_ENUM:
			return convert_enum(e, n, v, out);
		case AVRO_ARRAY:
			return convert_array(e, n, v, out);
		case AVRO_MAP:
			return convert_map(e, n, v, out);
		case AVRO_RECORD:
			return convert_record(e, n, v, out);
		case AVRO_UNION:
			return convert_union(e, n, v, out);
		default:
			elog(ERROR, "unexpected Avro type %d", n->type);
	}
	return false;
}

/*
 * Check v against schema, then append its Avro binary encoding to out
 * (NULL: only check); NULL if it fits, else a sentence naming the field
 * that does not and the type it should have, and out as it was.
 */
static char *
encode(OutboxAvroSchema *schema, JsonbValue *v, StringInfo out)
{
	Encoder		e = {0};
	int			start = out ? out->len : 0;
	bool		fits;

	initStringInfo(&e.path);
	fits = convert(&e, schema->root, v, out);
	if (e.tried != NULL)
		hash_destroy(e.tried);
	if (fits)
		return NULL;
	if (out)
	{
		out->len = start;
		out->data[start] = '\0';
	}
	return e.detail;
}

/*
 * Append the Avro binary encoding of the JSON value to out; see encode.
 */
static char *
encode_jsonb(OutboxAvroSchema *schema, Jsonb *value, StringInfo out)
{
	JsonbValue	v;

	root_of(value, &v);
	return encode(schema, &v, out);
}

/*
 * Append the Avro binary encoding of the text value (len bytes, in the
 * server's encoding) to out (NULL: only check): the string itself if the
 * schema is a string, else JSON text; see encode.
 */
static char *
encode_text(OutboxAvroSchema *schema, const char *value, int len, StringInfo out)
{
	JsonbValue	v;

	if (takes_text(schema))
	{
		v.type = jbvString;
		v.val.string.val = (char *) value;
		v.val.string.len = len;
		return encode(schema, &v, out);
	}
	if (pg_parse_json(makeJsonLexContextCstringLen((char *) value, len, GetDatabaseEncoding(), true),
					  &nullSemAction) != JSON_SUCCESS)
		return "The value is not JSON, and its schema is not a string.";
	return encode_jsonb(schema,
						DatumGetJsonbP(DirectFunctionCall1(jsonb_in,
														   CStringGetDatum(pnstrdup(value, len)))),
						out);
}

/*
 * Raise the error of a value that does not fit its schema: what
 * ("payload", "key") of an event on topic, and detail, as the encoding
 * said.
 */
static void
refuse(const char *what, const char *topic, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("event %s does not match the Avro schema of topic \"%s\"", what, topic),
			 errdetail_internal("%s", detail),
			 errhint("docs/avro.md says how JSON values map to Avro types.")));
}

/*
 * The schemas of a topic of format avro, as outbox_set_topic is given
 * them: a value schema, for a topic (not a pattern), each checked, then
 * registered under <topic>-value and <topic>-key (Confluent's
 * TopicNameStrategy): their ids.
 */
static void
avro_check_topic(OutboxTopicSetting *setting)
{
	const char *pattern = setting->pattern;

	if (setting->value_schema == NULL)
		outbox_format_conflict(setting, "Format avro needs a value_schema.");
	if (pattern[strlen(pattern) - 1] == '*')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("format avro is set for a topic, not for pattern \"%s\"", pattern),
				 errdetail("A topic's Avro schemas are registered under its name (\"<topic>-value\", \"<topic>-key\") when it is set, and a pattern names no topic."),
				 errhint("Set format avro for each topic, with its schemas.")));
	check_schema(setting->value_schema, "value");
	if (setting->key_schema != NULL)
		check_schema(setting->key_schema, "key");
	setting->value_schema_id =
		outbox_registry_register(psprintf("%s-value", pattern), setting->value_schema);
	if (setting->key_schema != NULL)
		setting->key_schema_id =
			outbox_registry_register(psprintf("%s-key", pattern), setting->key_schema);
}

/*
 * The payload of an event on a topic of format avro, whose setting is
 * setting: the JSON payload checked against the value schema and encoded
 * in the Schema Registry's wire format; the key, if any, checked against
 * the key schema, not encoded: it is stored as given, for order per key
 * holds by its text, and encoded at publish (avro_prepare).  See
 * OutboxFormat.encode.
 */
static bytea *
avro_encode(const OutboxTopicSetting *setting, text *key, Datum payload, bool isnull,
			Oid type, bool *json)
{
	StringInfoData buf;
	char	   *problem;

	*json = false;
	if (key != NULL && setting->key_schema_id != 0 &&
		(problem = encode_text(schema_of(setting->key_schema),
							   VARDATA_ANY(key), VARSIZE_ANY_EXHDR(key), NULL)) != NULL)
		refuse("key", setting->pattern, problem);
	if (isnull)
		return NULL;
	if (type != JSONBOID)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the payload of an event on topic \"%s\" must be jsonb", setting->pattern),
				 errdetail("The topic has format avro: its events are checked against its schema and encoded from JSON."),
				 errhint("Give the payload as jsonb, or publish these bytes to a topic without a format.")));
	initStringInfo(&buf);
	appendStringInfoSpaces(&buf, VARHDRSZ);
	outbox_registry_frame(&buf, setting->value_schema_id);
	problem = encode_jsonb(schema_of(setting->value_schema),
						   DatumGetJsonbP(payload), &buf);
	if (problem != NULL)
		refuse("payload", setting->pattern, problem);
	SET_VARSIZE(buf.data, buf.len);
	return (bytea *) buf.data;
}

/*
 * Refuse a JSON payload on a topic of format avro: a trigger's, which
 * outbox_enqueue would have encoded.  See OutboxFormat.check_event.
 */
static int
avro_check_event(const OutboxTopicSetting *setting, const char *topic,
				 const OutboxEvent *ev, bool payload, bool json, Jsonb **headers)
{
	if (payload && json)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("topic \"%s\" is of format avro", topic),
				 errdetail("Its events are checked against its Avro schema and encoded by outbox_enqueue() with a jsonb payload."),
				 errhint("Attach the table with another topic, or enqueue its events with outbox_enqueue().")));
	return 0;
}

/*
 * Set ev's key to its Avro encoding if its topic's setting has a key
 * schema: the key is stored as given, its text (order per key holds by
 * it), and checked at enqueue against the schema the topic had then.  A
 * key that no longer fits, or that the encoding raises an error for (a
 * number out of range, a key stored by a trigger), is refused for good: in
 * a subtransaction, so that no stored key can stop the worker.  See
 * OutboxFormat.prepare.
 */
static void
avro_prepare(const OutboxTopicSetting *setting, OutboxEvent *ev)
{
	text	   *key;
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	StringInfoData buf;
	char	   *problem;

	if (ev->key == NULL || setting->key_schema_id == 0)
		return;
	key = DatumGetTextPP(ev->values[LOG_KEY]);
	initStringInfo(&buf);
	outbox_registry_frame(&buf, setting->key_schema_id);
	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		problem = encode_text(schema_of(setting->key_schema),
							  VARDATA_ANY(key), VARSIZE_ANY_EXHDR(key), &buf);
		ReleaseCurrentSubTransaction();
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		/* a cancel is the batch's, not the key's */
		if (edata->sqlerrcode == ERRCODE_QUERY_CANCELED)
			PG_RE_THROW();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		problem = edata->message;
	}
	PG_END_TRY();
	MemoryContextSwitchTo(cxt);
	CurrentResourceOwner = owner;
	if (problem != NULL)
	{
		ev->outcome = OUTBOX_REFUSED;
		ev->error = psprintf("The key does not match the Avro key schema of its topic: %s", problem);
		ev->permanent = true;
		return;
	}
	ev->key = buf.data;
	ev->key_len = buf.len;
}

const OutboxFormat outbox_avro_format = {
	.name = "avro",
	.settings = FORMAT_SCHEMAS,
	.check_topic = avro_check_topic,
	.encode = avro_encode,
	.check_event = avro_check_event,
	.prepare = avro_prepare,
};
