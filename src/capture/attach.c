/*-------------------------------------------------------------------------
 *
 * attach.c
 *		The SQL entry points of capture: outbox_attach(), which installs
 *		the outbox_capture() trigger (and asks for a snapshot), the trigger
 *		itself, and outbox_detach(), which removes it (and the router's
 *		trigger, src/capture/router.c).  docs/design.md, "Capture", says
 *		why they work as they do.
 *
 * src/capture/attach.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/typcache.h"

#include "base/catalog.h"
#include "capture/capture.h"
#include "capture/snapshot.h"
#include "capture/tables.h"
#include "format/format.h"
#include "queue/enqueue.h"

PG_FUNCTION_INFO_V1(outbox_capture);
PG_FUNCTION_INFO_V1(outbox_attach);
PG_FUNCTION_INFO_V1(outbox_detach);

/*
 * outbox_capture(): AFTER INSERT OR UPDATE OR DELETE FOR EACH ROW, and
 * AFTER TRUNCATE FOR EACH STATEMENT; arguments as outbox_capture_config
 * reads them.
 */
Datum
outbox_capture(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	const OutboxExtension *ext;
	Relation	rel;
	HeapTuple	before = NULL;
	HeapTuple	after = NULL;
	char		op;
	CapturedTable *captured;
	CaptureConfig config;
	CaptureTable table;
	int			nestlevel = -1;
	bool		left_to_snapshot = false;
	ErrorContextCallback errcallback;

	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("function \"%s\" was not called by trigger manager", "outbox_capture")));
	/* the errors of its firing and its arguments name the trigger */
	errcallback.callback = outbox_trigger_error_context;
	errcallback.arg = trigdata;
	errcallback.previous = error_context_stack;
	error_context_stack = &errcallback;
	if (!TRIGGER_FIRED_AFTER(trigdata->tg_event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("function \"%s\" must be fired AFTER the change", "outbox_capture"),
				 errhint("Use outbox_attach() to create the trigger.")));
	if (TRIGGER_FIRED_BY_TRUNCATE(trigdata->tg_event))
		op = 't';
	else if (!TRIGGER_FIRED_FOR_ROW(trigdata->tg_event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("function \"%s\" must be fired FOR EACH ROW", "outbox_capture"),
				 errhint("Use outbox_attach() to create the trigger.")));
	else if (TRIGGER_FIRED_BY_INSERT(trigdata->tg_event))
	{
		op = 'c';
		after = trigdata->tg_trigtuple;
	}
	else if (TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event))
	{
		op = 'u';
		before = trigdata->tg_trigtuple;
		after = trigdata->tg_newtuple;
	}
	else
	{
		op = 'd';
		before = trigdata->tg_trigtuple;
	}
	error_context_stack = errcallback.previous;

	ext = outbox_entry(fcinfo);
	rel = trigdata->tg_relation;
	if (op == 't')
	{
		CaptureConfig nokeys;

		error_context_stack = &errcallback;
		outbox_capture_config(trigdata->tg_trigger->tgnargs, trigdata->tg_trigger->tgargs,
							  &config);
		error_context_stack = errcallback.previous;
		/* a truncate has no key: its key columns are not looked for */
		nokeys = config;
		nokeys.nkeys = 0;
		outbox_capture_table(&nokeys, rel, RelationGetDescr(rel), &table);
		table.nkeys = 0;
		outbox_capture_event(ext, &config, &table, op, NULL, NULL, "false");
		return PointerGetDatum(NULL);
	}

	/*
	 * The table as the session knows it (capture/tables.c), copied: a call
	 * below may sweep the entry (its memory stays until the transaction
	 * ends).
	 */
	captured = outbox_captured_table(ext, trigdata);
	config = captured->config;
	table = captured->table;
	table.tupdesc = RelationGetDescr(rel);

	/*
	 * The function runs with the caller's search_path (it looks up no name
	 * through it): pinned as 1.3 pinned it while a value's text may read it,
	 * and while a snapshot may be in progress, whose key's types and last
	 * key are text that the worker wrote with it pinned.
	 */
	if (captured->pin_search_path || captured->snapshots)
		nestlevel = outbox_pin_search_path(-1);

	/*
	 * A row that a snapshot in progress will read is left to its r event
	 * (src/capture/snapshot.c): a change is published only for rows it has
	 * read, and a row moved past them is deleted where it was.  Whether one
	 * may be in progress is known without a look while none is.
	 */
	if (captured->snapshots && !outbox_snapshot_in_progress(ext, rel))
		captured->snapshots = false;
	if (captured->snapshots && outbox_snapshot_ahead(ext, rel, after != NULL ? after : before))
	{
		if (before == NULL || after == NULL || outbox_snapshot_ahead(ext, rel, before))
			left_to_snapshot = true;
		op = 'd';
		after = NULL;
	}

	if (!left_to_snapshot)
		outbox_capture_event(ext, &config, &table, op, before, after, "false");
	if (nestlevel >= 0)
		AtEOXact_GUC(true, nestlevel);

	return PointerGetDatum(NULL);
}

