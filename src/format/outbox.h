/*-------------------------------------------------------------------------
 *
 * outbox.h
 *		The outbox format: the extension's own envelope of a row's change.
 *
 * src/format/outbox.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef OUTBOX_OUTBOX_H
#define OUTBOX_OUTBOX_H

#include "access/htup.h"
#include "nodes/pg_list.h"

#include "format/change.h"

extern List *outbox_format_event(const CaptureConfig *config, const CaptureTable *table,
								 char op, HeapTuple before, HeapTuple after);

#endif							/* OUTBOX_OUTBOX_H */
