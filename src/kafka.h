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

#include "utils/hsearch.h"

#include "event.h"

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
extern const char *outbox_kafka_settings_refused(void);
extern void outbox_kafka_shutdown(void);
extern void outbox_kafka_serve(void);
extern bool outbox_kafka_reachable(void);
extern bool outbox_kafka_probe(void);
extern int	outbox_kafka_brokers_up(void);
extern HTAB *outbox_kafka_stopped_keys(void);
extern void outbox_kafka_start(OutboxBatch *batch, HTAB *stopped_keys);
extern bool outbox_kafka_finish(void);
extern void outbox_kafka_forget_batch(void);

#endif							/* OUTBOX_KAFKA_H */