/*
 * The columns a snapshot of rel walks, in order: the primary key, else the
 * key columns of config if all are NOT NULL and ordered by a btree; an
 * error otherwise.
 */
static char **
snapshot_walk_columns(Relation rel, const CaptureConfig *config, int *ncolumns)
{
	char	  **names = outbox_primary_key(rel, ncolumns);

	if (names != NULL)
		return names;
	if (config->nkeys == 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("cannot snapshot table \"%s\": it has no primary key",
						RelationGetRelationName(rel)),
				 errdetail("A snapshot reads the table in the order of its primary key, or of NOT NULL key columns."),
				 errhint("Add a primary key, or name NOT NULL key columns in key_columns.")));
	for (int i = 0; i < config->nkeys; i++)
	{
		AttrNumber	attnum = get_attnum(RelationGetRelid(rel), config->keys[i]);
		Form_pg_attribute attr = TupleDescAttr(RelationGetDescr(rel), attnum - 1);
		TypeCacheEntry *typentry = lookup_type_cache(attr->atttypid, TYPECACHE_LT_OPR);

		if (!attr->attnotnull || !OidIsValid(typentry->lt_opr))
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("cannot snapshot table \"%s\" by key column \"%s\"",
							RelationGetRelationName(rel), config->keys[i]),
					 errdetail(!attr->attnotnull ?
							   "A table without a primary key is read in the order of its key columns, which must be NOT NULL." :
							   "A table without a primary key is read in the order of its key columns, which must have an ordering."),
					 errhint("Add a primary key, or mark the key columns NOT NULL.")));
	}
	*ncolumns = config->nkeys;
	return config->keys;
}

/*
 * outbox_attach(tbl regclass, topic text, key_columns text[] DEFAULT NULL,
 *				 format text DEFAULT 'outbox', snapshot boolean DEFAULT false,
 *				 tombstones boolean DEFAULT NULL,
 *				 decimal_handling text DEFAULT NULL,
 *				 skipped_operations text DEFAULT NULL,
 *				 schemas_enable boolean DEFAULT NULL,
 *				 converter text DEFAULT NULL,
 *				 replace_null_with_default boolean DEFAULT NULL)
 *
 * Capture the changes of tbl with the triggers outbox_capture (rows) and
 * outbox_capture_truncate, replacing them if they exist; with snapshot,
 * also publish the rows it has (src/capture/snapshot.c).  With the avro
 * converter, the schemas of the table's keys and values are registered
 * now (a table's partitions: at their first change).  A 1.1 database declares
 * the first three arguments only, a 1.2 database the first six (tombstones
 * DEFAULT false): their debezium triggers write what 1.2 wrote; a 1.3
 * database the first ten: its debezium triggers write what 1.3 wrote.
 */
