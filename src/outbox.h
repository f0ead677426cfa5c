/*-------------------------------------------------------------------------
 *
 * outbox.h
 *		Declarations shared by the source files of the outbox extension.
 *
 * src/outbox.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef OUTBOX_H
#define OUTBOX_H

#include "access/transam.h"
#include "access/tupdesc.h"
#include "access/xlogdefs.h"
#include "fmgr.h"
#include "port/atomics.h"
#include "storage/latch.h"
#include "storage/spin.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"

/* guc.c: the settings, see the README for what each one means */
extern char *outbox_databases;
extern int	outbox_max_workers;
extern char *outbox_brokers;
extern char *outbox_kafka_properties;
extern char *outbox_kafka_properties_file;
extern int	outbox_max_message_bytes;
extern int	outbox_batch_size;
extern int	outbox_poll_interval;
extern int	outbox_max_attempts;
extern int	outbox_retry_base_delay;
extern int	outbox_retry_max_delay;
extern double outbox_retry_jitter;
extern int	outbox_delivery_timeout;
extern int	outbox_published_retention;
extern int	outbox_abandoned_retention;
extern char *outbox_dead_letter_topic;
extern char *outbox_headers;
extern char *outbox_standby_slots;
extern Jsonb *outbox_transaction_headers;

extern void outbox_define_gucs(void);

/* the ring of log tables, outbox_log_0 .. 3 (outbox--1.0--1.1.sql) */
#define OUTBOX_LOG_TABLES 4

/* the columns of the log tables, in order */
typedef enum OutboxLogColumn
{
	LOG_ID,
	LOG_TXID,
	LOG_EVENT_ID,
	LOG_TOPIC,
	LOG_KEY,
	LOG_PAYLOAD,
	LOG_HEADERS,
	LOG_CREATED_AT,
	OUTBOX_LOG_COLUMNS
} OutboxLogColumn;

extern const char *const outbox_log_column_names[OUTBOX_LOG_COLUMNS];

/* enqueue.c: validate one event and insert it in the caller's transaction */
extern const char *outbox_topic_problem(const char *topic, int len);
extern void outbox_check_topic(const char *topic, int len);
extern bytea *outbox_utf8_payload(text *t);
extern int64 outbox_store_event(Oid nspid, text *topic, text *key,
								bytea *payload, Jsonb *headers,
								Datum event_id, bool event_id_isnull);
extern Oid	outbox_function_namespace(FunctionCallInfo fcinfo);
extern Oid	outbox_relation_in(Oid nspid, const char *name);

/* shmem.c: state shared by the launcher, the workers and the backends */
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
	OUTBOX_WORKER_BACKING_OFF
} OutboxWorkerState;

/* what the owner lookup of a database found */
typedef enum OutboxLookup
{
	OUTBOX_LOOKUP_NONE,			/* no verdict: it failed, look again */
	OUTBOX_LOOKUP_NO_EXTENSION,
	OUTBOX_LOOKUP_CANNOT_LOG_IN,	/* the owner cannot log in */
	OUTBOX_LOOKUP_FOUND
} OutboxLookup;

/* one database served by a worker, or waiting for one */
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
	OutboxWorkerState state;
	TimestampTz started_at;
	TimestampTz state_since;
	TimestampTz last_batch_at;
	int			brokers_up;
	char		last_error[256];
	OutboxLookup lookup;		/* the owner lookup's verdict, for the launcher */
	Oid			owner;			/* with OUTBOX_LOOKUP_FOUND */
	pg_atomic_uint32 current_log;	/* the log table enqueue writes to */
	/* set by backends */
	bool		restart_requested;	/* settings or extension changed */
} OutboxWorkerSlot;

typedef struct OutboxShared
{
	slock_t		mutex;
	Latch	   *launcher_latch;
	Oid			dropping_database;	/* DROP DATABASE under way: no restart */
	TimestampTz dropping_since;
	Oid			created[16];	/* CREATE EXTENSION committed there */
	int			ncreated;
	bool		created_overflow;	/* and in more databases */
	int			nslots;
	OutboxWorkerSlot slots[FLEXIBLE_ARRAY_MEMBER];
} OutboxShared;

extern OutboxShared *outbox_shared;

extern void outbox_shmem_install_hooks(void);
extern int	outbox_shmem_claim_slot(Oid dboid, const char *dbname);
extern void outbox_shmem_release_slot(int slotno);
extern void outbox_shmem_report_waiting(int slotno, OutboxWorkerState state,
										const char *error);
extern OutboxLookup outbox_shmem_take_lookup(int slotno, Oid *owner);
extern int	outbox_shmem_take_created(Oid *databases, int max, bool *overflow);
extern void outbox_shmem_attach_launcher(void);
extern void outbox_shmem_attach_worker(int slotno, bool publishes);
extern void outbox_shmem_set_state(OutboxWorkerState state, const char *error);
extern void outbox_shmem_count_batch(int published, int failed);
extern void outbox_shmem_set_brokers_up(int brokers_up);
extern void outbox_shmem_put_lookup(OutboxLookup lookup, Oid owner);
extern bool outbox_shmem_restart_requested(void);
extern void outbox_shmem_wake_worker(Oid dboid);
extern void outbox_shmem_restart_workers(Oid dboid, bool terminate);
extern void outbox_shmem_extension_created(Oid dboid);
extern void outbox_shmem_set_current_log(int current_log);
extern int	outbox_shmem_current_log(Oid dboid);

