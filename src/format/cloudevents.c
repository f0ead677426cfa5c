/*-------------------------------------------------------------------------
 *
 * cloudevents.c
 *		Records of format cloudevents: the binary content mode of the
 *		CloudEvents Kafka protocol binding, version 1.0.
 *
 * The payload is the event's data, as given.  The attributes are headers
 * named ce_<attribute>, lower case, their values UTF-8; the data's content
 * type is the header content-type.  The format makes ce_specversion,
 * ce_id (the event_id), ce_source (the topic's cloudevents_source),
 * ce_time (created_at, RFC 3339) and, unless given, ce_type (the topic)
 * when the worker publishes, by the topic's setting then.  Only enqueue
 * knows a payload's type: it records content-type application/json for
 * a JSON payload, and refuses headers that would contradict the format
 * (outbox_cloudevents_problem).  A tombstone is no event: it gets none of
 * this.  docs/cloudevents.md has the reasons.
 *
 * src/format/cloudevents.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/datetime.h"

#include "format/cloudevents.h"

/* the headers the format makes from the event and the topic's setting */
static const char *const made_headers[] = {
	"ce_specversion", "ce_id", "ce_source", "ce_time"
};

/* RFC 3339 in UTC with microseconds: 2026-11-24T18:51:08.123456Z */
#define RFC3339_LEN 27

/* Is name that of a header the format makes? */
static bool
is_made(const char *name)
{
	for (int i = 0; i < lengthof(made_headers); i++)
		if (strcmp(name, made_headers[i]) == 0)
			return true;
	return false;
}

/*
 * What is wrong with the headers of ev (unpacked) for a record of format
 * cloudevents, or NULL; json says whether its payload is JSON, whose
 * content type the format records.  *hint gets what to do, or NULL.
 */
const char *
outbox_cloudevents_problem(const OutboxEvent *ev, bool json, const char **hint)
{
	*hint = NULL;
	for (int i = 0; i < ev->nheaders; i++)
	{
		const char *name = ev->header_names[i];
		const char *value = ev->header_values[i];

		if (pg_strcasecmp(name, "content-type") == 0)
		{
			if (strcmp(name, "content-type") != 0)
				return psprintf("The header \"%s\" is not content-type: Kafka header names are case-sensitive, and the binding's is lower case.",
								name);
			if (json)
				return "The content-type of a JSON payload is application/json: none is given with it.";
			if (pg_strncasecmp(value, "application/cloudevents", 23) == 0)
				return "A content-type application/cloudevents is the structured content mode; records of format cloudevents are in binary content mode.";
			continue;
		}
		if (pg_strncasecmp(name, "ce_", 3) != 0)
			continue;
		if (is_made(name))
		{
			*hint = "ce_id is the event_id given to outbox_enqueue, or a new UUID; ce_source the topic's cloudevents_source; ce_time the event's creation; ce_specversion 1.0.";
			return psprintf("The header \"%s\" is made by format cloudevents.", name);
		}
		if (strcmp(name, "ce_datacontenttype") == 0)
			return "In binary content mode the data's content type is the header content-type.";
		if (strcmp(name, "ce_partitionkey") == 0)
			return "The partitionkey of a record of format cloudevents is its key.";
		if (name[3] == '\0' ||
			strspn(name + 3, "abcdefghijklmnopqrstuvwxyz0123456789") != strlen(name + 3))
			return psprintf("The header \"%s\" names no CloudEvents attribute: their names are lower-case ASCII letters and digits, after ce_.",
							name);
		if (*value == '\0')
			return psprintf("The header \"%s\" is empty: CloudEvents attributes are not.", name);
	}
	return NULL;
}

/*
 * The most bytes that the format adds to a record of topic, by what
 * outbox.max_message_bytes counts.
 */
int
outbox_cloudevents_bytes(const char *topic, const char *source, bool json)
{
	int			bytes = 5 * OUTBOX_HEADER_OVERHEAD;

	bytes += strlen("ce_specversion") + strlen("1.0");
	bytes += strlen("ce_id") + UUID_TEXT_LEN;
	bytes += strlen("ce_source") + strlen(source);
	bytes += strlen("ce_time") + RFC3339_LEN;
	bytes += strlen("ce_type") + strlen(topic);
	if (json)
		bytes += OUTBOX_HEADER_OVERHEAD + strlen("content-type") +
			strlen(OUTBOX_CLOUDEVENTS_JSON);
	return bytes;
}

/*
 * t as RFC 3339 in UTC into buf (RFC3339_LEN + 1 bytes); false for a time
 * it cannot write (infinite, before year 1 or after 9999).
 */
static bool
rfc3339(TimestampTz t, char *buf)
{
	struct pg_tm tm;
	fsec_t		fsec;

	if (TIMESTAMP_NOT_FINITE(t) || timestamp2tm(t, NULL, &tm, &fsec, NULL, NULL) != 0 ||
		tm.tm_year < 1 || tm.tm_year > 9999)
		return false;
	snprintf(buf, RFC3339_LEN + 1, "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ",
			 tm.tm_year, tm.tm_mon, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
			 (int) fsec);
	return true;
}

/*
 * Give ev (unpacked, not a tombstone) the headers of format cloudevents,
 * its topic's source being source: the format's own first, then those
 * stored with it, but for any of the names the format makes (an event
 * stored before its topic took the format).  Allocates in the current
 * memory context.
 */
void
outbox_cloudevents_headers(OutboxEvent *ev, const char *source)
{
	int			size = ev->nheaders + 5;
	char	  **names = palloc(sizeof(char *) * size);
	char	  **values = palloc(sizeof(char *) * size);
	char	   *time = palloc(RFC3339_LEN + 1);
	bool		typed = false;
	int			n = 0;

	Assert(ev->payload != NULL);
	for (int i = 0; i < ev->nheaders; i++)
		typed |= strcmp(ev->header_names[i], "ce_type") == 0;

	names[n] = "ce_specversion";
	values[n++] = "1.0";
	names[n] = "ce_id";
	values[n++] = ev->event_id;
	names[n] = "ce_source";
	values[n++] = (char *) source;
	if (!typed)
	{
		names[n] = "ce_type";
		values[n++] = ev->topic;
	}
	if (rfc3339(ev->created_at, time))
	{
		names[n] = "ce_time";
		values[n++] = time;
	}
	for (int i = 0; i < ev->nheaders; i++)
	{
		if (is_made(ev->header_names[i]))
			continue;
		names[n] = ev->header_names[i];
		values[n++] = ev->header_values[i];
	}

	ev->header_names = names;
	ev->header_values = values;
	ev->nheaders = n;
	ev->headers_bytes = 0;
	for (int i = 0; i < n; i++)
		ev->headers_bytes += strlen(names[i]) + strlen(values[i]) + OUTBOX_HEADER_OVERHEAD;
}
