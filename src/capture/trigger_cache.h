/*-------------------------------------------------------------------------
 *
 * trigger_cache.h
 *		What a row trigger of the extension keeps of its table between its
 *		calls, per session, until the table's relcache entry is
 *		invalidated.
 *
 * src/capture/trigger_cache.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef OUTBOX_TRIGGER_CACHE_H
#define OUTBOX_TRIGGER_CACHE_H

#include "commands/trigger.h"

#include "base/catalog.h"

/*
 * Make what the trigger of trigdata keeps of its table, from its arguments
 * and the relation as it is now, palloc'd in the current memory context;
 * an error keeps nothing.  One function per trigger function.
 */
typedef void *(*OutboxTriggerMake) (const OutboxExtension *ext, TriggerData *trigdata);

extern void *outbox_trigger_cache(const OutboxExtension *ext, TriggerData *trigdata,
								  OutboxTriggerMake make);

#endif							/* OUTBOX_TRIGGER_CACHE_H */
