/*-------------------------------------------------------------------------
 *
 * shmem.c
 *		State shared between the outbox worker and the backends: where to
 *		find the worker's latch, and what the worker is doing
 *		(outbox_worker_status()).
 *
 * The struct exists only when the library is in shared_preload_libraries;
 * elsewhere outbox_shared stays NULL and nobody is woken.
 *
 * Locking: worker_latch and worker_database are single words written only
 * by the worker itself, so backends read them without a lock; setting a
 * latch that a dead worker left behind is harmless.  The counters are atomics.
 * Everything else is protected by the spinlock.
 *
 * src/shmem.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "outbox.h"

typedef struct OutboxShared
{
	Latch	   *volatile worker_latch;
	volatile Oid worker_database;	/* the database it publishes from */
	pg_atomic_uint64 published; /* since the worker started */
	pg_atomic_uint64 failed;
	slock_t		mutex;
	pid_t		worker_pid;
	OutboxWorkerState state;
	TimestampTz started_at;
	TimestampTz state_since;
	TimestampTz last_batch_at;
	int			brokers_up;
	char		last_error[256];
} OutboxShared;

/* outbox_worker_status() names of the states, in OutboxWorkerState order */
static const char *const state_names[] = {
	"stopped",
	"starting",
	"waiting for extension",
	"standby",
	"idle",
	"publishing",
	"broker unreachable",
	"backing off",
};

static OutboxShared *outbox_shared = NULL;

PG_FUNCTION_INFO_V1(outbox_worker_status);

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
	pg_atomic_write_u64(&outbox_shared->published, 0);
	pg_atomic_write_u64(&outbox_shared->failed, 0);
	SpinLockAcquire(&outbox_shared->mutex);
	outbox_shared->worker_pid = MyProcPid;
	outbox_shared->started_at = GetCurrentTimestamp();
	outbox_shared->last_batch_at = 0;
	outbox_shared->brokers_up = 0;
	outbox_shared->last_error[0] = '\0';
	SpinLockRelease(&outbox_shared->mutex);
	outbox_shared->worker_database = MyDatabaseId;
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
 * Count a finished batch's deliveries and refusals.
 */
void
outbox_shmem_count_batch(int published, int failed)
{
	pg_atomic_fetch_add_u64(&outbox_shared->published, published);
	pg_atomic_fetch_add_u64(&outbox_shared->failed, failed);
	SpinLockAcquire(&outbox_shared->mutex);
	outbox_shared->last_batch_at = GetCurrentTimestamp();
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
 * outbox_worker_status(): what the worker is doing, from shared memory
 * only, so that it answers however large or locked the table is.
 */
Datum
outbox_worker_status(PG_FUNCTION_ARGS)
{
	TupleDesc	tupdesc;
	Datum		values[9];
	bool		nulls[9] = {false};
	OutboxShared copy;

	if (outbox_shared == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("outbox worker status is not available"),
				 errhint("Add outbox to shared_preload_libraries and restart the server.")));
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");

	SpinLockAcquire(&outbox_shared->mutex);
	memcpy(&copy, outbox_shared, sizeof(copy));
	SpinLockRelease(&outbox_shared->mutex);

	/* the worker starts only once recovery has finished */
	if (copy.worker_pid == 0 && RecoveryInProgress())
		copy.state = OUTBOX_WORKER_STANDBY;

	values[0] = Int32GetDatum(copy.worker_pid);
	nulls[0] = copy.worker_pid == 0;
	values[1] = CStringGetTextDatum(state_names[copy.state]);
	values[2] = TimestampTzGetDatum(copy.state_since);
	nulls[2] = copy.state_since == 0;
	values[3] = TimestampTzGetDatum(copy.started_at);
	nulls[3] = copy.worker_pid == 0;
	values[4] = Int32GetDatum(copy.brokers_up);
	nulls[4] = copy.worker_pid == 0;
	values[5] = Int64GetDatum((int64) pg_atomic_read_u64(&outbox_shared->published));
	values[6] = Int64GetDatum((int64) pg_atomic_read_u64(&outbox_shared->failed));
	values[7] = TimestampTzGetDatum(copy.last_batch_at);
	nulls[7] = copy.last_batch_at == 0;
	values[8] = CStringGetTextDatum(copy.last_error);
	nulls[8] = copy.last_error[0] == '\0';

	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
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
			if (wake_at_commit && outbox_shared != NULL &&
				outbox_shared->worker_database == MyDatabaseId)
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
