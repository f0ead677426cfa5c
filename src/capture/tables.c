/*-------------------------------------------------------------------------
 *
 * tables.c
 *		What the capture trigger knows of a table between its calls: its
 *		arguments parsed, the table as its events name it (names, key
 *		columns, identity, topic), and whether a snapshot of it may be in
 *		progress; kept per session, by trigger, until the table's relcache
 *		entry is invalidated.  A change of a row then looks up no catalog
 *		and parses nothing.  docs/design.md, "Capture", says why it is
 *		sound.
 *
 * src/capture/tables.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/transam.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "capture/capture.h"
#include "capture/snapshot.h"
#include "capture/tables.h"
#include "format/format.h"

/* the captured tables of this session, by trigger oid */
static HTAB *captured = NULL;

/* an entry was invalidated since the last look-up: sweep them */
static bool stale = false;

/* the table whose entry is being made, and whether it was invalidated meanwhile */
static Oid	making = InvalidOid;
static bool made_stale = false;

/*
 * A relcache invalidation of relid (InvalidOid: of every relation): its
 * entries are out of date.  They are only marked: a trigger that runs may
 * be using one (an invalidation is taken at any lock), and its memory goes
 * at the next look-up, with the transaction.
 */
static void
forget_table(Datum arg, Oid relid)
{
	HASH_SEQ_STATUS status;
	CapturedTable *entry;

	if (relid == InvalidOid || relid == making)
		made_stale = true;
	hash_seq_init(&status, captured);
	while ((entry = hash_seq_search(&status)) != NULL)
	{
		if (entry->valid && (relid == InvalidOid || entry->relid == relid))
		{
			entry->valid = false;
			stale = true;
		}
	}
}

/*
 * A schema renamed (no relcache invalidation of its tables) or dropped:
 * every entry is out of date, for its names.
 */
static void
forget_tables(Datum arg, int cacheid, uint32 hashvalue)
{
	forget_table(arg, InvalidOid);
}

/*
 * Drop the entries marked out of date, their memory given to the current
 * transaction (a caller further up may still use one).
 */
static void
sweep(void)
{
	HASH_SEQ_STATUS status;
	CapturedTable *entry;

	stale = false;
	hash_seq_init(&status, captured);
	while ((entry = hash_seq_search(&status)) != NULL)
	{
		if (entry->valid)
			continue;
		MemoryContextSetParent(entry->context, TopTransactionContext);
		(void) hash_search(captured, &entry->tgoid, HASH_REMOVE, NULL);
	}
}

/*
 * May the text of a value of type typid depend on search_path?  Of the
 * built-in types, the reg* types that name objects (qualified unless
 * visible), arrays and ranges of them; composite types (whose columns may
 * change) and the base types of extensions (whose output functions are
 * not ours) may.
 */
static bool
text_reads_search_path(Oid typid)
{
	Oid			elem;

	typid = getBaseType(typid);
	switch (typid)
	{
		case REGCLASSOID:
		case REGCOLLATIONOID:
		case REGCONFIGOID:
		case REGDICTIONARYOID:
		case REGOPERATOROID:
		case REGOPEROID:
		case REGPROCEDUREOID:
		case REGPROCOID:
		case REGTYPEOID:
			return true;
	}
	if (OidIsValid(elem = get_element_type(typid)))
		return text_reads_search_path(elem);
	switch (get_typtype(typid))
	{
		case TYPTYPE_ENUM:
			return false;
		case TYPTYPE_RANGE:
			return text_reads_search_path(get_range_subtype(typid));
		case TYPTYPE_MULTIRANGE:
			return text_reads_search_path(get_multirange_range(typid));
		case TYPTYPE_BASE:
			return typid >= FirstGenbkiObjectId;
		default:
			return true;
	}
}

/*
 * The table of the row trigger of trigdata (outbox_capture), made at its
 * first call since the table's last invalidation; the errors of its
 * arguments name the trigger.  The caller sets table.tupdesc to the
 * relation's, and may clear snapshots (see CapturedTable).
 */
CapturedTable *
outbox_captured_table(const OutboxExtension *ext, TriggerData *trigdata)
{
	Trigger    *trigger = trigdata->tg_trigger;
	Relation	rel = trigdata->tg_relation;
	CapturedTable *entry;
	CapturedTable *made;
	MemoryContext context;
	MemoryContext caller_context;
	ErrorContextCallback errcallback;
	char	  **args;
	bool		found;

	if (captured == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(Oid);
		ctl.entrysize = sizeof(CapturedTable);
		ctl.hcxt = CacheMemoryContext;
		captured = hash_create("outbox captured tables", 16, &ctl,
							   HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
		CacheRegisterRelcacheCallback(forget_table, (Datum) 0);
		CacheRegisterSyscacheCallback(NAMESPACEOID, forget_tables, (Datum) 0);
	}
	if (stale)
		sweep();
	entry = hash_search(captured, &trigger->tgoid, HASH_FIND, NULL);
	if (entry != NULL && entry->valid && entry->relid == RelationGetRelid(rel) &&
		entry->ext_schema == ext->schema && entry->ext_version == ext->version)
		return entry;

	/* made in a context of the call's until complete: an error frees it */
	context = AllocSetContextCreate(CurrentMemoryContext, "outbox captured table",
									ALLOCSET_SMALL_SIZES);
	caller_context = MemoryContextSwitchTo(context);
	args = palloc(Max(trigger->tgnargs, 1) * sizeof(char *));
	for (int i = 0; i < trigger->tgnargs; i++)
		args[i] = pstrdup(trigger->tgargs[i]);
	made = palloc0(sizeof(CapturedTable));
	making = RelationGetRelid(rel);
	made_stale = false;
	errcallback.callback = outbox_trigger_error_context;
	errcallback.arg = trigdata;
	errcallback.previous = error_context_stack;
	error_context_stack = &errcallback;
	outbox_capture_config(trigger->tgnargs, args, &made->config);
	error_context_stack = errcallback.previous;
	outbox_capture_table(&made->config, rel, RelationGetDescr(rel), &made->table);
	made->table.topic = outbox_format_capture_topic(&made->config, made->table.schema,
													made->table.table);
	made->snapshots = outbox_snapshot_in_progress(ext, rel);
	for (int i = 0; i < RelationGetDescr(rel)->natts; i++)
	{
		Form_pg_attribute attr = TupleDescAttr(RelationGetDescr(rel), i);

		if (!attr->attisdropped && text_reads_search_path(attr->atttypid))
			made->pin_search_path = true;
	}
	making = InvalidOid;
	MemoryContextSwitchTo(caller_context);

	made->tgoid = trigger->tgoid;
	made->relid = RelationGetRelid(rel);
	made->ext_schema = ext->schema;
	made->ext_version = ext->version;
	made->context = context;
	/* invalidated while it was made (an error above leaves making set: harmless) */
	made->valid = !made_stale;
	stale = stale || made_stale;

	/* complete: kept, in place of one out of date */
	entry = hash_search(captured, &trigger->tgoid, HASH_ENTER, &found);
	if (found)
		MemoryContextSetParent(entry->context, TopTransactionContext);
	*entry = *made;
	MemoryContextSetParent(context, CacheMemoryContext);
	return entry;
}