/* utility.c: statements that concern the launcher or a worker */
extern void outbox_install_utility_hook(void);

/* wakeup.c: wake the worker when an enqueuing transaction commits */
extern void outbox_wake_worker_at_commit(void);
extern void outbox_register_xact_callback(void);

/* One claimed event and, once librdkafka has said, its outcome */
typedef enum OutboxOutcome
{
	OUTBOX_IN_FLIGHT,			/* no delivery report yet */
	OUTBOX_DELIVERED,			/* acknowledged by the cluster */
	OUTBOX_REFUSED,				/* failed: counts as an attempt */
	OUTBOX_RELEASED				/* not sent (outage, shutdown): no attempt */
} OutboxOutcome;

#define UUID_TEXT_LEN 36

typedef struct OutboxEvent
{
	int64		id;
	bool		from_log;		/* not from the retry table */
	text	   *stored_topic;	/* the topic as stored, for the statistics */
	TimestampTz created_at;
	char		event_id[UUID_TEXT_LEN + 1];	/* canonical uuid text */
	char	   *topic;
	char	   *key;			/* NULL: no key */
	int			key_len;
	char	   *payload;		/* NULL: tombstone */
	int			payload_len;
	int			nheaders;
	char	  **header_names;
	char	  **header_values;
	int			headers_bytes;	/* names, values and their framing */

	OutboxOutcome outcome;
	int32		partition;
	int64		offset;
	const char *error;			/* why it was refused */
	bool		permanent;		/* retrying cannot help */
} OutboxEvent;

typedef struct OutboxBatch
{
	int			count;
	OutboxEvent *events;
} OutboxBatch;

/* event.c: an event's parts as they go on the wire */
extern char *outbox_to_utf8(const char *str, int len, int *utf8_len);
extern const char *outbox_unpack_headers(Jsonb *headers, OutboxEvent *ev,
										 bool *not_utf8);
extern int64 outbox_record_bytes(const OutboxEvent *ev);

/* reader.c: reading the log in id order; callers hold a transaction */
typedef struct OutboxRow
{
	Datum		values[OUTBOX_LOG_COLUMNS];
	bool		isnull[OUTBOX_LOG_COLUMNS];
	int64		bytes;			/* of payload, key and headers */
} OutboxRow;

/* where the claim is in the log (table outbox_reader) */
typedef struct OutboxReader
{
	int64		last_id;
	FullTransactionId *running;
	int			nrunning;
	FullTransactionId *draining;
	int			ndraining;
	int64		drain_upto;
	int64		drain_after;
} OutboxReader;

extern int	outbox_read_log(Oid nspid, OutboxReader *reader, int room,
							int64 *bytes_left, OutboxRow *rows);
extern bool outbox_log_has_after(Oid nspid, int64 after);
extern int	outbox_xids_of(Datum array, FullTransactionId **xids);
extern Datum outbox_xid_array(FullTransactionId *xids, int n);
extern void outbox_copy_row(TupleDesc desc, Datum *values, bool *isnull,
							bool whole, OutboxRow *row);

/* claim.c: the SQL side of publishing; callers hold a transaction */
extern Oid	outbox_extension_owner(void);
extern bool outbox_extension_ready(void);
extern bool outbox_events_due(void);
extern OutboxBatch *outbox_claim_batch(int batch_size);
extern void outbox_record_outcomes(OutboxBatch *batch);
extern int64 outbox_purge_expired(int batch_size);
extern int	outbox_rotate_log(void);

/* kafka.c: the producer; no SPI, no transaction needed */

/* why Kafka properties are refused, for an ereport; never their values */
typedef struct OutboxPropertyError
{
	char		message[MAXPGPATH + 256];
	char		detail[512];
	const char *hint;			/* a constant, or NULL */
	bool		missing;		/* the properties file does not exist */
} OutboxPropertyError;

extern bool outbox_kafka_check_properties(const char *properties,
										  bool secrets_allowed,
										  OutboxPropertyError *error);
extern bool outbox_kafka_check_properties_file(const char *path,
											   OutboxPropertyError *error);
extern void outbox_kafka_configure(void);
extern void outbox_kafka_shutdown(void);
extern void outbox_kafka_serve(void);
extern bool outbox_kafka_reachable(void);
extern bool outbox_kafka_probe(void);
extern void outbox_kafka_publish(OutboxBatch *batch);
extern void outbox_kafka_forget_batch(void);

/* standby.c: publish only what the standbys of outbox.standby_slots have */
extern bool outbox_standbys_have(XLogRecPtr target, long max_ms);

/* launcher.c: starts a worker per database, as the extension's owner */
typedef struct OutboxWorkerArgs
{
	Oid			database;
	Oid			owner;			/* InvalidOid: look the owner up */
} OutboxWorkerArgs;

extern PGDLLEXPORT void outbox_launcher_main(Datum main_arg);
extern void outbox_register_launcher(void);

/* worker.c */
extern PGDLLEXPORT void outbox_worker_main(Datum main_arg);

#endif							/* OUTBOX_H */
