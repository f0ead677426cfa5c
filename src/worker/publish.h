/*-------------------------------------------------------------------------
 *
 * publish.h
 *		The batches of one of the worker's transactions.
 *
 * src/worker/publish.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef OUTBOX_PUBLISH_H
#define OUTBOX_PUBLISH_H

#include "base/catalog.h"
#include "base/event.h"
#include "launcher/launcher_internal.h"

/* how the worker says what it does, and why (NULL: no reason to say) */
typedef void (*OutboxSetState) (OutboxWorkerState state, const char *error);

extern void outbox_publish_init(OutboxWorkerSlot *slot, OutboxSetState set_state_fn);
extern long outbox_publish_run(const OutboxExtension *ext, bool *undo);
extern void outbox_publish_record(const OutboxExtension *ext, OutboxBatch *batch);
extern List *outbox_publish_forget(OutboxBatch **late);
extern void outbox_publish_count(OutboxBatch *batch);
extern bool outbox_publish_produced(void);
extern TimestampTz outbox_publish_idle_since(void);
extern bool outbox_publish_gathers(void);
extern void outbox_publish_note_undelivered(const OutboxExtension *ext);

#endif							/* OUTBOX_PUBLISH_H */
