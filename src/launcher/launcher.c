/*-------------------------------------------------------------------------
 *
 * launcher.c
 *		The outbox launcher: starts, for every database of outbox.databases
 *		that has the extension, the owner lookup, then a publishing worker
 *		as the extension's owner; starts it again, and stops it when the
 *		database goes; serves the databases in turn while they outnumber the
 *		workers.  And the shared memory it owns (the slots, the requests of
 *		backends, the restores and drops under way), with the flags a
 *		transaction sets for it at commit.  docs/design.md, "Processes and
 *		shared memory", says why.
 *
 * src/launcher/launcher.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <signal.h>

#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/tableam.h"
#include "access/transam.h"
#include "access/xact.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_database.h"
#include "commands/dbcommands.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "replication/logicallauncher.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/procarray.h"
#include "storage/shmem.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"
#include "utils/varlena.h"

#include "base/catalog.h"
#include "base/event.h"
#include "base/guc.h"
#include "launcher/launcher.h"
#include "launcher/launcher_internal.h"

/* how often pg_database is read for databases created or dropped */
#define DATABASE_CHECK_MS 5000
/* pause before a worker that exited is started again */
#define RESTART_DELAY_MS 1000
/* pause before the owner is looked up again, while it cannot log in */
#define LOOKUP_RETRY_MS 5000
/* how long a database that DROP DATABASE works on gets no worker */
#define DROP_HOLD_MS 10000
/*
 * How long a publishing worker keeps its slot while another database waits
 * for one, at least: then it gives it after its turn (outbox_time_slice).
 */
#define TIME_SLICE_MS 5000
/*
 * How long a worker asked to give its slot has to do so (it finishes its
 * turn first) before another is asked for the same waiting database: one
 * that waits on a cluster that hangs may not give it for a long while.
 */
#define GIVE_GRACE_MS 2000
/* slots beyond outbox.max_workers, for databases waiting or parked */
#define WAITING_SLOTS 256
/* requests to look at a database again, restores under way, drops */
#define MAX_LOOK_AGAIN 16
#define MAX_RESTORES 16
#define MAX_DROPS 8

struct OutboxShared
{
	slock_t		mutex;
	Latch	   *launcher_latch;
	Oid			look_again[MAX_LOOK_AGAIN]; /* CREATE EXTENSION, settings */
	int			nlook_again;
	bool		look_again_overflow;	/* and more: look at all of them */
	struct
	{
		Oid			database;
		TimestampTz since;
	}			dropping[MAX_DROPS];	/* DROP DATABASE under way */
	struct
	{
		Oid			database;
		pid_t		pid;
		TransactionId xid;		/* its transaction that wrote it */
	}			restoring[MAX_RESTORES];	/* backends writing the log */
	int			waiting;		/* databases due that wait for a worker */
	pg_atomic_uint32 slots_moved;	/* bumped when a slot's database changes */
	int			nslots;
	OutboxWorkerSlot slots[FLEXIBLE_ARRAY_MEMBER];
};

OutboxShared *outbox_shared = NULL;

/*
 * What the current transaction asked of the launcher for its database, done
 * at commit: wake its worker; say that it holds no event that is not
 * delivered, once backends had said undelivered_changes times that some
 * may be.  And whether it restored events, which a slot the database did
 * not have yet could not be told (outbox_launcher_extension_born).
 */
static bool wake_at_commit = false;
static bool none_undelivered = false;
static uint64 undelivered_changes = 0;
static bool restored_here = false;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

static Size
shared_size(void)
{
	return add_size(offsetof(OutboxShared, slots),
					mul_size(outbox_max_workers + WAITING_SLOTS,
							 sizeof(OutboxWorkerSlot)));
}

static void
shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(MAXALIGN(shared_size()));
}

static void
shmem_startup(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	outbox_shared = ShmemInitStruct("outbox", shared_size(), &found);
	if (!found)
	{
		memset(outbox_shared, 0, shared_size());
		SpinLockInit(&outbox_shared->mutex);
		pg_atomic_init_u32(&outbox_shared->slots_moved, 0);
		outbox_shared->nslots = outbox_max_workers + WAITING_SLOTS;
		for (int i = 0; i < outbox_shared->nslots; i++)
		{
			pg_atomic_init_u64(&outbox_shared->slots[i].published, 0);
			pg_atomic_init_u64(&outbox_shared->slots[i].failed, 0);
			pg_atomic_init_u32(&outbox_shared->slots[i].current_log, 0);
			pg_atomic_init_u64(&outbox_shared->slots[i].undelivered, 0);
		}
	}
	LWLockRelease(AddinShmemInitLock);
}

/*
 * Reserve the shared memory.  Called from _PG_init while
 * shared_preload_libraries is processed, after the settings are defined.
 */
void
outbox_launcher_shmem_init(void)
{
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = shmem_startup;
}

bool
outbox_launcher_exists(void)
{
	return outbox_shared != NULL;
}

int
outbox_slot_count(void)
{
	return outbox_shared->nslots;
}

OutboxWorkerSlot *
outbox_slot(int slotno)
{
	return &outbox_shared->slots[slotno];
}

void
outbox_slot_lock(void)
{
	SpinLockAcquire(&outbox_shared->mutex);
}

void
outbox_slot_unlock(void)
{
	SpinLockRelease(&outbox_shared->mutex);
}

/*
 * The slot of database dboid, if a backend took one for it (see
 * outbox_launcher_extension_born), else a free slot, made the database's
 * at now, its worker to start: what its events are is unknown until a
 * worker looks, or a backend says.  Returns its number, or -1 if none is
 * free.  The caller holds the lock.
 */
static int
take_slot(Oid dboid, const char *dbname, TimestampTz now)
{
	int			slotno = -1;
	OutboxWorkerSlot *slot;

	for (int i = 0; OidIsValid(dboid) && i < outbox_shared->nslots; i++)
		if (outbox_shared->slots[i].in_use && outbox_shared->slots[i].database == dboid)
			return i;
	for (int i = 0; i < outbox_shared->nslots && slotno < 0; i++)
		if (!outbox_shared->slots[i].in_use)
			slotno = i;
	if (slotno < 0)
		return -1;
	slot = &outbox_shared->slots[slotno];
	slot->in_use = true;
	slot->database = dboid;
	namestrcpy(&slot->dbname, dbname);
	slot->pid = 0;
	slot->role = InvalidOid;
	slot->state = OUTBOX_WORKER_STARTING;
	slot->state_since = now;
	slot->last_error[0] = '\0';
	slot->lookup = OUTBOX_LOOKUP_NONE;
	slot->owner = InvalidOid;
	slot->give_to.data[0] = '\0';
	slot->restart_requested = false;
	pg_atomic_write_u64(&slot->undelivered, OUTBOX_UNDELIVERED_UNKNOWN);
	(void) pg_atomic_fetch_add_u32(&outbox_shared->slots_moved, 1);
	return slotno;
}

