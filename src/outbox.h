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

#include "access/xlogdefs.h"
#include "fmgr.h"
#include "port/atomics.h"
#include "storage/latch.h"
#include "storage/spin.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"

/* guc.c: the settings, see the README for what each one means */
extern char *outbox_database;
extern char *outbox_brokers;
extern char *outbox_kafka_properties;
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

/* enqueue.c: validate one event and insert it in the caller's transaction */
extern const char *outbox_topic_problem(const char *topic, int len);
extern void outbox_check_topic(const char *topic, int len);
extern bytea *outbox_utf8_payload(text *t);
extern int64 outbox_store_event(Oid nspid, text *topic, text *key,
								bytea *payload, Jsonb *headers,
								Datum event_id, bool event_id_isnull);

/* shmem.c: state shared by the launcher, the worker and the backends */
typedef enum OutboxWorkerState
{
	OUTBOX_WORKER_STOPPED,
	OUTBOX_WORKER_STARTING,
	OUTBOX_WORKER_WAITING_FOR_DATABASE,
	OUTBOX_WORKER_WAITING_FOR_EXTENSION,
	OUTBOX_WORKER_STANDBY,
	OUTBOX_WORKER_IDLE,
	OUTBOX_WORKER_PUBLISHING,
	OUTBOX_WORKER_BROKER_UNREACHABLE,
	OUTBOX_WORKER_WAITING_FOR_STANDBY,
	OUTBOX_WORKER_BACKING_OFF
} OutboxWorkerState;

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
	Oid			owner;			/* found by the worker, for the launcher */
	Oid			dropping_database;	/* DROP DATABASE under way: no restart */
	TimestampTz dropping_since;
} OutboxShared;

extern OutboxShared *outbox_shared;

extern void outbox_shmem_install_hooks(void);
extern void outbox_shmem_attach_worker(bool publishes);
extern void outbox_shmem_set_state(OutboxWorkerState state, const char *error);
extern void outbox_shmem_count_batch(int published, int failed);
extern void outbox_shmem_set_brokers_up(int brokers_up);
extern void outbox_shmem_put_owner(Oid owner);
extern Oid	outbox_shmem_take_owner(void);

/* utility.c: DROP DATABASE of the worker's database */
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

/* claim.c: the SQL side of publishing; callers hold a transaction */
extern Oid	outbox_extension_owner(void);
extern bool outbox_extension_ready(void);
extern OutboxBatch *outbox_claim_batch(int batch_size);
extern void outbox_record_outcomes(OutboxBatch *batch);
extern int64 outbox_purge_expired(int batch_size);

/* kafka.c: the producer; no SPI, no transaction needed */
extern bool outbox_kafka_check_properties(const char *properties,
										  char *errbuf, size_t errlen);
extern void outbox_kafka_configure(void);
extern void outbox_kafka_shutdown(void);
extern void outbox_kafka_serve(void);
extern bool outbox_kafka_reachable(void);
extern bool outbox_kafka_probe(void);
extern void outbox_kafka_publish(OutboxBatch *batch);
extern void outbox_kafka_forget_batch(void);

/* standby.c: publish only what the standbys of outbox.standby_slots have */
extern bool outbox_standbys_have(XLogRecPtr target, long max_ms);

/* launcher.c: starts the worker, as the extension's owner */
extern PGDLLEXPORT void outbox_launcher_main(Datum main_arg);
extern void outbox_register_launcher(void);

/* worker.c */
extern PGDLLEXPORT void outbox_worker_main(Datum main_arg);

#endif							/* OUTBOX_H */
