/*-------------------------------------------------------------------------
 *
 * retention.h
 *		Removing what is past its retention: the retry table row by row, the
 *		log a table at a time.
 *
 * src/queue/retention.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef OUTBOX_RETENTION_H
#define OUTBOX_RETENTION_H

#include "base/catalog.h"

extern int64 outbox_purge_expired(const OutboxExtension *ext, int batch_size);
extern int	outbox_rotate_log(const OutboxExtension *ext, double retention_s,
							  bool wait, int64 *removed);

#endif							/* OUTBOX_RETENTION_H */
