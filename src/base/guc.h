/*-------------------------------------------------------------------------
 *
 * guc.h
 *		The outbox.* settings; the README says what each one means.
 *
 * src/base/guc.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef OUTBOX_GUC_H
#define OUTBOX_GUC_H

#include "utils/jsonb.h"

extern char *outbox_databases;
extern int	outbox_max_workers;
extern int	outbox_worker_idle_timeout;
extern bool outbox_enabled;
extern char *outbox_brokers;
extern int	outbox_max_message_bytes;
extern int	outbox_batch_size;
extern int	outbox_poll_interval;
extern int	outbox_wake_delay;
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

/* outbox.headers as a Jsonb object, NULL while it is empty */
extern Jsonb *outbox_transaction_headers;

extern void outbox_define_gucs(void);

#endif							/* OUTBOX_GUC_H */
