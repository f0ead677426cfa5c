/*-------------------------------------------------------------------------
 *
 * catalog.c
 *		The extension in the current database, as the catalogs say: where it
 *		is, who owns it, which version it is at and whether its schema can be
 *		trusted; the saved plans of the statements run on its tables; the
 *		entry check of every SQL-callable function.  docs/design.md, "Trust:
 *		what the extension's code may run", says why.
 *
 * src/base/catalog.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_database.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_namespace.h"
#include "commands/extension.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/inval.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "base/catalog.h"

/* version name to number: "1.2" -> 102; 0 if it is not of that form */
static int
parse_version(const char *name)
{
	int			major;
	int			minor;
	char		rest;

	if (sscanf(name, "%d.%d%c", &major, &minor, &rest) != 2 ||
		major < 0 || minor < 0 || minor > 99)
		return 0;
	return OUTBOX_VERSION(major, minor);
}

/*
 * What outbox_extension_find last read, valid until a relation or a
 * function changes (CREATE, ALTER and DROP EXTENSION change both, in this
 * transaction or another): saves a catalog scan per statement that
 * enqueues.
 */
static OutboxExtension found;
static bool found_valid = false;

/*
 * PostgreSQL has ten relcache callback slots a backend, for the core and
 * every library loaded (a library that finds none left stops the session
 * with FATAL): the caches of this library share one, this file's.
 */
#define MAX_RELATION_CALLBACKS 8
static RelcacheCallbackFunction relation_callbacks[MAX_RELATION_CALLBACKS];
static int	n_relation_callbacks = 0;

static void
relation_changed(Datum arg, Oid relid)
{
	found_valid = false;
	for (int i = 0; i < n_relation_callbacks; i++)
		relation_callbacks[i] (arg, relid);
}

static void
forget_found_function(Datum arg, int cacheid, uint32 hashvalue)
{
	found_valid = false;
}

static void
register_callbacks(void)
{
	static bool registered = false;

	if (registered)
		return;
	CacheRegisterRelcacheCallback(relation_changed, (Datum) 0);
	CacheRegisterSyscacheCallback(PROCOID, forget_found_function, (Datum) 0);
	registered = true;
}

/*
 * Call fn (with arg 0) at each relcache invalidation, as
 * CacheRegisterRelcacheCallback does, from now on in this process.
 */
void
outbox_on_relation_change(RelcacheCallbackFunction fn)
{
	register_callbacks();
	if (n_relation_callbacks >= MAX_RELATION_CALLBACKS)
		elog(ERROR, "out of outbox relation callback slots");
	relation_callbacks[n_relation_callbacks++] = fn;
}

/*
 * Read what the catalogs say of extension outbox in this database into
 * ext; false (ext->oid invalid) if it is not installed.  Reads the catalogs
 * only and runs no user code.  The caller holds a transaction.
 */
bool
outbox_extension_find(OutboxExtension *ext)
{
	Relation	rel;
	SysScanDesc scan;
	ScanKeyData key;
	HeapTuple	tuple;

	register_callbacks();
	AcceptInvalidationMessages();
	if (found_valid)
	{
		*ext = found;
		return OidIsValid(ext->oid);
	}

	memset(ext, 0, sizeof(*ext));
	rel = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyInit(&key, Anum_pg_extension_extname, BTEqualStrategyNumber, F_NAMEEQ,
				CStringGetDatum("outbox"));
	scan = systable_beginscan(rel, ExtensionNameIndexId, true, NULL, 1, &key);
	tuple = systable_getnext(scan);
	if (HeapTupleIsValid(tuple))
	{
		Form_pg_extension form = (Form_pg_extension) GETSTRUCT(tuple);
		bool		isnull;
		Datum		version = heap_getattr(tuple, Anum_pg_extension_extversion,
										   RelationGetDescr(rel), &isnull);

		ext->oid = form->oid;
		ext->schema = form->extnamespace;
		ext->owner = form->extowner;
		if (!isnull)
			text_to_cstring_buffer(DatumGetTextPP(version), ext->version_name,
								   sizeof(ext->version_name));
		ext->version = parse_version(ext->version_name);
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	found = *ext;
	found_valid = true;
	return OidIsValid(ext->oid);
}

/*
 * The role that acts as owner of an object owned by role: for
 * pg_database_owner, the owner of the current database.
 */
static Oid
acting_owner(Oid role)
{
	HeapTuple	tuple;

	if (role != ROLE_PG_DATABASE_OWNER)
		return role;
	tuple = SearchSysCache1(DATABASEOID, ObjectIdGetDatum(MyDatabaseId));
	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "cache lookup failed for database %u", MyDatabaseId);
	role = ((Form_pg_database) GETSTRUCT(tuple))->datdba;
	ReleaseSysCache(tuple);
	return role;
}

/*
 * What keeps this library from serving the version of extension ext, or
 * NULL if nothing does; *hint gets what to do about it.  palloc'd.
 */
