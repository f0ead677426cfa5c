/*-------------------------------------------------------------------------
 *
 * shmem.c
 *		State shared between the launcher, the worker and the backends: where
 *		to find the worker's latch, what the worker is doing, and the owner
 *		that its first step found.
 *
 * The struct exists only when the library is in shared_preload_libraries;
 * elsewhere outbox_shared stays NULL.
 *
 * Locking: worker_latch and worker_database are single words written only
 * by the worker itself, so backends read them without a lock; setting a
 * latch that a dead worker left behind is harmless.  The counters are
 * atomics.  Everything else is protected by the spinlock.
 *
 * src/shmem.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/timestamp.h"

#include "outbox.h"

OutboxShared *outbox_shared = NULL;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

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
		pg_atomic_init_u64(&outbox_shared->published, 0);
		pg_atomic_init_u64(&outbox_shared->failed, 0);
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
	TimestampTz now = GetCurrentTimestamp();

	outbox_shared->worker_latch = NULL;
	outbox_shared->worker_database = InvalidOid;
	SpinLockAcquire(&outbox_shared->mutex);
	outbox_shared->worker_pid = 0;
	outbox_shared->state = OUTBOX_WORKER_STOPPED;
	outbox_shared->state_since = now;
	SpinLockRelease(&outbox_shared->mutex);
}

/*
 * Publish the calling worker's pid and database, and its latch if
 * publishes is true (so that commits wake it); undone when it exits.
 */
void
outbox_shmem_attach_worker(bool publishes)
{
	TimestampTz now = GetCurrentTimestamp();

	pg_atomic_write_u64(&outbox_shared->published, 0);
	pg_atomic_write_u64(&outbox_shared->failed, 0);
	SpinLockAcquire(&outbox_shared->mutex);
	outbox_shared->worker_pid = MyProcPid;
	outbox_shared->started_at = now;
	outbox_shared->last_batch_at = 0;
	outbox_shared->brokers_up = 0;
	SpinLockRelease(&outbox_shared->mutex);
	outbox_shared->worker_database = MyDatabaseId;
	if (publishes)
		outbox_shared->worker_latch = MyLatch;
	before_shmem_exit(outbox_shmem_detach_worker, (Datum) 0);
}

/*
 * Record what the worker is doing and why, if there is a reason to say:
 * error NULL clears the previous one when the state changes, and keeps it
 * otherwise.
 */
void
outbox_shmem_set_state(OutboxWorkerState state, const char *error)
{
	TimestampTz now = GetCurrentTimestamp();

	SpinLockAcquire(&outbox_shared->mutex);
	if (outbox_shared->state != state)
	{
		outbox_shared->state = state;
		outbox_shared->state_since = now;
		outbox_shared->last_error[0] = '\0';
	}
	if (error != NULL)
		strlcpy(outbox_shared->last_error, error, sizeof(outbox_shared->last_error));
	SpinLockRelease(&outbox_shared->mutex);
}

/*
 * Count a finished batch's deliveries and refusals.
 */
void
outbox_shmem_count_batch(int published, int failed)
{
	TimestampTz now = GetCurrentTimestamp();

	pg_atomic_fetch_add_u64(&outbox_shared->published, published);
	pg_atomic_fetch_add_u64(&outbox_shared->failed, failed);
	SpinLockAcquire(&outbox_shared->mutex);
	outbox_shared->last_batch_at = now;
	SpinLockRelease(&outbox_shared->mutex);
}

/*
 * Record how many brokers the producer is connected to.
 */
void
outbox_shmem_set_brokers_up(int brokers_up)
{
	SpinLockAcquire(&outbox_shared->mutex);
	outbox_shared->brokers_up = brokers_up;
	SpinLockRelease(&outbox_shared->mutex);
}

/*
 * Hand the owner of the extension from the worker's lookup step to the
 * launcher, which starts the publishing step as that role.  take_owner
 * returns it once, then InvalidOid.
 */
void
outbox_shmem_put_owner(Oid owner)
{
	SpinLockAcquire(&outbox_shared->mutex);
	outbox_shared->owner = owner;
	SpinLockRelease(&outbox_shared->mutex);
}

Oid
outbox_shmem_take_owner(void)
{
	Oid			owner;

	SpinLockAcquire(&outbox_shared->mutex);
	owner = outbox_shared->owner;
	outbox_shared->owner = InvalidOid;
	SpinLockRelease(&outbox_shared->mutex);
	return owner;
}