/*
 * The slot for database dboid (InvalidOid while it does not exist) called
 * dbname: see take_slot.  Returns its number, or -1 if none is free.
 */
static int
claim_slot(Oid dboid, const char *dbname)
{
	TimestampTz now = GetCurrentTimestamp();
	int			slotno;

	SpinLockAcquire(&outbox_shared->mutex);
	slotno = take_slot(dboid, dbname, now);
	SpinLockRelease(&outbox_shared->mutex);
	return slotno;
}

/*
 * Free a slot whose worker has exited.
 */
static void
free_slot(int slotno)
{
	SpinLockAcquire(&outbox_shared->mutex);
	outbox_shared->slots[slotno].in_use = false;
	outbox_shared->slots[slotno].database = InvalidOid;
	(void) pg_atomic_fetch_add_u32(&outbox_shared->slots_moved, 1);
	SpinLockRelease(&outbox_shared->mutex);
}

/*
 * Say in slot slotno why its database has no worker running.
 */
static void
report_slot(int slotno, OutboxWorkerState state, const char *error)
{
	OutboxWorkerSlot *slot = &outbox_shared->slots[slotno];

	SpinLockAcquire(&outbox_shared->mutex);
	if (slot->state != state)
	{
		slot->state = state;
		slot->state_since = GetCurrentTimestamp();
		slot->last_error[0] = '\0';
	}
	if (error != NULL)
		strlcpy(slot->last_error, error, sizeof(slot->last_error));
	SpinLockRelease(&outbox_shared->mutex);
}

/*
 * Show state and error in the slot of an owner lookup, as its worker
 * shows what it does.
 */
static void
set_lookup_state(OutboxWorkerSlot *slot, OutboxWorkerState state, const char *error)
{
	outbox_slot_lock();
	if (slot->state != state)
	{
		slot->state = state;
		slot->state_since = GetCurrentTimestamp();
	}
	strlcpy(slot->last_error, error, sizeof(slot->last_error));
	outbox_slot_unlock();
}

/*
 * The owner lookup, the first step of serving a database (docs/design.md,
 * "Processes and shared memory"), in the process started for slot: find
 * whether the extension exists in this database, whether the database
 * wants it served, and whether its owner may log in; leave the verdict in
 * slot for the launcher.  Connected as the bootstrap superuser, this reads
 * the catalogs and runs nothing else.
 */
void
outbox_look_up_owner(OutboxWorkerSlot *slot)
{
	OutboxExtension ext;
	OutboxLookup lookup = OUTBOX_LOOKUP_NO_EXTENSION;

	StartTransactionCommand();
	if (outbox_extension_find(&ext))
	{
		HeapTuple	roletup = SearchSysCache1(AUTHOID, ObjectIdGetDatum(ext.owner));

		lookup = OUTBOX_LOOKUP_FOUND;
		if (!outbox_enabled)
		{
			set_lookup_state(slot, OUTBOX_WORKER_DISABLED, "outbox.enabled is off for this database");
			lookup = OUTBOX_LOOKUP_DISABLED;
		}
		else if (HeapTupleIsValid(roletup) && !((Form_pg_authid) GETSTRUCT(roletup))->rolcanlogin)
		{
			set_lookup_state(slot, OUTBOX_WORKER_WAITING_FOR_EXTENSION,
							 psprintf("role \"%s\", which owns the extension, cannot log in",
									  NameStr(((Form_pg_authid) GETSTRUCT(roletup))->rolname)));
			lookup = OUTBOX_LOOKUP_CANNOT_LOG_IN;
		}
		if (HeapTupleIsValid(roletup))
			ReleaseSysCache(roletup);
	}
	CommitTransactionCommand();
	outbox_slot_lock();
	slot->lookup = lookup;
	slot->owner = ext.owner;
	outbox_slot_unlock();
}

/*
 * What the owner lookup of slot slotno found, and the owner if it found
 * one.  Returns the verdict once, then OUTBOX_LOOKUP_NONE.
 */
static OutboxLookup
take_lookup(int slotno, Oid *owner)
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
 * The databases to look at again since the last call, at most max of
 * them; *overflow is set if more were dropped for lack of room (look at
 * every database again).
 */
static int
take_look_again(Oid *databases, int max, bool *overflow)
{
	int			n;

	SpinLockAcquire(&outbox_shared->mutex);
	n = Min(outbox_shared->nlook_again, max);
	memcpy(databases, outbox_shared->look_again, n * sizeof(Oid));
	*overflow = outbox_shared->look_again_overflow || outbox_shared->nlook_again > max;
	outbox_shared->nlook_again = 0;
	outbox_shared->look_again_overflow = false;
	SpinLockRelease(&outbox_shared->mutex);
	return n;
}

/*
 * Make the calling process the launcher that backends wake.  A launcher
 * that starts again (after an error) does not know the workers its
 * predecessor started: it stops them, waits up to 10 s for them to leave
 * their slots, and starts from empty slots.
 */
static void
attach_launcher(void)
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
	(void) pg_atomic_fetch_add_u32(&outbox_shared->slots_moved, 1);
	SpinLockRelease(&outbox_shared->mutex);
}

/*
 * The slot of database dboid, or NULL.  No lock: a slot's database is read
 * as a single word, and what the caller does with a slot a database has
 * just left is harmless (a latch set, a "maybe" said).
 */
static OutboxWorkerSlot *
find_slot(Oid dboid)
{
	/* the last answer, while no slot changed database: asked at each enqueue */
	static Oid	found_for = InvalidOid;
	static uint32 found_moved;
	static int	found = -1;
	uint32		moved = pg_atomic_read_u32(&outbox_shared->slots_moved);

	if (dboid != found_for || moved != found_moved)
	{
		/* a slot's new database is seen with the count that says it moved */
		pg_read_barrier();
		found = -1;
		for (int i = 0; i < outbox_shared->nslots && found < 0; i++)
			if (outbox_shared->slots[i].database == dboid)
				found = i;
		found_for = dboid;
		found_moved = moved;
	}
	return found < 0 ? NULL : &outbox_shared->slots[found];
}

/*
 * Does database dboid hold events that are not delivered?  NONE too if it
 * has no worker slot (no extension, or not served).
 */
OutboxUndelivered
outbox_launcher_undelivered(Oid dboid)
{
	OutboxWorkerSlot *slot = find_slot(dboid);

	if (slot == NULL)
		return OUTBOX_UNDELIVERED_NONE;
	return (OutboxUndelivered) (pg_atomic_read_u64(&slot->undelivered) & PG_UINT32_MAX);
}

