/*-------------------------------------------------------------------------
 *
 * shmem.c
 *		State shared between the outbox worker and the backends: where to
 *		find the worker's latch, and what the worker is doing.
 *
 * The struct exists only when the library is in shared_preload_libraries;
 * elsewhere outbox_shared stays NULL and nobody is woken.
 *
 * Locking: worker_latch is a single pointer-sized word written only by the
 * worker itself, so backends read it without a lock; setting a latch that
 * a dead worker left behind is harmless.  Everything else is protected by
 * the spinlock.
 *
 * src/shmem.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/timestamp.h"

#include "outbox.h"

typedef struct OutboxShared
{
	Latch	   *volatile worker_latch;
	slock_t		mutex;
	pid_t		worker_pid;
	OutboxWorkerState state;
	TimestampTz state_since;
	char		last_error[256];
} OutboxShared;

static OutboxShared *outbox_shared = NULL;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

/* set by outbox_enqueue; acted on when the transaction commits */
static bool wake_at_commit = false;

static void
outbox_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(MAXALIGN(sizeof(OutboxShared)));
}

static void
outbox_shmem_startup(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	outbox_shared = ShmemInitStruct("outbox", sizeof(OutboxShared), &found);
	if (!found)
	{
		memset(outbox_shared, 0, sizeof(OutboxShared));
		SpinLockInit(&outbox_shared->mutex);
		outbox_shared->state = OUTBOX_WORKER_STOPPED;
	}
	LWLockRelease(AddinShmemInitLock);
}

/*
 * Install the shared memory hooks.  Called from _PG_init while
 * shared_preload_libraries is processed.
 */
void
outbox_shmem_install_hooks(void)
{
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = outbox_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = outbox_shmem_startup;
}

static void
outbox_shmem_detach_worker(int code, Datum arg)
{
	outbox_shared->worker_latch = NULL;
	SpinLockAcquire(&outbox_shared->mutex);
	outbox_shared->worker_pid = 0;
	outbox_shared->state = OUTBOX_WORKER_STOPPED;
	outbox_shared->state_since = GetCurrentTimestamp();
	SpinLockRelease(&outbox_shared->mutex);
}

/*
 * Publish the calling worker's latch and pid; undone when it exits.
 */
void
outbox_shmem_attach_worker(void)
{
	SpinLockAcquire(&outbox_shared->mutex);
	outbox_shared->worker_pid = MyProcPid;
	SpinLockRelease(&outbox_shared->mutex);
	outbox_shared->worker_latch = MyLatch;
	before_shmem_exit(outbox_shmem_detach_worker, (Datum) 0);
}

/*
 * Record what the worker is doing, and the last error if there is a new one
 * (NULL keeps the previous one).
 */
void
outbox_shmem_set_state(OutboxWorkerState state, const char *error)
{
	SpinLockAcquire(&outbox_shared->mutex);
	if (outbox_shared->state != state)
	{
		outbox_shared->state = state;
		outbox_shared->state_since = GetCurrentTimestamp();
	}
	if (error != NULL)
		strlcpy(outbox_shared->last_error, error, sizeof(outbox_shared->last_error));
	SpinLockRelease(&outbox_shared->mutex);
}

/*
 * Ask for the worker to be woken when the current transaction commits.
 */
void
outbox_wake_worker_at_commit(void)
{
	wake_at_commit = true;
}

/*
 * At commit the new rows are already visible to other snapshots, so the
 * worker finds them as soon as it runs.  No lock, no NOTIFY: one latch set.
 */
static void
outbox_xact_callback(XactEvent event, void *arg)
{
	Latch	   *latch;

	switch (event)
	{
		case XACT_EVENT_COMMIT:
			if (wake_at_commit && outbox_shared != NULL)
			{
				latch = outbox_shared->worker_latch;
				if (latch != NULL)
					SetLatch(latch);
			}
			wake_at_commit = false;
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PREPARE:
			/* a prepared transaction is found by the poll_interval timer */
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
