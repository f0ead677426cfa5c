/*-------------------------------------------------------------------------
 *
 * reader.c
 *		outbox_in_progress(): the transactions that may still hold events
 *		that the claim's snapshot cannot see.
 *
 * The claim reads the log in id order past the highest id it has read.
 * outbox_enqueue takes its transaction's xid before the event's id, so an
 * event with a smaller id that the claim could not see belongs to a
 * transaction that had its xid when the snapshot was taken and had not
 * ended: one in the snapshot's xip, or one at or past its xmax (which xip
 * leaves out) whose xid was assigned before the snapshot.  All of those
 * are below the next xid read after the snapshot.  Prepared transactions
 * are in xip until COMMIT PREPARED.
 *
 * src/reader.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/transam.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/xid8.h"

#include "outbox.h"

PG_FUNCTION_INFO_V1(outbox_in_progress);

/*
 * The full xid of xid, which is not older than 2^31 xids before next.
 */
static FullTransactionId
widen_xid(FullTransactionId next, TransactionId xid)
{
	uint64		epoch = EpochFromFullTransactionId(next);

	if (xid > XidFromFullTransactionId(next))
		epoch--;
	return FullTransactionIdFromEpochAndXid(epoch, xid);
}

/*
 * outbox_in_progress() RETURNS xid8[]
 *
 * The transactions in progress in the active snapshot: those of its xip,
 * and every xid from its xmax up to the next xid now; not the caller's own,
 * whose events the snapshot sees.
 */
Datum
outbox_in_progress(PG_FUNCTION_ARGS)
{
	Snapshot	snapshot = GetActiveSnapshot();
	FullTransactionId next = ReadNextFullTransactionId();
	FullTransactionId xmax;
	FullTransactionId mine = GetTopFullTransactionIdIfAny();
	uint64		nrange;
	Datum	   *xids;
	int			n = 0;

	if (snapshot == NULL)
		elog(ERROR, "outbox_in_progress() needs an active snapshot");
	xmax = widen_xid(next, snapshot->xmax);
	nrange = U64FromFullTransactionId(next) - U64FromFullTransactionId(xmax);
	if (nrange > MaxArraySize - snapshot->xcnt)
		elog(ERROR, "too many transactions in progress");

	xids = palloc((snapshot->xcnt + nrange + 1) * sizeof(Datum));
	for (int i = 0; i < snapshot->xcnt; i++)
		xids[n++] = FullTransactionIdGetDatum(widen_xid(next, snapshot->xip[i]));
	for (uint64 x = U64FromFullTransactionId(xmax);
		 x < U64FromFullTransactionId(next); x++)
		if (x != U64FromFullTransactionId(mine))
			xids[n++] = FullTransactionIdGetDatum(FullTransactionIdFromU64(x));

	PG_RETURN_ARRAYTYPE_P(construct_array(xids, n, XID8OID, sizeof(FullTransactionId),
										  FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
}