/*
 * Say in slot that its database may hold events that are not delivered:
 * one more "maybe" (and still "unknown" if no worker has looked yet).
 * Returns the slot's word as it is then.
 */
static uint64
say_maybe(OutboxWorkerSlot *slot)
{
	uint64		old = pg_atomic_read_u64(&slot->undelivered);
	uint64		new;

	do
		new = ((old >> 32) + 1) << 32 |
			((old & PG_UINT32_MAX) == OUTBOX_UNDELIVERED_UNKNOWN ?
			 OUTBOX_UNDELIVERED_UNKNOWN : OUTBOX_UNDELIVERED_MAYBE);
	while (!pg_atomic_compare_exchange_u64(&slot->undelivered, &old, new));
	return new;
}

/*
 * Backend: say that database dboid may hold events that are not delivered
 * (a commit that enqueued, a restore), if say; see
 * outbox_launcher_undelivered.  Returns the slot's word, for
 * outbox_launcher_none_undelivered; 0 if the database has no slot.
 */
uint64
outbox_launcher_some_undelivered(Oid dboid, bool say)
{
	OutboxWorkerSlot *slot = find_slot(dboid);

	if (slot == NULL)
		return 0;
	return say ? say_maybe(slot) : pg_atomic_read_u64(&slot->undelivered);
}

/*
 * Say in slot whether its database holds events that are not delivered,
 * as a look that started when the slot's word was seen found, unless a
 * backend has said "maybe" since.
 */
void
outbox_slot_note_undelivered(OutboxWorkerSlot *slot, uint64 seen, bool some)
{
	uint64		new = (seen & ~(uint64) PG_UINT32_MAX) |
		(some ? OUTBOX_UNDELIVERED_SOME : OUTBOX_UNDELIVERED_NONE);

	(void) pg_atomic_compare_exchange_u64(&slot->undelivered, &seen, new);
}

/*
 * Backend: database dboid holds no event that is not delivered (the
 * extension was dropped, or its events discarded, with none left), unless
 * some may have come since the caller saw its slot's word seen (from
 * outbox_launcher_some_undelivered).
 */
void
outbox_launcher_none_undelivered(Oid dboid, uint64 seen)
{
	OutboxWorkerSlot *slot = find_slot(dboid);

	if (slot != NULL)
		outbox_slot_note_undelivered(slot, seen, false);
}

/* Ask the launcher to look at database dboid again, and wake it. */
static void
look_again(Oid dboid)
{
	Latch	   *latch;

	SpinLockAcquire(&outbox_shared->mutex);
	if (outbox_shared->nlook_again < MAX_LOOK_AGAIN)
		outbox_shared->look_again[outbox_shared->nlook_again++] = dboid;
	else
		outbox_shared->look_again_overflow = true;
	latch = outbox_shared->launcher_latch;
	SpinLockRelease(&outbox_shared->mutex);
	if (latch != NULL)
		SetLatch(latch);
}

/*
 * Backend: wake the worker of database dboid, if it has one, or the
 * launcher, if the database is parked.  No lock: a slot's database, latch
 * and state are read as single words, and setting a latch that a gone
 * worker left behind is harmless.  A worker that parks clears its latch
 * before it looks for work a last time, so a commit it does not see wakes
 * the launcher.
 */
void
outbox_launcher_wake_worker(Oid dboid)
{
	OutboxWorkerSlot *slot = find_slot(dboid);
	Latch	   *latch;

	if (slot == NULL)
		return;
	(void) say_maybe(slot);
	latch = slot->latch;
	if (latch != NULL)
		SetLatch(latch);
	else
	{
		pg_read_barrier();
		if (slot->state == OUTBOX_WORKER_PARKED)
			look_again(dboid);
	}
}

/*
 * Backend: ask for the worker of this database to be woken when the
 * current transaction commits.
 */
void
outbox_wake_at_commit(void)
{
	wake_at_commit = true;
}

/*
 * Backend: say, when the current transaction commits, that this database
 * holds no event that is not delivered (it drops the extension, or
 * discards them), unless a commit since now may have added some: for DROP
 * DATABASE.
 */
void
outbox_none_undelivered_at_commit(void)
{
	if (none_undelivered || !outbox_launcher_exists())
		return;
	none_undelivered = true;
	undelivered_changes = outbox_launcher_some_undelivered(MyDatabaseId, false);
}

/*
 * Backend, at the end of each transaction (utility.c's callback): at
 * commit, do what it asked of the launcher; forget it at commit, abort or
 * prepare (a prepared transaction wakes the worker at COMMIT PREPARED).
 */
void
outbox_launcher_at_eoxact(XactEvent event)
{
	if (event == XACT_EVENT_COMMIT && outbox_launcher_exists())
	{
		if (wake_at_commit)
			outbox_launcher_wake_worker(MyDatabaseId);
		if (none_undelivered)
			outbox_launcher_none_undelivered(MyDatabaseId, undelivered_changes);
	}
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT ||
		event == XACT_EVENT_PREPARE)
	{
		wake_at_commit = false;
		none_undelivered = false;
		restored_here = false;
	}
}

/*
 * Backend, before the commit of a transaction that created the extension
 * in database dboid (utility.c), once no other transaction can see it:
 * the database holds no event yet but those this transaction restored;
 * from then on, every commit that may add some says so to its slot.  So
 * take a slot for the database if it has none, for those commits to find
 * (the launcher adopts it, or frees it if it does not serve the
 * database), and say "none" there, or "maybe".  No slot free: the one the
 * launcher takes later says "unknown".
 */
void
outbox_launcher_extension_born(Oid dboid)
{
	char	   *dbname = get_database_name(dboid);
	TimestampTz now = GetCurrentTimestamp();
	int			slotno;

	if (dbname == NULL)
		return;
	SpinLockAcquire(&outbox_shared->mutex);
	slotno = take_slot(dboid, dbname, now);
	if (slotno >= 0)
	{
		OutboxWorkerSlot *slot = &outbox_shared->slots[slotno];
		uint64		old = pg_atomic_read_u64(&slot->undelivered);

		/* a new count, so that a look that began before does not undo it */
		while (!pg_atomic_compare_exchange_u64(&slot->undelivered, &old,
											   ((old >> 32) + 1) << 32 |
											   (restored_here ? OUTBOX_UNDELIVERED_MAYBE :
												OUTBOX_UNDELIVERED_NONE)))
			;
	}
	SpinLockRelease(&outbox_shared->mutex);
}

/*
 * Worker: does a database wait for a worker that an idle one could give
 * back?  If so, count it as served, so that one idle worker gives its
 * slot back per database that waits; the launcher counts them again at
 * its next look.
 */
bool
outbox_take_waiting_database(void)
{
	bool		waits;

	SpinLockAcquire(&outbox_shared->mutex);
	waits = outbox_shared->waiting > 0;
	if (waits)
		outbox_shared->waiting--;
	SpinLockRelease(&outbox_shared->mutex);
	return waits;
}