Datum
outbox_attach(PG_FUNCTION_ARGS)
{
	const OutboxExtension *ext = outbox_entry(fcinfo);
	Oid			relid = PG_GETARG_OID(0);
	const char *format = "outbox";
	bool		snapshot = false;
	CaptureConfig config;
	Relation	rel;
	char	   *relname;
	char	   *topic;
	char	   *function;
	char	  **args;
	int			nargs;
	StringInfoData arglist;
	AclResult	aclresult;

	if (PG_NARGS() != 3 && PG_NARGS() != 6 && PG_NARGS() != 10 && PG_NARGS() != 11)
		elog(ERROR, "outbox_attach called with %d arguments", PG_NARGS());
	if (PG_NARGS() >= 6 && fcinfo->flinfo->fn_expr != NULL &&
		(get_fn_expr_argtype(fcinfo->flinfo, 3) != TEXTOID ||
		 get_fn_expr_argtype(fcinfo->flinfo, 4) != BOOLOID ||
		 get_fn_expr_argtype(fcinfo->flinfo, 5) != BOOLOID ||
		 (PG_NARGS() >= 10 &&
		  (get_fn_expr_argtype(fcinfo->flinfo, 6) != TEXTOID ||
		   get_fn_expr_argtype(fcinfo->flinfo, 7) != TEXTOID ||
		   get_fn_expr_argtype(fcinfo->flinfo, 8) != BOOLOID ||
		   get_fn_expr_argtype(fcinfo->flinfo, 9) != TEXTOID)) ||
		 (PG_NARGS() == 11 && get_fn_expr_argtype(fcinfo->flinfo, 10) != BOOLOID)))
		elog(ERROR, "outbox_attach called with arguments of unexpected types");

	memset(&config, 0, sizeof(config));
	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("topic must not be null")));
	config.topic = text_to_cstring(PG_GETARG_TEXT_PP(1));
	outbox_check_topic(config.topic, strlen(config.topic));
	if (PG_NARGS() >= 6)
	{
		if (PG_ARGISNULL(3))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("format must not be null")));
		format = text_to_cstring(PG_GETARG_TEXT_PP(3));
		snapshot = !PG_ARGISNULL(4) && PG_GETARG_BOOL(4);
	}
	outbox_format_capture(format, &config);
	outbox_format_attach_options(fcinfo, &config);
	rel = outbox_open_to_attach(relid);
	if (outbox_has_trigger(ext, rel, ROUTER_TRIGGER))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("table \"%s\" is attached as an outbox router", RelationGetRelationName(rel)),
				 errdetail("Its inserts are published as the events that the application writes in it."),
				 errhint("Call outbox_detach() first to capture its changes instead.")));
	topic = outbox_format_capture_topic(&config, get_namespace_name(RelationGetNamespace(rel)),
										RelationGetRelationName(rel));
	outbox_check_topic(topic, strlen(topic));
	if (!PG_ARGISNULL(2))
	{
		Datum	   *names;
		bool	   *nulls;
		int			n;

		deconstruct_array(PG_GETARG_ARRAYTYPE_P(2), TEXTOID, -1, false, TYPALIGN_INT,
						  &names, &nulls, &n);
		config.keys = palloc(Max(n, 1) * sizeof(char *));
		for (int i = 0; i < n; i++)
		{
			char	   *name = nulls[i] ? "" : TextDatumGetCString(names[i]);

			if (get_attnum(relid, name) <= 0)
				ereport(ERROR,
						(errcode(ERRCODE_UNDEFINED_COLUMN),
						 errmsg("column \"%s\" of relation \"%s\" does not exist",
								name, get_rel_name(relid))));
			config.keys[config.nkeys++] = name;
		}
	}
	if (snapshot)
	{
		aclresult = pg_class_aclcheck(relid, GetUserId(), ACL_SELECT);
		if (aclresult != ACLCHECK_OK)
			aclcheck_error(aclresult, OBJECT_TABLE, get_rel_name(relid));
	}

	outbox_format_attached(ext, &config, rel);

	args = outbox_capture_args(&config, &nargs);
	initStringInfo(&arglist);
	for (int i = 0; i < nargs; i++)
		appendStringInfo(&arglist, "%s%s", i > 0 ? ", " : "", quote_literal_cstr(args[i]));
	relname = quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
										 RelationGetRelationName(rel));
	function = quote_qualified_identifier(get_namespace_name(ext->schema), "outbox_capture");
	SPI_connect();
	if (SPI_execute(psprintf("CREATE OR REPLACE TRIGGER " CAPTURE_TRIGGER " "
							 "AFTER INSERT OR UPDATE OR DELETE ON %s "
							 "FOR EACH ROW EXECUTE FUNCTION %s(%s)",
							 relname, function, arglist.data), false, 0) != SPI_OK_UTILITY ||
		SPI_execute(psprintf("CREATE OR REPLACE TRIGGER " CAPTURE_TRUNCATE_TRIGGER " "
							 "AFTER TRUNCATE ON %s "
							 "FOR EACH STATEMENT EXECUTE FUNCTION %s(%s)",
							 relname, function, arglist.data), false, 0) != SPI_OK_UTILITY)
		elog(ERROR, "creating the capture triggers failed");
	SPI_finish();
	outbox_note_attachment(ext, relid, true);

	/* a snapshot asked for starts (again); one of another configuration stops */
	if (ext->version >= OUTBOX_VERSION(1, 2))
	{
		if (snapshot)
		{
			char	  **walk;
			int			nwalk;

			walk = snapshot_walk_columns(rel, &config, &nwalk);
			outbox_snapshot_request(ext, rel, format, config.topic, args, nargs, walk, nwalk);
		}
		else
			outbox_snapshot_forget(ext, relid, args, nargs);
	}
	table_close(rel, NoLock);
	PG_RETURN_VOID();
}

/*
 * outbox_detach(tbl regclass): drop the triggers of outbox_attach and
 * outbox_attach_router, and cancel a snapshot in progress.  Nothing is
 * said of triggers that are not there.
 */
Datum
outbox_detach(PG_FUNCTION_ARGS)
{
	const OutboxExtension *ext = outbox_entry(fcinfo);
	Oid			relid = PG_GETARG_OID(0);
	const char *const triggers[] = {CAPTURE_TRIGGER, CAPTURE_TRUNCATE_TRIGGER, ROUTER_TRIGGER};
	char	   *relname;

	if (get_rel_name(relid) == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", relid)));
	relname = quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
										 get_rel_name(relid));
	SPI_connect();
	for (int i = 0; i < lengthof(triggers); i++)
	{
		if (OidIsValid(get_trigger_oid(relid, triggers[i], true)) &&
			SPI_execute(psprintf("DROP TRIGGER %s ON %s", triggers[i], relname),
						false, 0) != SPI_OK_UTILITY)
			elog(ERROR, "dropping trigger %s failed", triggers[i]);
	}
	SPI_finish();
	outbox_note_attachment(ext, relid, false);
	outbox_snapshot_forget(ext, relid, NULL, 0);
	PG_RETURN_VOID();
}
