/*-------------------------------------------------------------------------
 *
 * kafka.h
 *		The producers, one per Kafka cluster.  No SPI, no transaction
 *		needed.
 *
 * src/kafka/kafka.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef OUTBOX_KAFKA_H
#define OUTBOX_KAFKA_H

#include "datatype/timestamp.h"
#include "nodes/pg_list.h"
#include "utils/hsearch.h"

#include "base/event.h"

/*
 * A producer: one Kafka cluster, as the topics' settings name it (brokers
 * and properties file, NULL for the outbox.* setting), with its own
 * handle, reachability, outage tracking and statistics.
 */
typedef struct OutboxProducer OutboxProducer;

/* what the status shows of a producer */
typedef struct OutboxProducerStatus
{
	const char *brokers;		/* as it connects to them */
	const char *properties_file;	/* the file it reads, "" for none */
	bool		open;			/* it has a handle */
	bool		reachable;
	TimestampTz state_since;	/* when it was opened, closed, seen down or up */
	int			brokers_up;		/* -1: unknown */
	int64		published;		/* since the worker started */
	int64		failed;
} OutboxProducerStatus;

extern OutboxProducer *outbox_kafka_producer(const char *brokers,
											 const char *properties_file);
extern List *outbox_kafka_producers(void);
extern void outbox_kafka_drop(OutboxProducer *p);
extern void outbox_kafka_configure(OutboxProducer *p);
extern void outbox_kafka_refresh(void);
extern const char *outbox_kafka_settings_refused(const OutboxProducer *p);
extern void outbox_kafka_shutdown(void);
extern void outbox_kafka_status(const OutboxProducer *p, OutboxProducerStatus *status);
extern void outbox_kafka_serve(void);
extern bool outbox_kafka_reachable(OutboxProducer *p);
extern bool outbox_kafka_busy(const OutboxProducer *p);
extern bool outbox_kafka_probe(OutboxProducer *p);
extern HTAB *outbox_kafka_stopped_keys(void);
extern void outbox_kafka_start(OutboxProducer *p, OutboxBatch *batch,
							   OutboxProducer *const *producer_of,
							   HTAB *stopped_keys);
extern bool outbox_kafka_finish(void);
extern void outbox_kafka_forget_batch(void);
extern bool outbox_kafka_late_pending(void);
extern OutboxBatch *outbox_kafka_late_reports(void);

#endif							/* OUTBOX_KAFKA_H */
