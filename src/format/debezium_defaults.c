/*-------------------------------------------------------------------------
 *
 * debezium_defaults.c
 *		The defaults of a table's columns as Debezium's PostgreSQL connector
 *		has them in its schemas (PostgresDefaultValueConverter): the text
 *		of each default (pg_get_expr, what the JDBC driver's COLUMN_DEF
 *		gives), read by the connector's rules, never evaluated.  A
 *		function call (nextval() too) or CURRENT_DATE and the like gives
 *		the type's placeholder; else the first quoted literal, or the text
 *		itself, parsed as a value of the column's type; a type the
 *		connector has no parser for, a text that does not parse, have no
 *		default.  docs/debezium.md lists them.
 *
 * The defaults of a table are read once per session and kept until the
 * table's relcache entry (ALTER TABLE ... SET DEFAULT), a type, a schema, a
 * function or an enum's label is invalidated: a change reads no catalog
 * for them.  The
 * text is deparsed with DateStyle ISO and TimeZone UTC pinned, as the
 * connector's JDBC session reads it, and the settings that qualify and
 * quote names as the worker has them, whatever the session that reads it
 * first (a key's schema carries its default); a default holding a constant of a
 * type whose output function is not built in is not deparsed (it has no
 * default here), so that no code but PostgreSQL's runs for it.  A literal
 * is parsed by the built-in input function of the column's type, in a
 * subtransaction: a data error gives no default, as an exception does to
 * the connector.
 *
 * src/format/debezium_defaults.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/transam.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "nodes/nodeFuncs.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/numeric.h"
#include "utils/rel.h"
#include "utils/resowner.h"
#include "utils/syscache.h"

#include "base/catalog.h"
#include "format/debezium_defaults.h"

/* the defaults of one table */
typedef struct TableDefaults
{
	Oid			relid;			/* the key */
	bool		valid;			/* false once invalidated */
	MemoryContext cxt;			/* holds what follows */
	Oid			reltype;		/* the table's row type */
	char	  **names;			/* its columns, by attribute number - 1 */
	DebeziumDefaults *defaults; /* NULL: not read (yet) */
} TableDefaults;

static HTAB *tables = NULL;

/*
 * Forget the defaults of relid, or of every table for InvalidOid: a
 * relcache invalidation callback.
 */
static void
forget_table(Datum arg, Oid relid)
{
	HASH_SEQ_STATUS status;
	TableDefaults *entry;

	if (OidIsValid(relid))
	{
		entry = hash_search(tables, &relid, HASH_FIND, NULL);
		if (entry != NULL)
			entry->valid = false;
		return;
	}
	hash_seq_init(&status, tables);
	while ((entry = hash_seq_search(&status)) != NULL)
		entry->valid = false;
}

/*
 * Forget every table's defaults when a type, a schema or a function
 * changes (renamed, an enum's label: the text of a default names them): a
 * syscache callback.
 */
static void
forget_types(Datum arg, int cacheid, uint32 hashvalue)
{
	forget_table(arg, InvalidOid);
}

/*
 * Has expr a constant of a type whose output function is not built in
 * (an enum's, enum_out, is), which deparsing it would run?
 */
static bool
unsafe_constant(Node *node, void *context)
{
	if (node == NULL)
		return false;
	if (IsA(node, Const))
	{
		Oid			type = ((Const *) node)->consttype;
		Oid			element = get_element_type(type);

		if (OidIsValid(element))
			type = element;
		return type >= FirstNormalObjectId && !type_is_enum(type);
	}
	return expression_tree_walker(node, unsafe_constant, context);
}

/* Java's String.trim(): characters up to ' ' off both ends; palloc'd */
static char *
java_trim(const char *s)
{
	int			len = strlen(s);

	while (len > 0 && (unsigned char) s[len - 1] <= ' ')
		len--;
	while (len > 0 && (unsigned char) *s <= ' ')
		s++, len--;
	return pnstrdup(s, len);
}

