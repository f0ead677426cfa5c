/*-------------------------------------------------------------------------
 *
 * kafka.h
 *		The producer: the only part of the extension that talks to
 *		librdkafka.  No SPI, no transaction needed.
 *
 * src/kafka.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef OUTBOX_KAFKA_H
#define OUTBOX_KAFKA_H

#include "event.h"

extern bool outbox_kafka_check_properties(const char *properties,
										  char *errbuf, size_t errlen);
extern void outbox_kafka_configure(void);
extern void outbox_kafka_shutdown(void);
extern void outbox_kafka_serve(void);
extern bool outbox_kafka_reachable(void);
extern bool outbox_kafka_probe(void);
extern int	outbox_kafka_brokers_up(void);
extern void outbox_kafka_publish(OutboxBatch *batch);
extern void outbox_kafka_forget_batch(void);

#endif							/* OUTBOX_KAFKA_H */
