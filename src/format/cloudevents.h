/*-------------------------------------------------------------------------
 *
 * cloudevents.h
 *		The CloudEvents format of a topic's records: binary content mode of
 *		the CloudEvents Kafka protocol binding.
 *
 * src/format/cloudevents.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef OUTBOX_CLOUDEVENTS_H
#define OUTBOX_CLOUDEVENTS_H

#include "base/event.h"

/* the content type of a JSON payload, recorded at enqueue */
#define OUTBOX_CLOUDEVENTS_JSON "application/json"

extern const char *outbox_cloudevents_string_problem(const char *what, const char *value);
extern const char *outbox_uri_reference_problem(const char *s);
extern const char *outbox_cloudevents_problem(const OutboxEvent *ev, bool json,
											  const char **hint);
extern int	outbox_cloudevents_bytes(const char *topic, const char *source, bool json);
extern void outbox_cloudevents_headers(OutboxEvent *ev, const char *source);

#endif							/* OUTBOX_CLOUDEVENTS_H */
