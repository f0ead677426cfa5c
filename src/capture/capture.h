/*-------------------------------------------------------------------------
 *
 * capture.h
 *		Row changes as events: the events of one row, which the capture
 *		trigger and the snapshot both store, and the triggers of the
 *		extension on a table.
 *
 * src/capture/capture.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef OUTBOX_CAPTURE_H
#define OUTBOX_CAPTURE_H

#include "access/htup.h"
#include "utils/relcache.h"

#include "base/catalog.h"
#include "format/change.h"

/* the names of the triggers that outbox_attach and outbox_attach_router create */
#define CAPTURE_TRIGGER "outbox_capture"
#define CAPTURE_TRUNCATE_TRIGGER "outbox_capture_truncate"
#define ROUTER_TRIGGER "outbox_router"

extern void outbox_capture_event(const OutboxExtension *ext, const CaptureConfig *config,
								 const CaptureTable *table, char op,
								 HeapTuple before, HeapTuple after,
								 const char *snapshot);
extern char **outbox_trigger_args(const OutboxExtension *ext, Relation rel,
								  const char *name, int *nargs);
extern bool outbox_has_trigger(const OutboxExtension *ext, Relation rel,
							   const char *name);
extern Relation outbox_open_to_attach(Oid relid);
extern void outbox_note_attachment(const OutboxExtension *ext, Oid relid, bool attached);
extern void outbox_trigger_error_context(void *arg);
extern bool outbox_text_reads_search_path(Oid typid);
extern int	outbox_pin_search_path(int nestlevel);

#endif							/* OUTBOX_CAPTURE_H */
