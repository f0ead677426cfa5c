/*-------------------------------------------------------------------------
 *
 * shmem.c
 *		State shared between the launcher, the workers and the backends: one
 *		slot per database that is served or waits to be, and the requests
 *		that backends leave for the launcher and the workers.
 *
 * The launcher assigns a slot to a database and frees it (in_use,
 * database, dbname); the worker started for the slot fills in the rest.
 * There are outbox.max_workers slots for publishing workers and
 * WAITING_SLOTS more, so that databases waiting for a worker show in
 * outbox_worker_status() too.
 *
 * The struct exists only when the library is in shared_preload_libraries;
 * elsewhere outbox_shared stays NULL.
 *
 * Locking: a slot's database and latch are single words that committing
 * backends read without a lock (wakeup.c); setting a latch that a gone
 * worker left behind is harmless.  The counters are atomics.  Everything
 * else is protected by the spinlock.
 *
 * src/shmem.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <signal.h>

#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "outbox.h"

/* slots beyond outbox.max_workers, for databases waiting for a worker */
#define WAITING_SLOTS 32

OutboxShared *outbox_shared = NULL;

/* the slot of this worker process, NULL elsewhere */
static OutboxWorkerSlot *my_slot = NULL;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

static Size
outbox_shmem_size(void)
{
	return add_size(offsetof(OutboxShared, slots),
					mul_size(outbox_max_workers + WAITING_SLOTS,
							 sizeof(OutboxWorkerSlot)));
}

static void
outbox_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(MAXALIGN(outbox_shmem_size()));
}

static void
outbox_shmem_startup(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	outbox_shared = ShmemInitStruct("outbox", outbox_shmem_size(), &found);
	if (!found)
	{
		memset(outbox_shared, 0, outbox_shmem_size());
		SpinLockInit(&outbox_shared->mutex);
		outbox_shared->nslots = outbox_max_workers + WAITING_SLOTS;
		for (int i = 0; i < outbox_shared->nslots; i++)
		{
			pg_atomic_init_u64(&outbox_shared->slots[i].published, 0);
			pg_atomic_init_u64(&outbox_shared->slots[i].failed, 0);
			pg_atomic_init_u32(&outbox_shared->slots[i].current_log, 0);
		}
	}
	LWLockRelease(AddinShmemInitLock);
}

/*
 * Install the shared memory hooks.  Called from _PG_init while
 * shared_preload_libraries is processed, after the settings are defined.
 */
void
outbox_shmem_install_hooks(void)
{
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = outbox_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = outbox_shmem_startup;
}

/*
 * Record a slot's state and why, if there is a reason to say: error NULL
 * clears the previous one when the state changes, and keeps it otherwise.
 */
static void
set_slot_state(OutboxWorkerSlot *slot, OutboxWorkerState state,
			   const char *error)
{
	TimestampTz now = GetCurrentTimestamp();

	SpinLockAcquire(&outbox_shared->mutex);
	if (slot->state != state)
	{
		slot->state = state;
		slot->state_since = now;
		slot->last_error[0] = '\0';
	}
	if (error != NULL)
		strlcpy(slot->last_error, error, sizeof(slot->last_error));
	SpinLockRelease(&outbox_shared->mutex);
}

/*
 * Launcher: take a free slot for database dboid (InvalidOid while it does
 * not exist) called dbname.  Returns its number, or -1 if none is free.
 */
int
outbox_shmem_claim_slot(Oid dboid, const char *dbname)
{
	int			slotno = -1;

	SpinLockAcquire(&outbox_shared->mutex);
	for (int i = 0; i < outbox_shared->nslots; i++)
	{
		OutboxWorkerSlot *slot = &outbox_shared->slots[i];

		if (slot->in_use)
			continue;
		slot->in_use = true;
		slot->database = dboid;
		namestrcpy(&slot->dbname, dbname);
		slot->pid = 0;
		slot->state = OUTBOX_WORKER_STOPPED;
		slot->state_since = 0;
		slot->last_error[0] = '\0';
		slot->lookup = OUTBOX_LOOKUP_NONE;
		slot->owner = InvalidOid;
		slot->restart_requested = false;
		slotno = i;
		break;
	}
	SpinLockRelease(&outbox_shared->mutex);
	return slotno;
}

/*
 * Launcher: free a slot whose worker has exited.
 */
void
outbox_shmem_release_slot(int slotno)
{
	SpinLockAcquire(&outbox_shared->mutex);
	outbox_shared->slots[slotno].in_use = false;
	outbox_shared->slots[slotno].database = InvalidOid;
	SpinLockRelease(&outbox_shared->mutex);
}

/*
 * Launcher: say why slot slotno has no worker running.
 */