/*
 * Backend, at commit: ask the workers of database dboid that run as role
 * roleid (either InvalidOid: any) to exit after their batch in flight, so
 * that the launcher starts them again as things now are; and the launcher
 * to look at the database again, should it have none.
 */
void
outbox_launcher_restart_workers(Oid dboid, Oid roleid)
{
	Latch	   *latches[64];
	int			nlatches = 0;

	SpinLockAcquire(&outbox_shared->mutex);
	for (int i = 0; i < outbox_shared->nslots; i++)
	{
		OutboxWorkerSlot *slot = &outbox_shared->slots[i];

		if (!slot->in_use ||
			(OidIsValid(dboid) && slot->database != dboid) ||
			(OidIsValid(roleid) && slot->role != roleid))
			continue;
		slot->restart_requested = true;
		if (slot->latch != NULL && nlatches < lengthof(latches))
			latches[nlatches++] = slot->latch;
	}
	SpinLockRelease(&outbox_shared->mutex);
	for (int i = 0; i < nlatches; i++)
		SetLatch(latches[i]);
	if (OidIsValid(dboid) && !OidIsValid(roleid))
		look_again(dboid);
}

/*
 * Backend: tell the launcher that CREATE EXTENSION outbox committed in
 * database dboid.
 */
void
outbox_launcher_extension_created(Oid dboid)
{
	look_again(dboid);
}

/*
 * How long a publishing worker keeps its slot while another database waits
 * for one: TIME_SLICE_MS, or outbox.worker_idle_timeout if longer, so that
 * a busy worker keeps it as long as an idle one at least; -1 if workers
 * keep their slots for good (outbox.worker_idle_timeout -1).
 */
int
outbox_time_slice(void)
{
	return outbox_worker_idle_timeout < 0 ? -1 :
		Max(TIME_SLICE_MS, outbox_worker_idle_timeout);
}

/*
 * Backend, at CREATE EXTENSION outbox: warn if no background worker is
 * left for this database's worker beside the launcher and the workers of
 * other databases: it waits for its turn, until one of those gives its
 * slot.  Parallel queries take from the same max_worker_processes.
 */
void
outbox_launcher_check_room(void)
{
	int			running = 0;
	/* PostgreSQL's logical replication launcher takes one too */
	int			others = 1 + (max_logical_replication_workers > 0);

	SpinLockAcquire(&outbox_shared->mutex);
	for (int i = 0; i < outbox_shared->nslots; i++)
		running += outbox_shared->slots[i].pid != 0 &&
			outbox_shared->slots[i].database != MyDatabaseId;
	SpinLockRelease(&outbox_shared->mutex);
	if (others + running < max_worker_processes && running < outbox_max_workers)
		return;
	ereport(WARNING,
			(errcode(ERRCODE_WARNING),
			 errmsg("no background worker is free for the outbox worker of this database"),
			 errdetail("Of max_worker_processes (%d), the launchers take %d and the outbox workers of other databases %d; outbox.max_workers is %d.",
					   max_worker_processes, others, running, outbox_max_workers),
			 outbox_time_slice() < 0 ?
			 errhint("Raise max_worker_processes or outbox.max_workers: with outbox.worker_idle_timeout = -1, this database is served only when another database's worker exits.") :
			 errhint("Raise max_worker_processes or outbox.max_workers; until then the databases take turns: a worker gives its slot after %d ms while another database waits, or once idle for outbox.worker_idle_timeout.",
					 outbox_time_slice())));
}

/*
 * Backend: DROP DATABASE (or another statement that needs a database free
 * of sessions) is about to work on dboid: stop its worker at once (SIGTERM:
 * it finishes a batch in flight, as at shutdown), and start none there for
 * a while; or, with hold false, it did not happen: serve it again.
 */
void
outbox_launcher_hold_database(Oid dboid, bool hold)
{
	pid_t		pids[64];
	int			npids = 0;
	int			free = -1;
	int			oldest = 0;

	SpinLockAcquire(&outbox_shared->mutex);
	for (int i = 0; i < MAX_DROPS; i++)
	{
		if (outbox_shared->dropping[i].database == dboid)
			outbox_shared->dropping[i].database = InvalidOid;
		if (!OidIsValid(outbox_shared->dropping[i].database))
			free = i;
		else if (outbox_shared->dropping[i].since < outbox_shared->dropping[oldest].since)
			oldest = i;
	}
	if (hold)
	{
		int			d = free >= 0 ? free : oldest;

		outbox_shared->dropping[d].database = dboid;
		outbox_shared->dropping[d].since = GetCurrentTimestamp();
		for (int i = 0; i < outbox_shared->nslots && npids < lengthof(pids); i++)
		{
			OutboxWorkerSlot *slot = &outbox_shared->slots[i];

			if (slot->in_use && slot->database == dboid && slot->pid != 0)
				pids[npids++] = slot->pid;
		}
	}
	SpinLockRelease(&outbox_shared->mutex);
	for (int i = 0; i < npids; i++)
		(void) kill(pids[i], SIGTERM);
	if (!hold)
		look_again(dboid);
}

/*
 * Is DROP DATABASE working on dboid?  It has said so within DROP_HOLD_MS.
 */
static bool
being_dropped(Oid dboid)
{
	bool		dropping = false;
	TimestampTz now = GetCurrentTimestamp();

	SpinLockAcquire(&outbox_shared->mutex);
	for (int i = 0; i < MAX_DROPS; i++)
		dropping |= outbox_shared->dropping[i].database == dboid &&
			!TimestampDifferenceExceeds(outbox_shared->dropping[i].since, now, DROP_HOLD_MS);
	SpinLockRelease(&outbox_shared->mutex);
	return dropping;
}

/*
 * Backend: the log table to write to in database dboid, as its worker
 * said; 0 if it has none.  A hint: every log table is read.
 */
int
outbox_launcher_current_log(Oid dboid)
{
	OutboxWorkerSlot *slot;

	if (outbox_shared == NULL || (slot = find_slot(dboid)) == NULL)
		return 0;
	return pg_atomic_read_u32(&slot->current_log) % OUTBOX_LOG_TABLES;
}

/*
 * Backend: the calling backend writes the event log of database dboid by
 * hand (a restore), in its current transaction: the worker there waits
 * until this backend is gone, unless the transaction rolls back.  Once a
 * transaction of this backend that wrote the log has committed, it is the
 * one noted: rows restored are what only a restore leaves.
 */