static char *
version_problem(const OutboxExtension *ext, const char **hint)
{
	if (ext->version != 0 && ext->version < OUTBOX_VERSION_OLDEST)
	{
		*hint = "Update it with ALTER EXTENSION outbox UPDATE.";
		return psprintf("extension outbox is at version %s, which this library no longer serves",
						ext->version_name);
	}
	if (ext->version == 0 || ext->version > OUTBOX_VERSION_CURRENT)
	{
		*hint = "Install the outbox library of that version, and restart the server.";
		return psprintf("extension outbox is at version %s, which is newer than this library",
						ext->version_name);
	}
	return NULL;
}

/*
 * Why the schema of extension ext cannot be trusted with names, or NULL if
 * it can; *hint gets what to do about it.  palloc'd.
 */
static char *
schema_problem(const OutboxExtension *ext, const char **hint)
{
	HeapTuple	tuple;
	Oid			schema_owner;

	tuple = SearchSysCache1(NAMESPACEOID, ObjectIdGetDatum(ext->schema));
	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "cache lookup failed for schema %u", ext->schema);
	schema_owner = acting_owner(((Form_pg_namespace) GETSTRUCT(tuple))->nspowner);
	ReleaseSysCache(tuple);
	if (schema_owner == ext->owner || superuser_arg(schema_owner))
		return NULL;
	*hint = "Give the schema to a superuser or to the extension's owner (ALTER SCHEMA ... OWNER TO), or recreate the extension in a schema that one of them owns.";
	return psprintf("schema \"%s\" of extension outbox is owned by role \"%s\", which is neither the extension's owner nor a superuser",
					get_namespace_name(ext->schema),
					GetUserNameFromId(schema_owner, false));
}

/*
 * What keeps the worker from working with the extension ext (installed),
 * as a sentence with what to do about it, or NULL if nothing does.
 */
char *
outbox_extension_problem(const OutboxExtension *ext)
{
	const char *hint;
	char	   *problem = version_problem(ext, &hint);

	if (problem == NULL)
		problem = schema_problem(ext, &hint);
	return problem == NULL ? NULL : psprintf("%s: %s", problem, hint);
}

/*
 * Raise an error unless the schema of extension ext is in trusted hands:
 * what finds the extension's objects by name in it must not find a
 * look-alike.
 */
void
outbox_check_schema(const OutboxExtension *ext)
{
	const char *hint;
	char	   *problem = schema_problem(ext, &hint);

	if (problem != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("%s", problem),
				 errhint("%s", hint)));
}

/*
 * Raise an error if this library does not serve the version of extension
 * ext.
 */
void
outbox_extension_check(const OutboxExtension *ext)
{
	const char *hint;
	char	   *problem;

	if (!OidIsValid(ext->oid))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("extension outbox is not installed in this database")));
	problem = version_problem(ext, &hint);
	if (problem != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("%s", problem),
				 errhint("%s", hint)));
}

/*
 * The extension of a function called from SQL, checked: every entry point
 * of the library starts here.  Looked up at the first call through an
 * FmgrInfo and kept in its fn_extra, so a statement pays for it once.
 */
const OutboxExtension *
outbox_entry(FunctionCallInfo fcinfo)
{
	OutboxExtension *ext = (OutboxExtension *) fcinfo->flinfo->fn_extra;

	if (ext == NULL)
	{
		ext = MemoryContextAlloc(fcinfo->flinfo->fn_mcxt, sizeof(OutboxExtension));
		outbox_extension_find(ext);
		outbox_extension_check(ext);
		fcinfo->flinfo->fn_extra = ext;
	}
	return ext;
}

/*
 * The relation of the extension called name; an error that says to update
 * the extension if there is none.
 */
Oid
outbox_relation(const OutboxExtension *ext, const char *name)
{
	Oid			relid = get_relname_relid(name, ext->schema);

	if (!OidIsValid(relid))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("relation \"%s\" of extension \"outbox\" does not exist", name),
				 errhint("Update the extension with ALTER EXTENSION outbox UPDATE.")));
	return relid;
}

/*
 * Lock outbox_reader in mode until the end of the transaction.  Every
 * transaction of the worker takes this table first (the claim and the
 * rotation lock its row, the look for due events reads it, the others
 * call this), and so does DROP EXTENSION, in the mode it drops in: with
 * no order, DROP locked the log before the retry table while the worker
 * held the retry table and waited for the log, and one of them failed
 * with a deadlock.
 */
void
outbox_lock_reader_table(const OutboxExtension *ext, LOCKMODE mode)
{
	LockRelationOid(outbox_relation(ext, "outbox_reader"), mode);
}

/*
 * Refuse to run function in a transaction whose snapshot was taken before
 * its first statement: what it locks, it must see as it is once locked.
 */
void
outbox_require_read_committed(const char *function)
{
	if (IsolationUsesXactSnapshot())
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TRANSACTION_STATE),
				 errmsg("%s must run in a READ COMMITTED transaction", function),
				 errdetail("It locks the outbox and must see what committed before it got the lock."),
				 errhint("Call it in its own transaction, or begin with SET TRANSACTION ISOLATION LEVEL READ COMMITTED.")));
}