void
outbox_shmem_report_waiting(int slotno, OutboxWorkerState state,
							const char *error)
{
	set_slot_state(&outbox_shared->slots[slotno], state, error);
}

/*
 * Launcher: what the owner lookup of slot slotno found, and the owner if
 * it found one.  Returns the verdict once, then OUTBOX_LOOKUP_NONE.
 */
OutboxLookup
outbox_shmem_take_lookup(int slotno, Oid *owner)
{
	OutboxWorkerSlot *slot = &outbox_shared->slots[slotno];
	OutboxLookup lookup;

	SpinLockAcquire(&outbox_shared->mutex);
	lookup = slot->lookup;
	*owner = slot->owner;
	slot->lookup = OUTBOX_LOOKUP_NONE;
	SpinLockRelease(&outbox_shared->mutex);
	return lookup;
}

/*
 * Launcher: the databases in which CREATE EXTENSION outbox has committed
 * since the last call, at most max of them; *overflow is set if more
 * were dropped for lack of room (look at every database again).
 */
int
outbox_shmem_take_created(Oid *databases, int max, bool *overflow)
{
	int			n;

	SpinLockAcquire(&outbox_shared->mutex);
	n = Min(outbox_shared->ncreated, max);
	memcpy(databases, outbox_shared->created, n * sizeof(Oid));
	*overflow = outbox_shared->created_overflow || outbox_shared->ncreated > max;
	outbox_shared->ncreated = 0;
	outbox_shared->created_overflow = false;
	SpinLockRelease(&outbox_shared->mutex);
	return n;
}

static void
detach_worker(int code, Datum arg)
{
	bool		publishes = DatumGetBool(arg);

	my_slot->latch = NULL;
	SpinLockAcquire(&outbox_shared->mutex);
	my_slot->pid = 0;
	SpinLockRelease(&outbox_shared->mutex);
	/* an owner lookup leaves its verdict for the launcher to show */
	if (publishes)
		set_slot_state(my_slot, OUTBOX_WORKER_STOPPED, NULL);
}

/*
 * Worker: publish the calling worker's pid in slot slotno, and its latch
 * if publishes is true (so that commits wake it); undone when it exits.
 */
void
outbox_shmem_attach_worker(int slotno, bool publishes)
{
	TimestampTz now = GetCurrentTimestamp();

	my_slot = &outbox_shared->slots[slotno];
	pg_atomic_write_u64(&my_slot->published, 0);
	pg_atomic_write_u64(&my_slot->failed, 0);
	SpinLockAcquire(&outbox_shared->mutex);
	my_slot->pid = MyProcPid;
	my_slot->started_at = now;
	my_slot->last_batch_at = 0;
	my_slot->brokers_up = 0;
	my_slot->restart_requested = false;
	SpinLockRelease(&outbox_shared->mutex);
	if (publishes)
		my_slot->latch = MyLatch;
	before_shmem_exit(detach_worker, BoolGetDatum(publishes));
	set_slot_state(my_slot, OUTBOX_WORKER_STARTING, NULL);
}

/*
 * Worker: record what it is doing (see set_slot_state).
 */
void
outbox_shmem_set_state(OutboxWorkerState state, const char *error)
{
	set_slot_state(my_slot, state, error);
}

/*
 * Worker: count a finished batch's deliveries and refusals.
 */
void
outbox_shmem_count_batch(int published, int failed)
{
	TimestampTz now = GetCurrentTimestamp();

	pg_atomic_fetch_add_u64(&my_slot->published, published);
	pg_atomic_fetch_add_u64(&my_slot->failed, failed);
	SpinLockAcquire(&outbox_shared->mutex);
	my_slot->last_batch_at = now;
	SpinLockRelease(&outbox_shared->mutex);
}

/*
 * Worker: record how many brokers the producer is connected to.
 */
void
outbox_shmem_set_brokers_up(int brokers_up)
{
	SpinLockAcquire(&outbox_shared->mutex);
	my_slot->brokers_up = brokers_up;
	SpinLockRelease(&outbox_shared->mutex);
}

/*
 * Worker, owner lookup: hand what it found to the launcher, which starts
 * the publishing worker as owner.
 */
void
outbox_shmem_put_lookup(OutboxLookup lookup, Oid owner)
{
	SpinLockAcquire(&outbox_shared->mutex);
	my_slot->lookup = lookup;
	my_slot->owner = owner;
	SpinLockRelease(&outbox_shared->mutex);
}

/*
 * Worker: has a backend asked it to start again, with the settings or
 * the extension as they are now?
 */
bool
outbox_shmem_restart_requested(void)
{
	bool		requested;

	SpinLockAcquire(&outbox_shared->mutex);
	requested = my_slot->restart_requested;
	SpinLockRelease(&outbox_shared->mutex);
	return requested;
}