void
outbox_launcher_note_restore(Oid dboid)
{
	TransactionId xid = GetTopTransactionId();
	pid_t		pids[MAX_RESTORES];
	bool		gone[MAX_RESTORES];
	int			mine = -1;
	TransactionId noted_xid = InvalidTransactionId;
	bool		noted = false;

	restored_here = true;
	SpinLockAcquire(&outbox_shared->mutex);
	for (int i = 0; i < MAX_RESTORES; i++)
	{
		pids[i] = outbox_shared->restoring[i].pid;
		if (pids[i] == MyProcPid && outbox_shared->restoring[i].database == dboid)
		{
			mine = i;
			noted_xid = outbox_shared->restoring[i].xid;
		}
	}
	SpinLockRelease(&outbox_shared->mutex);
	if (mine >= 0)
	{
		if (noted_xid == xid || TransactionIdDidCommit(noted_xid))
			return;
		SpinLockAcquire(&outbox_shared->mutex);
		outbox_shared->restoring[mine].xid = xid;
		SpinLockRelease(&outbox_shared->mutex);
		return;
	}
	for (int i = 0; i < MAX_RESTORES; i++)
		gone[i] = pids[i] == 0 || BackendPidGetProc(pids[i]) == NULL;

	SpinLockAcquire(&outbox_shared->mutex);
	for (int i = 0; i < MAX_RESTORES && !noted; i++)
		if (gone[i] && outbox_shared->restoring[i].pid == pids[i])
		{
			outbox_shared->restoring[i].database = dboid;
			outbox_shared->restoring[i].pid = MyProcPid;
			outbox_shared->restoring[i].xid = xid;
			noted = true;
		}
	SpinLockRelease(&outbox_shared->mutex);
	(void) outbox_launcher_some_undelivered(dboid, true);
	if (!noted)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("too many sessions write the outbox event log by hand at once")));
}

/*
 * Worker: a live backend that writes the event log of database dboid by
 * hand, in a transaction in progress or committed, or 0 if there is none.
 * A transaction rolled back restored nothing.
 */
pid_t
outbox_restoring_backend(Oid dboid)
{
	pid_t		pids[MAX_RESTORES];
	TransactionId xids[MAX_RESTORES];
	int			n = 0;

	SpinLockAcquire(&outbox_shared->mutex);
	for (int i = 0; i < MAX_RESTORES; i++)
		if (outbox_shared->restoring[i].database == dboid &&
			outbox_shared->restoring[i].pid != 0)
		{
			pids[n] = outbox_shared->restoring[i].pid;
			xids[n++] = outbox_shared->restoring[i].xid;
		}
	SpinLockRelease(&outbox_shared->mutex);
	for (int i = 0; i < n; i++)
		if (BackendPidGetProc(pids[i]) != NULL && !TransactionIdDidAbort(xids[i]))
			return pids[i];
	return 0;
}

/* what a database listed in outbox.databases needs next */
typedef enum DatabaseStep
{
	STEP_LOOK_UP,				/* find whether it has the extension, and its owner */
	STEP_PUBLISH,				/* run the publishing worker as owner */
	STEP_NO_EXTENSION,			/* nothing until CREATE EXTENSION */
	STEP_DISABLED,				/* nothing until its settings change */
	STEP_PARKED,				/* its idle worker gave its slot back */
	STEP_MISSING,				/* named in outbox.databases, does not exist */
	STEP_GONE					/* no longer listed: forget once its worker exits */
} DatabaseStep;

typedef struct ServedDatabase
{
	Oid			oid;			/* InvalidOid for STEP_MISSING */
	NameData	name;
	DatabaseStep step;
	int			slot;			/* in outbox_shared, or -1 */
	BackgroundWorkerHandle *handle; /* the lookup or the publishing worker */
	bool		publishing;		/* handle is the publishing worker */
	Oid			owner;			/* for STEP_PUBLISH */
	TimestampTz start_at;		/* not before */
	bool		look_again;		/* asked to, during its lookup */
	bool		listed;			/* seen by the last read of pg_database */
	bool		said_waiting;	/* the log said that it waits */
	uint64		turn;			/* its place in line while due, or 0 */
	TimestampTz served_since;	/* when its publishing worker started */
	TimestampTz asked_at;		/* when its worker was asked to give its slot,
								 * or 0 */
	bool		said_late;		/* the log said that it has not given it */
	bool		gave;			/* its worker gave its slot to gave_to */
	NameData	gave_to;
} ServedDatabase;

/* the databases, in the launcher's TopMemoryContext */
static ServedDatabase *databases = NULL;
static int	ndatabases = 0;
static int	max_databases = 0;
/* the last turn given; when a worker was last asked to give its slot */
static uint64 last_turn = 0;
static TimestampTz last_ask = 0;

/*
 * Register the launcher.  Called from _PG_init in the postmaster.
 */
void
outbox_launcher_register(void)
{
	BackgroundWorker worker;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = 1;
	strlcpy(worker.bgw_library_name, "outbox", BGW_MAXLEN);
	strlcpy(worker.bgw_function_name, "outbox_launcher_main", BGW_MAXLEN);
	strlcpy(worker.bgw_name, "outbox launcher", BGW_MAXLEN);
	strlcpy(worker.bgw_type, "outbox launcher", BGW_MAXLEN);
	RegisterBackgroundWorker(&worker);
}

/*
 * Start the worker of db: the owner lookup if owner is InvalidOid, else
 * the publishing worker as owner.  NULL if no background worker slot is
 * free (max_worker_processes).
 */
static BackgroundWorkerHandle *
start_worker(ServedDatabase *db, Oid owner)
{
	BackgroundWorker worker;
	BackgroundWorkerHandle *handle;
	OutboxWorkerArgs args = {db->oid, owner};

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = BGW_NEVER_RESTART;
	strlcpy(worker.bgw_library_name, "outbox", BGW_MAXLEN);
	strlcpy(worker.bgw_function_name, "outbox_worker_main", BGW_MAXLEN);
	snprintf(worker.bgw_name, BGW_MAXLEN, "outbox worker for database %s",
			 NameStr(db->name));
	strlcpy(worker.bgw_type, "outbox worker", BGW_MAXLEN);
	worker.bgw_main_arg = Int32GetDatum(db->slot);
	memcpy(worker.bgw_extra, &args, sizeof(args));
	worker.bgw_notify_pid = MyProcPid;

	if (!RegisterDynamicBackgroundWorker(&worker, &handle))
		return NULL;
	return handle;
}

static ServedDatabase *
find_database(Oid oid, const char *name)
{
	for (int i = 0; i < ndatabases; i++)
	{
		ServedDatabase *db = &databases[i];

		if (OidIsValid(oid) ? db->oid == oid :
			(!OidIsValid(db->oid) && strcmp(NameStr(db->name), name) == 0))
			return db;
	}
	return NULL;
}

