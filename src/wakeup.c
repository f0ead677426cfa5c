/*-------------------------------------------------------------------------
 *
 * wakeup.c
 *		Wake the worker when a transaction that enqueued events commits.
 *
 * At commit the new rows are already visible to other snapshots, so the
 * worker finds them as soon as it runs.  No lock, no NOTIFY: one latch set,
 * that of the worker of the committing database (shmem.c).
 *
 * src/wakeup.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "miscadmin.h"

#include "outbox.h"

/* set by outbox_enqueue; acted on when the transaction commits */
static bool wake_at_commit = false;

/*
 * Ask for the worker to be woken when the current transaction commits.
 */
void
outbox_wake_worker_at_commit(void)
{
	wake_at_commit = true;
}

static void
outbox_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_COMMIT:
			if (wake_at_commit && outbox_shared != NULL)
				outbox_shmem_wake_worker(MyDatabaseId);
			wake_at_commit = false;
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PREPARE:
			/* COMMIT PREPARED wakes the worker later (utility.c) */
			wake_at_commit = false;
			break;
		default:
			break;
	}
}

/*
 * Register the commit callback; called once per process from _PG_init.
 */
void
outbox_register_xact_callback(void)
{
	RegisterXactCallback(outbox_xact_callback, NULL);
}
