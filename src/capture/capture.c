/*-------------------------------------------------------------------------
 *
 * capture.c
 *		Row changes as events: the events of one row's change, made by its
 *		format (src/format/format.h) and stored here, for the trigger (attach.c) and the snapshot's chunks
 *		(snapshot.c); and the triggers of the extension on a table, and
 *		the search_path under which they write a value's text.  The
 *		formats are in README.md (outbox_attach) and docs/debezium.md;
 *		docs/design.md, "Capture, the router and snapshots", says why.
 *
 * src/capture/capture.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "access/transam.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "base/catalog.h"
#include "capture/capture.h"
#include "format/format.h"
#include "queue/enqueue.h"

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
 * May the text of a value of type typid depend on search_path?  The
 * trigger functions run with their caller's (from 1.4), and pin it
 * (outbox_pin_search_path) while such a value's text is made.  Of the
 * built-in types, the reg* types that name objects (qualified unless
 * visible), arrays and ranges of them; composite types (whose columns may
 * change) and the base types of extensions (whose output functions are
 * not ours) may.
 */
bool
outbox_text_reads_search_path(Oid typid)
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
		return outbox_text_reads_search_path(elem);
	switch (get_typtype(typid))
	{
		case TYPTYPE_ENUM:
			return false;
		case TYPTYPE_RANGE:
			return outbox_text_reads_search_path(get_range_subtype(typid));
		case TYPTYPE_MULTIRANGE:
			return outbox_text_reads_search_path(get_multirange_range(typid));
		case TYPTYPE_BASE:
			return typid >= FirstGenbkiObjectId;
		default:
			return true;
	}
}

/*
 * Pin search_path to pg_catalog, pg_temp, as the trigger functions had it
 * before 1.4, so that a value's text is the same whatever the caller's;
 * at GUC nest level nestlevel, or a new one if it is -1.  Returns the
 * level, which the caller gives back with AtEOXact_GUC(true, level).
 */
int
outbox_pin_search_path(int nestlevel)
{
	if (nestlevel < 0)
		nestlevel = NewGUCNestLevel();
	(void) set_config_option("search_path", "pg_catalog, pg_temp", PGC_USERSET,
							 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	return nestlevel;
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

	if (ext->version < OUTBOX_VERSION(1, 3))
		return;
	values[0] = ObjectIdGetDatum(relid);
	values[1] = DirectFunctionCall1(namein, CStringGetDatum(GetUserNameFromId(GetUserId(), false)));
	SPI_connect();
	outbox_run_as_owner(ext, attached ? &attached_plan : &detached_plan, values, NULL, -1);
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
	List	   *drafts = outbox_format_change(ext, config, table, op, before, after,
											  snapshot);
	ListCell   *lc;

	foreach(lc, drafts)
	{
		OutboxDraft *draft = lfirst(lc);

		outbox_store_event(ext, draft->topic, draft->key, draft->payload, draft->headers,
						   (Datum) 0, true, NULL, draft->json);
	}
}