/*
 * Backend: wake the worker of database dboid, if it has one.  No lock: a
 * slot's database and latch are read as single words.
 */
void
outbox_shmem_wake_worker(Oid dboid)
{
	for (int i = 0; i < outbox_shared->nslots; i++)
	{
		OutboxWorkerSlot *slot = &outbox_shared->slots[i];
		Latch	   *latch;

		if (slot->database != dboid)
			continue;
		latch = slot->latch;
		if (latch != NULL)
			SetLatch(latch);
		break;
	}
}

/*
 * Worker: tell the backends of its database which log table to write to.
 */
void
outbox_shmem_set_current_log(int current_log)
{
	pg_atomic_write_u32(&my_slot->current_log, current_log);
}

/*
 * Backend: the log table to write to in database dboid, as its worker
 * said; 0 if it has none.  A hint: every log table is read.
 */
int
outbox_shmem_current_log(Oid dboid)
{
	if (outbox_shared == NULL)
		return 0;
	for (int i = 0; i < outbox_shared->nslots; i++)
	{
		OutboxWorkerSlot *slot = &outbox_shared->slots[i];

		if (slot->database == dboid)
			return pg_atomic_read_u32(&slot->current_log) % OUTBOX_LOG_TABLES;
	}
	return 0;
}

/*
 * Backend: ask the worker of database dboid (of every database if dboid
 * is InvalidOid) to exit after its batch in flight, so that the launcher
 * starts it again as things now are; with terminate, at once (SIGTERM),
 * and the launcher starts no worker there for a while (DROP DATABASE).
 */
void
outbox_shmem_restart_workers(Oid dboid, bool terminate)
{
	pid_t		pids[64];
	int			npids = 0;
	Latch	   *latches[64];
	int			nlatches = 0;

	SpinLockAcquire(&outbox_shared->mutex);
	if (terminate)
	{
		outbox_shared->dropping_database = dboid;
		outbox_shared->dropping_since = GetCurrentTimestamp();
	}
	for (int i = 0; i < outbox_shared->nslots; i++)
	{
		OutboxWorkerSlot *slot = &outbox_shared->slots[i];

		if (!slot->in_use || (OidIsValid(dboid) && slot->database != dboid))
			continue;
		slot->restart_requested = true;
		if (terminate && slot->pid != 0 && npids < lengthof(pids))
			pids[npids++] = slot->pid;
		if (slot->latch != NULL && nlatches < lengthof(latches))
			latches[nlatches++] = slot->latch;
	}
	SpinLockRelease(&outbox_shared->mutex);

	for (int i = 0; i < npids; i++)
		(void) kill(pids[i], SIGTERM);
	for (int i = 0; i < nlatches; i++)
		SetLatch(latches[i]);
}

/*
 * Backend: tell the launcher that CREATE EXTENSION outbox committed in
 * database dboid.
 */
void
outbox_shmem_extension_created(Oid dboid)
{
	Latch	   *latch;

	SpinLockAcquire(&outbox_shared->mutex);
	if (outbox_shared->ncreated < lengthof(outbox_shared->created))
		outbox_shared->created[outbox_shared->ncreated++] = dboid;
	else
		outbox_shared->created_overflow = true;
	latch = outbox_shared->launcher_latch;
	SpinLockRelease(&outbox_shared->mutex);
	if (latch != NULL)
		SetLatch(latch);
}

/*
 * Launcher: make the calling process the launcher that backends wake.  A
 * launcher that starts again (after an error) does not know the workers
 * its predecessor started: it stops them, waits up to 10 s for them to
 * leave their slots, and starts from empty slots.
 */
void
outbox_shmem_attach_launcher(void)
{
	SpinLockAcquire(&outbox_shared->mutex);
	outbox_shared->launcher_latch = MyLatch;
	SpinLockRelease(&outbox_shared->mutex);

	for (int waited = 0; waited < 100; waited++)
	{
		pid_t		pids[64];
		int			npids = 0;

		SpinLockAcquire(&outbox_shared->mutex);
		for (int i = 0; i < outbox_shared->nslots && npids < lengthof(pids); i++)
		{
			if (outbox_shared->slots[i].pid != 0)
				pids[npids++] = outbox_shared->slots[i].pid;
		}
		SpinLockRelease(&outbox_shared->mutex);
		if (npids == 0)
			break;
		for (int i = 0; i < npids; i++)
			(void) kill(pids[i], SIGTERM);
		pg_usleep(100 * 1000L);
	}

	SpinLockAcquire(&outbox_shared->mutex);
	for (int i = 0; i < outbox_shared->nslots; i++)
	{
		outbox_shared->slots[i].in_use = false;
		outbox_shared->slots[i].database = InvalidOid;
	}
	SpinLockRelease(&outbox_shared->mutex);
}