static ServedDatabase *
add_database(Oid oid, const char *name, DatabaseStep step)
{
	ServedDatabase *db;

	if (ndatabases == max_databases)
	{
		max_databases = Max(16, max_databases * 2);
		databases = databases == NULL ?
			MemoryContextAlloc(TopMemoryContext, max_databases * sizeof(ServedDatabase)) :
			repalloc(databases, max_databases * sizeof(ServedDatabase));
	}
	db = &databases[ndatabases++];
	memset(db, 0, sizeof(*db));
	db->oid = oid;
	namestrcpy(&db->name, name);
	db->step = step;
	db->slot = -1;
	db->listed = true;
	return db;
}

/*
 * Give up db's slot, if it has one.
 */
static void
release_slot(ServedDatabase *db)
{
	if (db->slot >= 0)
		free_slot(db->slot);
	db->slot = -1;
}

/*
 * Does outbox.databases list the database called name?  "*" lists every
 * database but the templates: a session connected to a template makes
 * CREATE DATABASE fail.
 */
static bool
database_wanted(const char *name, bool is_template, List *names)
{
	ListCell   *lc;

	if (strcmp(outbox_databases, "*") == 0)
		return !is_template;
	foreach(lc, names)
	{
		if (strcmp((const char *) lfirst(lc), name) == 0)
			return true;
	}
	return false;
}

/*
 * Set *spelled to the name in names equal to name but for case, if any.
 */
static void
name_but_for_case(List *names, const char *name, const char **spelled)
{
	ListCell   *lc;

	foreach(lc, names)
	{
		if (pg_strcasecmp((const char *) lfirst(lc), name) == 0)
			*spelled = (const char *) lfirst(lc);
	}
}

/*
 * The slots that backends took for databases that the launcher has none
 * for (outbox_launcher_extension_born), in a bool per slot.
 */
static bool *
slots_taken_by_backends(void)
{
	bool	   *taken = palloc(outbox_shared->nslots * sizeof(bool));

	SpinLockAcquire(&outbox_shared->mutex);
	for (int i = 0; i < outbox_shared->nslots; i++)
		taken[i] = outbox_shared->slots[i].in_use &&
			OidIsValid(outbox_shared->slots[i].database);
	SpinLockRelease(&outbox_shared->mutex);
	for (int i = 0; i < ndatabases; i++)
		if (databases[i].slot >= 0)
			taken[databases[i].slot] = false;
	return taken;
}

/*
 * Free the slots of taken (slots_taken_by_backends before pg_database was
 * read) whose database the launcher does not serve: it does not exist, or
 * outbox.databases does not list it.  Those of the databases it serves are
 * adopted when they are due (claim_slot).
 */
static void
free_slots_not_served(const bool *taken)
{
	for (int i = 0; i < outbox_shared->nslots; i++)
	{
		OutboxWorkerSlot *slot = &outbox_shared->slots[i];
		Oid			dboid = slot->database;
		ServedDatabase *db;

		if (!taken[i])
			continue;
		db = find_database(dboid, NULL);
		if (db != NULL && db->listed && db->step != STEP_GONE)
			continue;
		SpinLockAcquire(&outbox_shared->mutex);
		if (slot->in_use && slot->database == dboid)
		{
			slot->in_use = false;
			slot->database = InvalidOid;
			(void) pg_atomic_fetch_add_u32(&outbox_shared->slots_moved, 1);
		}
		SpinLockRelease(&outbox_shared->mutex);
	}
}

/*
 * Read pg_database: add the databases of outbox.databases that are new,
 * mark those that went away, and note the names listed that do not exist;
 * free the slots that backends took for databases not served.  A heap
 * scan, as autovacuum's get_database_list: without a database, no index
 * can be opened.
 */
static void
read_databases(void)
{
	Relation	rel;
	TableScanDesc scan;
	HeapTuple	tuple;
	List	   *names = NIL;
	List	   *existing = NIL;
	ListCell   *lc;
	bool	   *taken;

	for (int i = 0; i < ndatabases; i++)
		databases[i].listed = false;

	StartTransactionCommand();
	/* before the snapshot, which sees the database of each */
	taken = slots_taken_by_backends();
	(void) GetTransactionSnapshot();
	if (strcmp(outbox_databases, "*") != 0)
		(void) SplitIdentifierString(pstrdup(outbox_databases), ',', &names);

	rel = table_open(DatabaseRelationId, AccessShareLock);
	scan = table_beginscan_catalog(rel, 0, NULL);
	while ((tuple = heap_getnext(scan, ForwardScanDirection)) != NULL)
	{
		Form_pg_database form = (Form_pg_database) GETSTRUCT(tuple);
		ServedDatabase *db;

		existing = lappend(existing, pstrdup(NameStr(form->datname)));
		if (!form->datallowconn ||
			!database_wanted(NameStr(form->datname), form->datistemplate, names))
			continue;
		db = find_database(form->oid, NULL);
		if (db == NULL)
			db = add_database(form->oid, NameStr(form->datname), STEP_LOOK_UP);
		db->listed = true;
	}
	table_endscan(scan);
	table_close(rel, AccessShareLock);

	/* names listed but not found: wait for them, and say so */
	foreach(lc, names)
	{
		const char *name = (const char *) lfirst(lc);
		bool		found = false;
		ServedDatabase *db;

		for (int i = 0; i < ndatabases; i++)
			found |= OidIsValid(databases[i].oid) && databases[i].listed &&
				strcmp(NameStr(databases[i].name), name) == 0;
		if (found)
			continue;
		db = find_database(InvalidOid, name);
		if (db == NULL)
		{
			const char *spelled = NULL;

			name_but_for_case(existing, name, &spelled);
			db = add_database(InvalidOid, name, STEP_MISSING);
			ereport(LOG,
					(errmsg("database \"%s\" named in outbox.databases does not exist or does not allow connections, waiting for it",
							name),
					 spelled ?
					 errhint("A database \"%s\" exists: names in outbox.databases are folded to lower case unless double-quoted, as identifiers are.",
							 spelled) :
					 errhint("Create the database, or change outbox.databases.")));
		}
		db->listed = true;
		if (db->slot < 0)
			db->slot = claim_slot(InvalidOid, name);
		if (db->slot >= 0)
		{
			char		reason[NAMEDATALEN + 64];

			snprintf(reason, sizeof(reason), "database \"%s\" does not exist", name);
			report_slot(db->slot, OUTBOX_WORKER_WAITING_FOR_DATABASE, reason);
		}
	}
	free_slots_not_served(taken);
	CommitTransactionCommand();

	for (int i = 0; i < ndatabases; i++)
	{
		ServedDatabase *db = &databases[i];

		if (db->listed || db->step == STEP_GONE)
			continue;
		db->step = STEP_GONE;
		if (db->handle != NULL)
			TerminateBackgroundWorker(db->handle);
	}
}

