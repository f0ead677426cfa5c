/*-------------------------------------------------------------------------
 *
 * tables.c
 *		What the capture trigger knows of a table between its calls: its
 *		arguments parsed, the table as its events name it (names, key
 *		columns, identity, topic), and whether a snapshot of it may be in
 *		progress; kept per session, by trigger, until the table's relcache
 *		entry is invalidated (trigger_cache.c).  A change of a row then
 *		looks up no catalog and parses nothing.  docs/design.md, "Capture",
 *		says why it is sound.
 *
 * src/capture/tables.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "commands/trigger.h"
#include "utils/rel.h"

#include "capture/capture.h"
#include "capture/snapshot.h"
#include "capture/tables.h"
#include "capture/trigger_cache.h"
#include "format/format.h"

/*
 * Make the table of the row trigger of trigdata (outbox_capture), in the
 * current memory context; the errors of its arguments name the trigger.
 */
static void *
make_captured_table(const OutboxExtension *ext, TriggerData *trigdata)
{
	Trigger    *trigger = trigdata->tg_trigger;
	Relation	rel = trigdata->tg_relation;
	CapturedTable *made;
	ErrorContextCallback errcallback;
	char	  **args;

	args = palloc(Max(trigger->tgnargs, 1) * sizeof(char *));
	for (int i = 0; i < trigger->tgnargs; i++)
		args[i] = pstrdup(trigger->tgargs[i]);
	made = palloc0(sizeof(CapturedTable));
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

		if (!attr->attisdropped && outbox_text_reads_search_path(attr->atttypid))
			made->pin_search_path = true;
	}
	return made;
}

/*
 * The table of the row trigger of trigdata (outbox_capture), made at its
 * first call since the table's last invalidation (trigger_cache.c).  The
 * caller sets table.tupdesc to the relation's, and may clear snapshots
 * (see CapturedTable).
 */
CapturedTable *
outbox_captured_table(const OutboxExtension *ext, TriggerData *trigdata)
{
	return outbox_trigger_cache(ext, trigdata, make_captured_table);
}
