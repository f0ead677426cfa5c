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
 * A Kafka cluster, as the settings name it: its brokers, and the
 * properties file its producer reads ("" for none).  A member left NULL
 * is the outbox.* setting's (outbox.brokers,
 * outbox.kafka_properties_file), as it is when used, and so is a NULL
 * cluster.  Two clusters are one if they name the same brokers and file
 * now (outbox_cluster_equal): a topic's setting that names the outbox.*
 * settings' brokers and file shares their producer.
 */
typedef struct OutboxCluster
{
	const char *brokers;
	const char *properties_file;
} OutboxCluster;

/*
 * A producer: one Kafka cluster, as the topics' settings name it, with
 * its own handle, reachability, outage tracking and statistics.
 */
typedef struct OutboxProducer OutboxProducer;

/* what the status shows of a producer */
typedef struct OutboxProducerStatus
{
	OutboxCluster cluster;		/* as it connects: neither member NULL */
	bool		open;			/* it has a handle */
	bool		reachable;
	TimestampTz state_since;	/* when it was opened, closed, seen down or up */
	int			brokers_up;		/* -1: unknown */
	int64		published;		/* since the worker started */
	int64		failed;
} OutboxProducerStatus;

extern const char *outbox_cluster_brokers(const OutboxCluster *cluster);
extern const char *outbox_cluster_properties_file(const OutboxCluster *cluster);
extern bool outbox_cluster_equal(const OutboxCluster *a, const OutboxCluster *b);

extern OutboxProducer *outbox_kafka_producer(const OutboxCluster *cluster);
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

/*
 * Whether the worker is asked to give its slot to another database (NULL:
 * never), set by the worker: while it is, a part of a batch that makes no
 * progress for a while is handed off even with one cluster, as it is with
 * several, so that a cluster that hangs holds back no other database's
 * turn.
 */
extern bool (*outbox_kafka_yield_requested) (void);
extern void outbox_kafka_forget_batch(void);
extern bool outbox_kafka_late_pending(void);
extern OutboxBatch *outbox_kafka_late_reports(void);

#endif							/* OUTBOX_KAFKA_H */
