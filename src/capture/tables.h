/*-------------------------------------------------------------------------
 *
 * tables.h
 *		What the capture trigger knows of a table between its calls, kept
 *		per session until the table's relcache entry is invalidated
 *		(trigger_cache.h).
 *
 * src/capture/tables.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef OUTBOX_TABLES_H
#define OUTBOX_TABLES_H

#include "commands/trigger.h"

#include "base/catalog.h"
#include "format/change.h"

/* a captured table, as its trigger's calls see it (trigger_cache.c) */
typedef struct CapturedTable
{
	CaptureConfig config;		/* the trigger's arguments */
	CaptureTable table;			/* table.tupdesc: set at each call */
	bool		pin_search_path;	/* the text of a column may depend on it */

	/*
	 * A snapshot of the table (or of a partitioned table it is in) may be in
	 * progress.  False is kept until the table's relcache entry is
	 * invalidated, which a snapshot request does (outbox_attach) and which a
	 * writer takes when it locks the table; true is cleared by the caller
	 * once none is (nothing can request one before the writer's transaction
	 * ends: the request waits for the writer's lock).
	 */
	bool		snapshots;
} CapturedTable;

extern CapturedTable *outbox_captured_table(const OutboxExtension *ext, TriggerData *trigdata);

#endif							/* OUTBOX_TABLES_H */
