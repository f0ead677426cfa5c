/*-------------------------------------------------------------------------
 *
 * snapshot.h
 *		Snapshots on attach: the rows a captured table has, published as
 *		read events, in chunks that the worker takes between batches.
 *
 * src/capture/snapshot.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef OUTBOX_SNAPSHOT_H
#define OUTBOX_SNAPSHOT_H

#include "access/htup.h"
#include "utils/relcache.h"

#include "base/catalog.h"

/* what a chunk did */
typedef struct OutboxSnapshotChunk
{
	Oid			relid;			/* the table it was for; InvalidOid: none due */
	int64		rows;			/* rows read */
	bool		finished;		/* the last chunk of its snapshot */
} OutboxSnapshotChunk;

extern void outbox_snapshot_request(const OutboxExtension *ext, Relation rel,
									const char *format, const char *topic,
									char **args, int nargs, char **walk, int nwalk);
extern void outbox_snapshot_forget(const OutboxExtension *ext, Oid relid,
								   char **args, int nargs);
extern bool outbox_snapshot_start(const OutboxExtension *ext, OutboxSnapshotChunk *chunk);
extern bool outbox_snapshot_chunk(const OutboxExtension *ext, OutboxSnapshotChunk *chunk);
extern bool outbox_snapshot_unfinished(const OutboxExtension *ext);
extern void outbox_snapshot_failed(const OutboxExtension *ext, Oid relid, int sqlerrcode,
								   const char *error, int retry_ms);
extern bool outbox_snapshot_in_progress(const OutboxExtension *ext, Relation rel);
extern bool outbox_snapshot_ahead(const OutboxExtension *ext, Relation rel, HeapTuple row);

#endif							/* OUTBOX_SNAPSHOT_H */
