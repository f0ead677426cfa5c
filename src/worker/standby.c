/*-------------------------------------------------------------------------
 *
 * standby.c
 *		Publish only what the standbys have: the outbox.standby_slots gate
 *		(README.md, high availability, says what it prevents).  A physical
 *		slot's restart_lsn, the flush position its standby last reported,
 *		is read from shared memory under the slot's spinlock.
 *
 * src/worker/standby.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "pgstat.h"
#include "nodes/pg_list.h"
#include "postmaster/interrupt.h"
#include "replication/slot.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "utils/builtins.h"
#include "utils/varlena.h"
#include "utils/wait_event.h"

#include "base/guc.h"
#include "worker/standby.h"

/* how often the slots are looked at while a standby lags */
#define STANDBY_POLL_MS 1

/*
 * The flush position confirmed by the standby of physical slot name.  A
 * slot that does not exist, or is not physical, is an error.
 */
static XLogRecPtr
slot_flush_lsn(const char *name)
{
	ReplicationSlot *slot;
	XLogRecPtr	flushed = InvalidXLogRecPtr;
	bool		logical = false;

	LWLockAcquire(ReplicationSlotControlLock, LW_SHARED);
	slot = SearchNamedReplicationSlot(name, false);
	if (slot != NULL)
	{
		SpinLockAcquire(&slot->mutex);
		logical = SlotIsLogical(slot);
		flushed = slot->data.restart_lsn;
		SpinLockRelease(&slot->mutex);
	}
	LWLockRelease(ReplicationSlotControlLock);

	if (slot == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("replication slot \"%s\" named in outbox.standby_slots does not exist", name),
				 errhint("Create the standby's physical slot, or remove it from outbox.standby_slots.")));
	if (logical)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("replication slot \"%s\" named in outbox.standby_slots is not a physical slot", name)));
	return flushed;
}

/*
 * The first slot of outbox.standby_slots whose standby has not flushed WAL
 * up to target, or NULL if none lags; *flushed gets its position.
 */
static char *
lagging_slot(XLogRecPtr target, XLogRecPtr *flushed)
{
	char	   *names = pstrdup(outbox_standby_slots);
	List	   *slots;
	ListCell   *lc;

	if (!SplitGUCList(names, ',', &slots))
		elog(ERROR, "outbox.standby_slots is not a list of names");
	foreach(lc, slots)
	{
		char	   *name = (char *) lfirst(lc);

		*flushed = slot_flush_lsn(name);
		if (*flushed == InvalidXLogRecPtr || *flushed < target)
			return name;
	}
	return NULL;
}

/*
 * Wait, for at most max_ms, until the standbys of outbox.standby_slots have
 * flushed WAL up to target.  Returns false if they have not, with *reason
 * saying which slot lags and how far: the caller publishes nothing.
 */
bool
outbox_standbys_have(XLogRecPtr target, long max_ms, char **reason)
{
	XLogRecPtr	flushed;
	char	   *slot;

	if (outbox_standby_slots[0] == '\0')
		return true;

	for (long waited = 0; (slot = lagging_slot(target, &flushed)) != NULL; waited += STANDBY_POLL_MS)
	{
		if (waited >= max_ms || ShutdownRequestPending)
		{
			*reason = flushed == InvalidXLogRecPtr ?
				psprintf("waiting for replication slot \"%s\": its standby has never connected", slot) :
				psprintf("waiting for replication slot \"%s\": %s behind",
						 slot, text_to_cstring(DatumGetTextPP(DirectFunctionCall1(pg_size_pretty,
																				  Int64GetDatum(target - flushed)))));
			return false;
		}
		/* said while it waits, not only once it gives up */
		if (waited == 0)
			pgstat_report_activity(STATE_RUNNING,
								   psprintf("waiting for replication slot \"%s\"", slot));
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 STANDBY_POLL_MS, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
	return true;
}