/*
 * Is text a function call or a CURRENT_* of the connector's
 * FUNCTION_DEFAULT_PATTERN, ^[(]?[A-Za-z0-9_.]+\((?:.+(?:, ?.+)*)?\), or
 * CURRENT_DATE_TIMES?
 */
static bool
generated(const char *text)
{
	static const char *const current[] = {"current_timestamp", "current_time", "current_date",
	"localtime", "localtimestamp"};
	const char *c = text;
	const char *name;

	for (int i = 0; i < lengthof(current); i++)
		if (pg_strcasecmp(text, current[i]) == 0)
			return true;
	if (*c == '(')
		c++;
	name = c;
	while ((*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') ||
		   (*c >= '0' && *c <= '9') || *c == '_' || *c == '.')
		c++;
	if (c == name || *c != '(')
		return false;
	/* then a ")" on the same line */
	for (c++; *c != '\0' && *c != '\n' && *c != '\r'; c++)
		if (*c == ')')
			return true;
	return false;
}

/*
 * The connector's extractDefault: placeholder for a generated default;
 * else the text itself if it has no quote (NULL for NULL::...), or the
 * first quoted literal, '' as '.  palloc'd.
 */
static char *
extract_default(const char *text, const char *placeholder)
{
	const char *open = strchr(text, '\'');
	StringInfoData literal;

	if (generated(text))
		return pstrdup(placeholder);
	if (open == NULL)
		return strncmp(text, "NULL::", 6) == 0 ? NULL : pstrdup(text);
	initStringInfo(&literal);
	for (const char *c = open + 1; *c != '\0'; c++)
	{
		if (*c == '\'' && c[1] == '\'')
			c++;
		else if (*c == '\'')
			return literal.data;
		appendStringInfoChar(&literal, *c);
	}
	return NULL;				/* no closing quote: the connector fails */
}

/*
 * The last name of a type name as the connector's TypeId parses it: parts
 * separated by dots, each bare or double-quoted.  palloc'd.
 */
static char *
last_type_name(const char *text)
{
	StringInfoData part;

	initStringInfo(&part);
	for (const char *c = text; *c != '\0'; c++)
	{
		if (*c == '"')
		{
			for (c++; *c != '\0' && !(*c == '"' && c[1] != '"'); c++)
			{
				if (*c == '"')
					c++;
				appendStringInfoChar(&part, *c);
			}
			if (*c == '\0')
				break;
		}
		else if (*c == '.')
			resetStringInfo(&part);
		else
			appendStringInfoChar(&part, *c);
	}
	return part.data;
}

/*
 * The connector's extractEnumDefault: 'label'::type, the type the enum's
 * (by name, qualified or not); the label as it is between the quotes.
 * NULL if the text is not that.
 */
static char *
enum_default(const char *text, Oid typid)
{
	const char *cast = NULL;
	HeapTuple	tuple;
	bool		same;
	int			len;

	for (const char *c = strstr(text, "::"); c != NULL; c = strstr(c + 1, "::"))
		cast = c;
	if (cast == NULL)
		return NULL;
	tuple = SearchSysCache1(TYPEOID, ObjectIdGetDatum(typid));
	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "cache lookup failed for type %u", typid);
	same = strcmp(last_type_name(cast + 2), NameStr(((Form_pg_type) GETSTRUCT(tuple))->typname)) == 0;
	ReleaseSysCache(tuple);
	if (!same)
		return NULL;
	len = cast - text;
	if (len < 2 || text[0] != '\'' || text[len - 1] != '\'')
		return NULL;
	return pnstrdup(text + 1, len - 2);
}

/*
 * Java's Long.parseLong of text, within [min, max]: false if it is not
 * such a number.
 */