/*
 * Forget the databases marked gone whose worker has exited.
 */
static void
forget_gone_databases(void)
{
	int			kept = 0;

	for (int i = 0; i < ndatabases; i++)
	{
		if (databases[i].step == STEP_GONE && databases[i].handle == NULL)
		{
			release_slot(&databases[i]);
			continue;
		}
		databases[kept++] = databases[i];
	}
	ndatabases = kept;
}

/*
 * Look again at the databases that backends asked for (CREATE EXTENSION,
 * changed settings).  Returns true if pg_database must be read (a database
 * the launcher does not know yet, or too many to say).
 */
static bool
look_at_asked(void)
{
	Oid			asked[MAX_LOOK_AGAIN];
	bool		overflow;
	int			n = take_look_again(asked, lengthof(asked), &overflow);
	bool		read_again = overflow;

	for (int i = 0; i < ndatabases; i++)
	{
		ServedDatabase *db = &databases[i];
		bool		hit = overflow;

		for (int j = 0; j < n; j++)
			hit |= db->oid == asked[j];
		if (hit && (db->step == STEP_NO_EXTENSION || db->step == STEP_DISABLED ||
					db->step == STEP_PARKED))
		{
			db->step = STEP_LOOK_UP;
			db->start_at = 0;
		}
		else if (hit)
			db->look_again = true;
	}
	for (int j = 0; j < n; j++)
		read_again |= find_database(asked[j], NULL) == NULL;
	return read_again;
}

/*
 * Take note of the workers that exited, and decide what their database
 * needs next.
 */
static void
reap_workers(void)
{
	TimestampTz now = GetCurrentTimestamp();

	for (int i = 0; i < ndatabases; i++)
	{
		ServedDatabase *db = &databases[i];
		pid_t		pid;
		OutboxLookup verdict;

		if (db->handle == NULL ||
			GetBackgroundWorkerPid(db->handle, &pid) != BGWH_STOPPED)
			continue;
		pfree(db->handle);
		db->handle = NULL;
		if (db->step == STEP_GONE)
			continue;

		if (db->publishing)
		{
			OutboxWorkerState state;
			bool		parked;

			outbox_slot_lock();
			state = outbox_shared->slots[db->slot].state;
			outbox_slot_unlock();
			parked = state == OUTBOX_WORKER_PARKED;
			/* it gave its slot with work left: it waits for its turn */
			db->gave = db->asked_at != 0 && state == OUTBOX_WORKER_WAITING_FOR_WORKER_SLOT;
			db->asked_at = 0;
			db->said_late = false;
			/* a commit that found it parked asked to look again */
			db->step = parked && !db->look_again ? STEP_PARKED : STEP_LOOK_UP;
			db->start_at = parked || db->gave ? 0 :
				TimestampTzPlusMilliseconds(now, RESTART_DELAY_MS);
			continue;
		}
		verdict = take_lookup(db->slot, &db->owner);
		switch (verdict)
		{
			case OUTBOX_LOOKUP_FOUND:
				db->step = STEP_PUBLISH;
				db->start_at = 0;
				break;
			case OUTBOX_LOOKUP_NO_EXTENSION:
			case OUTBOX_LOOKUP_DISABLED:
				if (db->look_again)
					break;
				/* a disabled database keeps its slot: the status says so */
				db->step = verdict == OUTBOX_LOOKUP_DISABLED ? STEP_DISABLED : STEP_NO_EXTENSION;
				if (db->step == STEP_NO_EXTENSION)
					release_slot(db);
				break;
			case OUTBOX_LOOKUP_CANNOT_LOG_IN:
				db->start_at = TimestampTzPlusMilliseconds(now, LOOKUP_RETRY_MS);
				break;
			case OUTBOX_LOOKUP_NONE:
				db->start_at = TimestampTzPlusMilliseconds(now, RESTART_DELAY_MS);
				break;
		}
	}
}

static int
turn_cmp(const void *a, const void *b)
{
	uint64		x = (*(ServedDatabase *const *) a)->turn;
	uint64		y = (*(ServedDatabase *const *) b)->turn;

	return (x > y) - (x < y);
}

/*
 * Put in due the databases due for a worker (the owner lookup or the
 * publishing one) that have none, in their turn: the order in which they
 * became due, so that a database whose worker gave its slot goes behind
 * those that waited already.  A database that is not due loses its turn.
 * Returns how many.
 */
static int
due_in_turn(ServedDatabase **due)
{
	int			n = 0;

	for (int i = 0; i < ndatabases; i++)
	{
		ServedDatabase *db = &databases[i];

		if (db->step != STEP_LOOK_UP && db->step != STEP_PUBLISH)
		{
			db->turn = 0;
			db->said_waiting = false;
			continue;
		}
		if (db->handle != NULL)
			continue;
		if (db->turn == 0)
			db->turn = ++last_turn;
		due[n++] = db;
	}
	qsort(due, n, sizeof(ServedDatabase *), turn_cmp);
	return n;
}

/*
 * Ask the publishing workers that have had their time slice to give their
 * slots to the databases that wait (waiting, nwaiting of them, in their
 * turn) for which no worker was asked within GIVE_GRACE_MS, the worker
 * served longest first; tell idle workers how many are left for them to
 * park for (outbox_take_waiting_database).  The log says so once a
 * minute, and of each worker that has not given its slot in time.
 * Returns how long until the next slice or grace ends that matters.
 */