/*
 * The saved plan of plan for the schema of ext, prepared at its first use
 * and again if the schema changed: every statement that names the schema
 * goes through here, so this is where a schema that changed hands is
 * refused.  The caller is connected to SPI.
 */
SPIPlanPtr
outbox_plan(const OutboxExtension *ext, OutboxPlan *plan)
{
	char	   *schema_name = get_namespace_name(ext->schema);
	SPIPlanPtr	prepared;

	outbox_check_schema(ext);
	if (schema_name == NULL)
		elog(ERROR, "cache lookup failed for schema %u", ext->schema);
	if (plan->plan != NULL && plan->schema == ext->schema &&
		strcmp(NameStr(plan->schema_name), schema_name) == 0)
		return plan->plan;

	/*
	 * A generic plan, always: the statements are the same at every batch,
	 * and a custom plan would be planned again at each.
	 */
	prepared = SPI_prepare_cursor(psprintf(plan->sql, quote_identifier(schema_name)),
								  plan->nargs, plan->argtypes, CURSOR_OPT_GENERIC_PLAN);
	if (prepared == NULL)
		elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
	SPI_keepplan(prepared);
	if (plan->plan != NULL)
		SPI_freeplan(plan->plan);
	plan->plan = prepared;
	plan->schema = ext->schema;
	namestrcpy(&plan->schema_name, schema_name);
	return prepared;
}

/*
 * A one-dimensional array of n values of a built-in type (nulls may be
 * NULL: none), as a parameter of a saved plan.
 */
Datum
outbox_array(Datum *values, bool *nulls, int n, Oid type)
{
	int16		typlen;
	bool		typbyval;
	char		typalign;
	int			dims[1] = {n};
	int			lbs[1] = {1};

	get_typlenbyvalalign(type, &typlen, &typbyval, &typalign);
	return PointerGetDatum(construct_md_array(values, nulls, 1, dims, lbs, type,
											  typlen, typbyval, typalign));
}

/*
 * Run a saved plan (nulls as SPI takes them, or NULL: none); with
 * expected >= 0, that many rows must come back (or be changed).  Returns
 * how many did.  The caller is connected to SPI.
 */
static uint64
execute_plan(const OutboxExtension *ext, OutboxPlan *plan, Datum *values, const char *nulls,
			 int expected)
{
	int			ret = SPI_execute_plan(outbox_plan(ext, plan), values, nulls, false, 0);

	if (ret < 0)
		elog(ERROR, "outbox statement failed: %s", SPI_result_code_string(ret));
	if (expected >= 0 && SPI_processed != (uint64) expected)
		elog(ERROR, "outbox statement returned " UINT64_FORMAT " rows, expected %d",
			 SPI_processed, expected);
	return SPI_processed;
}

/*
 * Run a saved plan; with expected >= 0, that many rows must come back (or
 * be changed).  Returns how many did.  The caller is connected to SPI.
 */
uint64
outbox_run(const OutboxExtension *ext, OutboxPlan *plan, Datum *values, int expected)
{
	return execute_plan(ext, plan, values, NULL, expected);
}

/*
 * Run a saved plan as outbox_run does (nulls as SPI takes them, or NULL),
 * as the extension's owner, for a caller that may have no right on the
 * extension's tables: the statement is the extension's own.  Whatever it
 * runs besides (a trigger, rule or policy the owner put on the table, a
 * default, a constraint) runs security-restricted and in a GUC nest level
 * of its own, as PostgreSQL runs code as a table's owner (index
 * expressions, REFRESH MATERIALIZED VIEW): it cannot change a setting of
 * the caller's session, create a temporary object, SET ROLE, PREPARE or
 * LISTEN.  On an error the abort of the transaction or subtransaction
 * puts the user and the settings back, as it does for PostgreSQL's own.
 * The caller is connected to SPI.
 */
uint64
outbox_run_as_owner(const OutboxExtension *ext, OutboxPlan *plan, Datum *values,
					const char *nulls, int expected)
{
	Oid			save_userid;
	int			save_sec;
	int			save_nestlevel;
	uint64		processed;

	GetUserIdAndSecContext(&save_userid, &save_sec);
	SetUserIdAndSecContext(ext->owner,
						   save_sec | SECURITY_LOCAL_USERID_CHANGE | SECURITY_RESTRICTED_OPERATION);
	save_nestlevel = NewGUCNestLevel();
	processed = execute_plan(ext, plan, values, nulls, expected);
	AtEOXact_GUC(false, save_nestlevel);
	SetUserIdAndSecContext(save_userid, save_sec);
	return processed;
}

/*
 * Run a saved plan that returns one row; its first column.
 */
Datum
outbox_run_value(const OutboxExtension *ext, OutboxPlan *plan, Datum *values, bool *isnull)
{
	outbox_run(ext, plan, values, 1);
	return SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, isnull);
}