static bool
java_integer(const char *text, int64 min, int64 max, int64 *value)
{
	const char *c = text;
	bool		negative = *c == '-';
	uint64		magnitude = 0;

	if (*c == '-' || *c == '+')
		c++;
	if (*c == '\0')
		return false;
	for (; *c != '\0'; c++)
	{
		if (*c < '0' || *c > '9')
			return false;
		magnitude = magnitude * 10 + (*c - '0');
		if (magnitude > (uint64) PG_INT64_MAX + 1)
			return false;
	}
	if (!negative && magnitude > (uint64) PG_INT64_MAX)
		return false;
	*value = negative ? (int64) (0 - magnitude) : (int64) magnitude;
	return *value >= min && *value <= max;
}

/*
 * Is text a number as Java's BigDecimal(String) reads it: a sign, digits
 * with a point, an exponent?
 */
static bool
java_decimal(const char *text)
{
	const char *c = text;
	int			digits = 0;

	if (*c == '-' || *c == '+')
		c++;
	for (; *c >= '0' && *c <= '9'; c++)
		digits++;
	if (*c == '.')
		for (c++; *c >= '0' && *c <= '9'; c++)
			digits++;
	if (digits == 0)
		return false;
	if (*c == 'e' || *c == 'E')
	{
		c++;
		if (*c == '-' || *c == '+')
			c++;
		if (*c < '0' || *c > '9')
			return false;
		while (*c >= '0' && *c <= '9')
			c++;
	}
	return *c == '\0';
}

/*
 * text as a value of built-in type typid, by its input function, into
 * *value; false for a data error (22xxx), in a subtransaction.
 */
static bool
parse_value(const char *text, Oid typid, Datum *value)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	Oid			input;
	Oid			ioparam;
	bool		parsed = true;

	getTypeInputInfo(typid, &input, &ioparam);
	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		*value = OidInputFunctionCall(input, (char *) text, ioparam, -1);
		ReleaseCurrentSubTransaction();
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		if (ERRCODE_TO_CATEGORY(edata->sqlerrcode) != ERRCODE_DATA_EXCEPTION)
			PG_RE_THROW();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		parsed = false;
	}
	PG_END_TRY();
	MemoryContextSwitchTo(cxt);
	CurrentResourceOwner = owner;
	return parsed;
}

/*
 * The default of a column of type typid (typmod: the column's), from the
 * text of its default expression, as the connector's mapper of the type
 * parses it (PostgresDefaultValueConverter.createDefaultValueMappers);
 * into *d, palloc'd.  None for a type the connector has no mapper for.
 */
