/*-------------------------------------------------------------------------
 *
 * trigger_cache.c
 *		What the row triggers of the extension (the capture, tables.c; the
 *		router, router.c) keep of a table between their calls: an entry
 *		per trigger, per session, made by the trigger's own function at
 *		its first call and dropped when the table's relcache entry is
 *		invalidated (any ALTER TABLE, CREATE OR REPLACE TRIGGER, and the
 *		rollback of either) or a schema is renamed.  docs/design.md,
 *		"Capture", says why that is sound.
 *
 * src/capture/trigger_cache.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "base/catalog.h"
#include "capture/trigger_cache.h"

/* what a trigger keeps of its table */
typedef struct TriggerEntry
{
	Oid			tgoid;			/* the trigger: the hash key */
	Oid			relid;
	Oid			ext_schema;		/* the extension it was made for */
	int			ext_version;
	OutboxTriggerMake make;		/* the trigger function's */
	MemoryContext context;		/* what kept points to */
	bool		valid;			/* false: invalidated, dropped at the next look-up */
	void	   *kept;			/* what make returned */
} TriggerEntry;

/* the entries of this session, by trigger oid */
static HTAB *entries = NULL;

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
	TriggerEntry *entry;

	if (relid == InvalidOid || relid == making)
		made_stale = true;
	hash_seq_init(&status, entries);
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
	TriggerEntry *entry;

	stale = false;
	hash_seq_init(&status, entries);
	while ((entry = hash_seq_search(&status)) != NULL)
	{
		if (entry->valid)
			continue;
		MemoryContextSetParent(entry->context, TopTransactionContext);
		(void) hash_search(entries, &entry->tgoid, HASH_REMOVE, NULL);
	}
}

/*
 * What the row trigger of trigdata keeps of its table, made by make at its
 * first call since the table's last invalidation (or the extension's
 * update).  It stays in memory until the end of the transaction at least:
 * the caller may use it for the whole call, but may not keep it beyond.
 */
void *
outbox_trigger_cache(const OutboxExtension *ext, TriggerData *trigdata, OutboxTriggerMake make)
{
	Trigger    *trigger = trigdata->tg_trigger;
	Oid			relid = RelationGetRelid(trigdata->tg_relation);
	TriggerEntry *entry;
	TriggerEntry made;
	MemoryContext caller_context;
	bool		found;

	if (entries == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(Oid);
		ctl.entrysize = sizeof(TriggerEntry);
		ctl.hcxt = CacheMemoryContext;
		entries = hash_create("outbox trigger entries", 16, &ctl,
							  HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
		outbox_on_relation_change(forget_table);
		CacheRegisterSyscacheCallback(NAMESPACEOID, forget_tables, (Datum) 0);
	}
	if (stale)
		sweep();
	entry = hash_search(entries, &trigger->tgoid, HASH_FIND, NULL);
	if (entry != NULL && entry->valid && entry->relid == relid && entry->make == make &&
		entry->ext_schema == ext->schema && entry->ext_version == ext->version)
		return entry->kept;

	/* made in a context of the call's until complete: an error frees it */
	made.context = AllocSetContextCreate(CurrentMemoryContext, "outbox trigger entry",
										 ALLOCSET_SMALL_SIZES);
	caller_context = MemoryContextSwitchTo(made.context);
	making = relid;
	made_stale = false;
	made.kept = make(ext, trigdata);
	making = InvalidOid;
	MemoryContextSwitchTo(caller_context);

	made.tgoid = trigger->tgoid;
	made.relid = relid;
	made.ext_schema = ext->schema;
	made.ext_version = ext->version;
	made.make = make;
	/* invalidated while it was made (an error above leaves making set: harmless) */
	made.valid = !made_stale;
	stale = stale || made_stale;

	/* complete: kept, in place of one out of date */
	entry = hash_search(entries, &trigger->tgoid, HASH_ENTER, &found);
	if (found)
		MemoryContextSetParent(entry->context, TopTransactionContext);
	*entry = made;
	MemoryContextSetParent(made.context, CacheMemoryContext);
	return made.kept;
}
