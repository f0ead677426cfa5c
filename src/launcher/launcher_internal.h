/*-------------------------------------------------------------------------
 *
 * launcher_internal.h
 *		The launcher's shared memory, as the workers and
 *		outbox_worker_status() see it, and the status of each worker's
 *		clusters (clusters.c); what the launcher passes a worker it starts,
 *		and the owner lookup that such a worker runs first.
 *
 * One slot per database that is served or waits to be.  The launcher
 * assigns a slot to a database and frees it (in_use, database, dbname),
 * and asks its worker to give it to another (give_to); a backend that
 * creates the extension takes one for its database if it has none, which
 * the launcher adopts, or frees if it does not serve that database; the
 * worker started for the slot fills in the rest; backends set
 * restart_requested.  A slot's database and latch are single words that
 * committing backends read without a lock; the counters are atomics;
 * everything else is protected by the spinlock.  The status of a worker's
 * clusters is in a segment of its own that its slot names (clusters.c
 * says how it is read).
 *
 * src/launcher/launcher_internal.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef OUTBOX_LAUNCHER_INTERNAL_H
#define OUTBOX_LAUNCHER_INTERNAL_H

#include "port/atomics.h"
#include "storage/dsm.h"
#include "storage/latch.h"
#include "storage/spin.h"
#include "utils/timestamp.h"

#include "kafka/kafka.h"

typedef enum OutboxWorkerState
{
	OUTBOX_WORKER_STOPPED,
	OUTBOX_WORKER_STARTING,
	OUTBOX_WORKER_WAITING_FOR_DATABASE,
	OUTBOX_WORKER_WAITING_FOR_EXTENSION,
	OUTBOX_WORKER_WAITING_FOR_WORKER_SLOT,
	OUTBOX_WORKER_STANDBY,
	OUTBOX_WORKER_IDLE,
	OUTBOX_WORKER_PUBLISHING,
	OUTBOX_WORKER_BROKER_UNREACHABLE,
	OUTBOX_WORKER_WAITING_FOR_STANDBY,
	OUTBOX_WORKER_BACKING_OFF,
	OUTBOX_WORKER_DISABLED,
	OUTBOX_WORKER_WAITING_FOR_RESTORE,
	OUTBOX_WORKER_PARKED		/* no worker: gave it back, idle (launcher.c) */
} OutboxWorkerState;

/* what the launcher passes a worker it starts, in bgw_extra */
typedef struct OutboxWorkerArgs
{
	Oid			database;
	Oid			owner;			/* InvalidOid: look the owner up */
} OutboxWorkerArgs;

/* what the owner lookup of a database found */
typedef enum OutboxLookup
{
	OUTBOX_LOOKUP_NONE,			/* no verdict: it failed, look again */
	OUTBOX_LOOKUP_NO_EXTENSION,
	OUTBOX_LOOKUP_CANNOT_LOG_IN,	/* the owner cannot log in */
	OUTBOX_LOOKUP_DISABLED,		/* outbox.enabled is off there */
	OUTBOX_LOOKUP_FOUND
} OutboxLookup;

typedef struct OutboxWorkerSlot
{
	/* set by the launcher */
	bool		in_use;
	volatile Oid database;		/* InvalidOid while it does not exist */
	NameData	dbname;
	/* set by the slot's worker */
	Latch	   *volatile latch; /* the publishing worker's, for commits */
	pg_atomic_uint64 published; /* since the worker started */
	pg_atomic_uint64 failed;
	pid_t		pid;
	Oid			role;			/* the publishing worker's */
	OutboxWorkerState state;
	TimestampTz started_at;
	TimestampTz state_since;
	TimestampTz last_batch_at;
	int			brokers_up;		/* each cluster counted once */
	dsm_handle	clusters;		/* its clusters' status (clusters.c) */
	char		last_error[256];
	char		refusal[256];	/* Kafka's last refusal of a topic not delivered to since */
	OutboxLookup lookup;		/* the owner lookup's verdict */
	Oid			owner;			/* with OUTBOX_LOOKUP_FOUND */
	pg_atomic_uint32 current_log;	/* the log table enqueue writes to */
	/*
	 * Set by the launcher: the worker has had its time slice while
	 * database give_to waits (empty: keep the slot), with give_waiting
	 * databases waiting in all; it gives its slot after its turn.
	 */
	NameData	give_to;
	int			give_waiting;
	/* set by backends */
	bool		restart_requested;
	/*
	 * Whether the database holds events that are not delivered (for DROP
	 * DATABASE, utility.c): in the low half an OutboxUndelivered, in the
	 * high half how many times backends said "maybe", so that the worker's
	 * or a drop's "none" does not undo a "maybe" said since it looked.
	 * Set by the worker and backends without the lock.
	 */
	pg_atomic_uint64 undelivered;
} OutboxWorkerSlot;

/*
 * Why a database waits whose worker gave its slot: to which database,
 * after how long (ms), and how many databases wait.
 */
#define OUTBOX_GAVE_SLOT "gave its slot to database \"%s\" after its time slice of %d ms; databases waiting: %d, each served in its turn"

/* the launcher's shared memory, NULL where the library is not preloaded */
typedef struct OutboxShared OutboxShared;
extern OutboxShared *outbox_shared;

extern int	outbox_slot_count(void);
extern OutboxWorkerSlot *outbox_slot(int slotno);
extern void outbox_slot_lock(void);
extern void outbox_slot_unlock(void);
extern pid_t outbox_restoring_backend(Oid dboid);
extern void outbox_slot_note_undelivered(OutboxWorkerSlot *slot, uint64 seen, bool some);
extern bool outbox_take_waiting_database(void);
extern int	outbox_time_slice(void);
extern void outbox_look_up_owner(OutboxWorkerSlot *slot);

/* clusters.c */
extern void outbox_slot_show_clusters(OutboxWorkerSlot *slot,
									  const OutboxProducerStatus *clusters, int n);
extern OutboxProducerStatus *outbox_slot_clusters(OutboxWorkerSlot *slot, pid_t pid,
												  int *n);
extern void outbox_slot_show_producers(OutboxWorkerSlot *slot);

#endif							/* OUTBOX_LAUNCHER_INTERNAL_H */