static void
parse_default(const char *expr, Oid typid, int32 typmod, DebeziumDefault *d)
{
	const char *placeholder;
	char	   *text;
	int64		n;

	d->has = false;
	if (type_is_enum(typid))
	{
		d->string = enum_default(expr, typid);
		d->has = d->string != NULL;
		return;
	}
	switch (typid)
	{
		case TEXTOID:
		case VARCHAROID:
		case BPCHAROID:
		case XMLOID:
			placeholder = "";
			break;
		case JSONOID:
		case JSONBOID:
			placeholder = "{}";
			break;
		case BOOLOID:
			placeholder = "false";
			break;
		case INT2OID:
		case INT4OID:
		case INT8OID:
			placeholder = "0";
			break;
		case NUMERICOID:
		case FLOAT4OID:
		case FLOAT8OID:
			placeholder = "0.0";
			break;
		case UUIDOID:
			placeholder = "00000000-0000-0000-0000-000000000000";
			break;
		case DATEOID:
		case TIMESTAMPOID:
		case TIMESTAMPTZOID:
			placeholder = "1970-01-01";
			break;
		case TIMEOID:
			placeholder = "00:00";
			break;
		case INTERVALOID:
			placeholder = "0";	/* pgjdbc's PGInterval of "epoch": zero */
			break;
		default:
			return;
	}
	/* the types of TRIM_DATA_TYPES trimmed, those of parseNullDefault */
	if (typid != TEXTOID && typid != VARCHAROID && typid != BPCHAROID && typid != XMLOID &&
		typid != JSONOID && typid != JSONBOID)
		expr = java_trim(expr);
	if ((typid == BOOLOID || typid == INT2OID || typid == INT4OID || typid == INT8OID ||
		 typid == NUMERICOID || typid == FLOAT4OID || typid == FLOAT8OID) &&
		strncmp(expr, "NULL::", 6) == 0)
		return;
	text = extract_default(expr, placeholder);
	if (text == NULL)
		return;
	d->string = NULL;
	switch (typid)
	{
		case TEXTOID:
		case VARCHAROID:
		case BPCHAROID:
		case XMLOID:
		case JSONOID:
		case JSONBOID:
			d->string = text;
			d->has = true;
			break;
		case BOOLOID:
			d->value = BoolGetDatum(pg_strcasecmp(text, "true") == 0);
			d->has = true;
			break;
		case INT2OID:
			d->has = java_integer(text, PG_INT16_MIN, PG_INT16_MAX, &n);
			d->value = Int16GetDatum((int16) n);
			break;
		case INT4OID:
			d->has = java_integer(text, PG_INT32_MIN, PG_INT32_MAX, &n);
			d->value = Int32GetDatum((int32) n);
			break;
		case INT8OID:
			d->has = java_integer(text, PG_INT64_MIN, PG_INT64_MAX, &n);
			d->value = Int64GetDatum(n);
			break;
		case NUMERICOID:
			d->has = java_decimal(text) && parse_value(text, typid, &d->value);
			if (d->has && typmod >= 0)
			{
				/* at the column's scale; more decimals than it: none */
				int			scale = (((typmod - VARHDRSZ) & 0x7ff) ^ 1024) - 1024;
				Datum		scaled = DirectFunctionCall2(numeric_round, d->value,
														 Int32GetDatum(scale));

				d->has = DatumGetInt32(DirectFunctionCall2(numeric_cmp, scaled, d->value)) == 0;
				d->value = scaled;
			}
			break;
		default:
			d->has = parse_value(text, typid, &d->value);
			break;
	}
}

/*
 * The settings that the text of a default depends on besides those of its
 * values (outbox_debezium_pin_settings): how names are qualified and
 * quoted, how a backslash in a literal is written.  Pinned as the worker's
 * session has them, so that a default, and the key and schema that carry
 * it, are the same whichever session reads them first.
 */
static const char *const deparse_settings[][2] = {
	{"search_path", "pg_catalog, pg_temp"},
	{"quote_all_identifiers", "off"},
	{"standard_conforming_strings", "on"},
};

/*
 * Read the defaults of table rel into entry, in entry->cxt.
 */