static long
ask_for_slots(ServedDatabase **waiting, int nwaiting, TimestampTz now)
{
	int			slice = outbox_time_slice();
	int			asked = 0;
	ServedDatabase *late = NULL;
	long		delay = DATABASE_CHECK_MS;

	for (int i = 0; i < ndatabases; i++)
	{
		ServedDatabase *db = &databases[i];

		if (db->handle == NULL || db->asked_at == 0)
			continue;
		if (TimestampDifferenceExceeds(db->asked_at, now, GIVE_GRACE_MS))
		{
			if (!db->said_late)
				late = db;
			continue;
		}
		asked++;
		delay = Min(delay, TimestampDifferenceMilliseconds(now,
														   TimestampTzPlusMilliseconds(db->asked_at, GIVE_GRACE_MS)));
	}
	while (slice >= 0 && asked < nwaiting)
	{
		ServedDatabase *longest = NULL;
		OutboxWorkerSlot *slot;
		Latch	   *latch;

		for (int i = 0; i < ndatabases; i++)
		{
			ServedDatabase *db = &databases[i];

			if (db->handle != NULL && db->publishing && db->asked_at == 0 &&
				(longest == NULL || db->served_since < longest->served_since))
				longest = db;
		}
		if (longest == NULL)
			break;
		if (!TimestampDifferenceExceeds(longest->served_since, now, slice))
		{
			delay = Min(delay, TimestampDifferenceMilliseconds(now,
															   TimestampTzPlusMilliseconds(longest->served_since, slice)));
			break;
		}
		longest->asked_at = now;
		namestrcpy(&longest->gave_to, NameStr(waiting[asked]->name));
		slot = &outbox_shared->slots[longest->slot];
		SpinLockAcquire(&outbox_shared->mutex);
		slot->give_to = longest->gave_to;
		slot->give_waiting = nwaiting;
		latch = slot->latch;
		SpinLockRelease(&outbox_shared->mutex);
		if (latch != NULL)
			SetLatch(latch);
		if (late != NULL)
		{
			ereport(LOG,
					(errmsg("the outbox worker of database \"%s\" has not given its slot %d ms after it was asked: the worker of database \"%s\" gives its slot to database \"%s\" instead",
							NameStr(late->name), GIVE_GRACE_MS, NameStr(longest->name),
							NameStr(longest->gave_to)),
					 errdetail("A worker gives its slot once its turn is over: a batch in flight first.")));
			late->said_late = true;
		}
		else
			ereport(TimestampDifferenceExceeds(last_ask, now, 60000) ? LOG : DEBUG1,
					(errmsg("databases take turns on the outbox workers: the worker of database \"%s\" gives its slot to database \"%s\" after its time slice of %d ms",
							NameStr(longest->name), NameStr(longest->gave_to), slice),
					 errdetail_plural("%d database waits for a worker.",
									  "%d databases wait for a worker.", nwaiting, nwaiting)));
		last_ask = now;
		late = NULL;
		asked++;
	}
	SpinLockAcquire(&outbox_shared->mutex);
	outbox_shared->waiting = Max(nwaiting - asked, 0);
	SpinLockRelease(&outbox_shared->mutex);
	return delay;
}

/*
 * db waits for a worker, one of nwaiting: say why, in its slot and, once
 * while it waits or takes turns, in the log.
 */
static void
report_waiting(ServedDatabase *db, const char *why, int nwaiting)
{
	char	   *reason;

	if (db->gave)
		reason = psprintf(OUTBOX_GAVE_SLOT, NameStr(db->gave_to), outbox_time_slice(), nwaiting);
	else if (outbox_time_slice() < 0)
		reason = pstrdup(why);
	else
		reason = psprintf("%s; databases waiting: %d, each served in its turn", why, nwaiting);
	report_slot(db->slot, OUTBOX_WORKER_WAITING_FOR_WORKER_SLOT, reason);
	if (!db->said_waiting)
		ereport(LOG,
				(errmsg("database \"%s\" waits for a worker: %s",
						NameStr(db->name), reason)));
	db->said_waiting = true;
	pfree(reason);
}

/*
 * Start the lookups and publishing workers that are due, in their turn, as
 * far as the limits allow; ask workers that have had their time slice to
 * give their slots to the databases left waiting.  Returns how long until
 * the next one is due.
 */
static long
start_workers(void)
{
	TimestampTz now = GetCurrentTimestamp();
	long		delay = DATABASE_CHECK_MS;
	int			publishing = 0;
	bool		looking_up = false;
	bool		none_free = false;
	ServedDatabase **due = palloc((ndatabases + 1) * sizeof(ServedDatabase *));
	ServedDatabase **waiting = palloc((ndatabases + 1) * sizeof(ServedDatabase *));
	const char **why = palloc((ndatabases + 1) * sizeof(char *));
	char	   *busy = psprintf("all outbox.max_workers (%d) workers are busy", outbox_max_workers);
	int			ndue = due_in_turn(due);
	int			nwaiting = 0;

	for (int i = 0; i < ndatabases; i++)
	{
		publishing += databases[i].handle != NULL && databases[i].publishing;
		looking_up |= databases[i].handle != NULL && !databases[i].publishing;
	}

	for (int i = 0; i < ndue; i++)
	{
		ServedDatabase *db = due[i];
		bool		publish = db->step == STEP_PUBLISH;

		if (db->start_at > now)
		{
			delay = Min(delay, TimestampDifferenceMilliseconds(now, db->start_at));
			continue;
		}
		if (being_dropped(db->oid) || (!publish && looking_up))
		{
			delay = Min(delay, RESTART_DELAY_MS);
			continue;
		}
		if (db->slot < 0 && (db->slot = claim_slot(db->oid, NameStr(db->name))) < 0)
		{
			if (!db->said_waiting)
				ereport(LOG,
						(errmsg("database \"%s\" waits for a worker: every slot is taken",
								NameStr(db->name)),
						 errhint("Raise outbox.max_workers.")));
			db->said_waiting = true;
			continue;
		}
		if (publish && publishing >= outbox_max_workers)
		{
			why[nwaiting] = busy;
			waiting[nwaiting++] = db;
			continue;
		}
		if (publish)
		{
			SpinLockAcquire(&outbox_shared->mutex);
			outbox_shared->slots[db->slot].give_to.data[0] = '\0';
			SpinLockRelease(&outbox_shared->mutex);
		}
		/* those behind one that found no background worker wait too */
		if (none_free || (db->handle = start_worker(db, publish ? db->owner : InvalidOid)) == NULL)
		{
			none_free = true;
			why[nwaiting] = "no background worker slot is free: raise max_worker_processes";
			waiting[nwaiting++] = db;
			delay = Min(delay, RESTART_DELAY_MS);
			continue;
		}
		db->publishing = publish;
		db->look_again = false;
		if (publish)
		{
			db->turn = 0;
			db->served_since = now;
			db->gave = false;
		}
		publishing += publish;
		looking_up |= !publish;
	}
	for (int i = 0; i < nwaiting; i++)
		report_waiting(waiting[i], why[i], nwaiting);
	delay = Min(delay, ask_for_slots(waiting, nwaiting, now));
	pfree(due);
	pfree(waiting);
	pfree(why);
	pfree(busy);
	return delay;
}

/*
 * Main entry point of the launcher.
 */
void
outbox_launcher_main(Datum main_arg)
{
	TimestampTz next_read = 0;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);
	pgstat_report_appname("outbox launcher");
	attach_launcher();

	for (;;)
	{
		long		delay;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
			next_read = 0;
			/* outbox.enabled may have changed */
			for (int i = 0; i < ndatabases; i++)
				if (databases[i].step == STEP_DISABLED)
					databases[i].step = STEP_LOOK_UP;
		}

		if (look_at_asked() || GetCurrentTimestamp() >= next_read)
		{
			read_databases();
			next_read = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
													DATABASE_CHECK_MS);
		}
		reap_workers();
		forget_gone_databases();
		delay = start_workers();

		/* a worker that starts or stops sets the latch (bgw_notify_pid) */
		(void) WaitLatch(MyLatch,
						 WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 Max(delay, 10), PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}