static void
read_defaults(TableDefaults *entry, Relation rel)
{
	TupleDesc	tupdesc = RelationGetDescr(rel);
	TupleConstr *constr = tupdesc->constr;
	DebeziumDefaults *defaults;
	int			nestlevel = outbox_debezium_pin_settings(NULL);

	for (int i = 0; i < lengthof(deparse_settings); i++)
		(void) set_config_option(deparse_settings[i][0], deparse_settings[i][1], PGC_USERSET,
								 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	defaults = MemoryContextAllocZero(entry->cxt, offsetof(DebeziumDefaults, columns) +
									  Max(tupdesc->natts, 1) * sizeof(DebeziumDefault));
	defaults->natts = tupdesc->natts;
	entry->names = MemoryContextAllocZero(entry->cxt, Max(tupdesc->natts, 1) * sizeof(char *));
	entry->reltype = rel->rd_rel->reltype;
	for (int i = 0; constr != NULL && i < constr->num_defval; i++)
	{
		AttrDefault *def = &constr->defval[i];
		Form_pg_attribute attr = TupleDescAttr(tupdesc, def->adnum - 1);
		DebeziumDefault *d = &defaults->columns[def->adnum - 1];
		MemoryContext cxt;
		Node	   *expr;
		char	   *deparsed;

		if (attr->attisdropped)
			continue;
		cxt = MemoryContextSwitchTo(entry->cxt);
		entry->names[def->adnum - 1] = pstrdup(NameStr(attr->attname));
		MemoryContextSwitchTo(cxt);
		expr = stringToNode(def->adbin);
		if (unsafe_constant(expr, NULL))
			continue;
		deparsed = TextDatumGetCString(DirectFunctionCall2(pg_get_expr,
														   CStringGetTextDatum(def->adbin),
														   ObjectIdGetDatum(RelationGetRelid(rel))));
		parse_default(deparsed, attr->atttypid, attr->atttypmod, d);
		cxt = MemoryContextSwitchTo(entry->cxt);
		if (d->has && d->string != NULL)
			d->string = pstrdup(d->string);
		else if (d->has)
			d->value = datumCopy(d->value, attr->attbyval, attr->attlen);
		MemoryContextSwitchTo(cxt);
	}
	outbox_debezium_unpin_settings(nestlevel);
	entry->defaults = defaults;
}

/*
 * The defaults of the columns of table relid (locked by the caller), the
 * connector's, for rows given with tupdesc (the table's, or its columns by
 * name): read once per session, until the table or a type changes.
 */
const DebeziumDefaults *
outbox_debezium_defaults(Oid relid, TupleDesc tupdesc)
{
	TableDefaults *entry;
	bool		found;
	DebeziumDefaults *mapped;

	if (tables == NULL)
	{
		HASHCTL		ctl = {0};

		ctl.keysize = sizeof(Oid);
		ctl.entrysize = sizeof(TableDefaults);
		ctl.hcxt = CacheMemoryContext;
		tables = hash_create("outbox debezium defaults", 16, &ctl,
							 HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
		outbox_on_relation_change(forget_table);
		CacheRegisterSyscacheCallback(TYPEOID, forget_types, (Datum) 0);
		CacheRegisterSyscacheCallback(ENUMOID, forget_types, (Datum) 0);
		CacheRegisterSyscacheCallback(NAMESPACEOID, forget_types, (Datum) 0);
		CacheRegisterSyscacheCallback(PROCOID, forget_types, (Datum) 0);
	}
	entry = hash_search(tables, &relid, HASH_ENTER, &found);
	if (!found)
	{
		entry->cxt = NULL;
		entry->defaults = NULL;
	}
	if (!found || !entry->valid || entry->defaults == NULL)
	{
		Relation	rel = RelationIdGetRelation(relid);

		if (!RelationIsValid(rel))
			elog(ERROR, "could not open relation with OID %u", relid);
		/* an invalidation while reading leaves it invalid: read again next time */
		entry->valid = true;
		entry->defaults = NULL;
		if (entry->cxt != NULL)
			MemoryContextDelete(entry->cxt);
		entry->cxt = AllocSetContextCreate(CacheMemoryContext, "outbox debezium defaults",
										   ALLOCSET_SMALL_SIZES);
		read_defaults(entry, rel);
		RelationClose(rel);
	}
	if (tupdesc->tdtypeid == entry->reltype && tupdesc->natts == entry->defaults->natts)
		return entry->defaults;

	/* rows of other columns (a snapshot's): the defaults by name */
	mapped = palloc0(offsetof(DebeziumDefaults, columns) +
					 Max(tupdesc->natts, 1) * sizeof(DebeziumDefault));
	mapped->natts = tupdesc->natts;
	for (int j = 0; j < entry->defaults->natts; j++)
	{
		if (!entry->defaults->columns[j].has)
			continue;
		for (int i = 0; i < tupdesc->natts; i++)
			if (!TupleDescAttr(tupdesc, i)->attisdropped &&
				strcmp(NameStr(TupleDescAttr(tupdesc, i)->attname), entry->names[j]) == 0)
				mapped->columns[i] = entry->defaults->columns[j];
	}
	return mapped;
}
