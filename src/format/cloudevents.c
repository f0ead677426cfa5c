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
 * and ce_partitionkey (the key, as the Kafka binding keeps the attribute
 * beside the key mapped from it) when the worker publishes, by the topic's
 * setting then.  Only enqueue
 * knows a payload's type: it records content-type application/json for
 * a JSON payload, and refuses headers that would contradict the format
 * (headers_problem).  A tombstone is no event: it gets none of
 * this.  docs/cloudevents.md has the reasons.
 *
 * src/format/cloudevents.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "mb/pg_wchar.h"
#include "utils/datetime.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/jsonb.h"

#include "base/event.h"
#include "format/format_internal.h"
#include "format/topics.h"

/* the content type of a JSON payload, recorded at enqueue */
#define JSON_CONTENT_TYPE "application/json"

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
 * What keeps value (UTF-8) from being a CloudEvents String, or NULL: the
 * spec's type system allows no control character (U+0000-U+001F,
 * U+007F-U+009F) and no Unicode noncharacter (U+FDD0-U+FDEF, U+xFFFE,
 * U+xFFFF); surrogates cannot be in UTF-8.  what names the value, as the
 * start of a sentence ("The header \"ce_type\"").
 */
static const char *
string_problem(const char *what, const char *value)
{
	const unsigned char *p = (const unsigned char *) value;
	const unsigned char *end = p + strlen(value);

	while (p < end)
	{
		int			len = pg_utf_mblen(p);
		pg_wchar	c;

		if (len > end - p || !pg_utf8_islegal(p, len))
			return psprintf("%s is not valid UTF-8.", what);
		c = utf8_to_unicode(p);
		if (c <= 0x1F || (c >= 0x7F && c <= 0x9F))
			return psprintf("%s holds the control character U+%04X: a CloudEvents String holds none (U+0000-U+001F, U+007F-U+009F).",
							what, c);
		if ((c >= 0xFDD0 && c <= 0xFDEF) || (c & 0xFFFE) == 0xFFFE)
			return psprintf("%s holds U+%04X, a Unicode noncharacter, which a CloudEvents String may not hold.",
							what, c);
		p += len;
	}
	return NULL;
}

/* RFC 3986's character classes (section 2) */
#define URI_UNRESERVED "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~"
#define URI_SUB_DELIMS "!$&'()*+,;="

/*
 * The length of the run at s of characters that are unreserved,
 * sub-delims, percent-encoded (if pct) or in extra; *bad_pct is set at a
 * '%' not followed by two hex digits.
 */
static size_t
uri_span(const char *s, const char *extra, bool pct, bool *bad_pct)
{
	const char *p = s;

	for (;;)
	{
		if (*p == '\0')
			break;
		if (pct && *p == '%')
		{
			if (!isxdigit((unsigned char) p[1]) || !isxdigit((unsigned char) p[2]))
			{
				*bad_pct = true;
				break;
			}
			p += 3;
		}
		else if (strchr(URI_UNRESERVED URI_SUB_DELIMS, *p) != NULL ||
				 (extra != NULL && strchr(extra, *p) != NULL))
			p++;
		else
			break;
	}
	return p - s;
}

/* is s[0..len) an IPv4address: four dec-octets, no leading zero? */
static bool
is_ipv4(const char *s, size_t len)
{
	const char *p = s;
	const char *end = s + len;

	for (int octet = 0; octet < 4; octet++)
	{
		int			value = 0;
		const char *start = p;

		if (octet > 0 && (p >= end || *p++ != '.'))
			return false;
		start = p;
		while (p < end && isdigit((unsigned char) *p) && p - start < 3)
			value = value * 10 + (*p++ - '0');
		if (p == start || value > 255 || (p - start > 1 && *start == '0'))
			return false;
	}
	return p == end;
}

/*
 * Is s[0..len) an IPv6address of RFC 3986: eight groups of 1 to 4 hex
 * digits, the last two of which may be an IPv4address, with at most one
 * "::" standing for one group of zeros or more?
 */
static bool
is_ipv6(const char *s, size_t len)
{
	const char *p = s;
	const char *end = s + len;
	int			groups = 0;
	bool		elided = false;

	if (len >= 2 && p[0] == ':' && p[1] == ':')
	{
		elided = true;
		p += 2;
	}
	else if (len >= 1 && p[0] == ':')
		return false;
	while (p < end)
	{
		size_t		digits = 0;
		const char *colon = memchr(p, ':', end - p);

		/* the last piece may be an IPv4address, which counts as two groups */
		if (colon == NULL && memchr(p, '.', end - p) != NULL)
		{
			if (!is_ipv4(p, end - p))
				return false;
			groups += 2;
			p = end;
			break;
		}
		while (p + digits < end && isxdigit((unsigned char) p[digits]))
			digits++;
		if (digits == 0 || digits > 4)
			return false;
		groups++;
		p += digits;
		if (p == end)
			break;
		if (*p++ != ':')
			return false;
		if (p < end && *p == ':')
		{
			if (elided)
				return false;
			elided = true;
			p++;
		}
		else if (p == end)
			return false;		/* a single ':' at the end */
	}
	return elided ? groups <= 7 : groups == 8;
}

/*
 * Is s[0..len) an IPvFuture of RFC 3986: "v" 1*HEXDIG "." 1*( unreserved /
 * sub-delims / ":" )?
 */
static bool
is_ipvfuture(const char *s, size_t len)
{
	size_t		digits = 0;
	bool		bad_pct = false;
	char	   *rest;

	if (len < 4 || (s[0] != 'v' && s[0] != 'V'))
		return false;
	while (1 + digits < len && isxdigit((unsigned char) s[1 + digits]))
		digits++;
	if (digits == 0 || 1 + digits + 1 >= len || s[1 + digits] != '.')
		return false;
	rest = pnstrdup(s + 2 + digits, len - 2 - digits);
	return uri_span(rest, ":", false, &bad_pct) == strlen(rest);
}

/*
 * What keeps s from being a URI-reference of RFC 3986 (section 4.1: a URI,
 * or a relative reference), or NULL.  The empty string is one: a caller
 * that needs more says so.
 */
static const char *
uri_reference_problem(const char *s)
{
	const char *p = s;
	bool		bad_pct = false;
	size_t		n;

	/* a scheme: a letter, then letters, digits, "+", "-", ".", then ":" */
	n = strspn(p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+-.");
	if (n > 0 && p[n] == ':' && isalpha((unsigned char) p[0]))
		p += n + 1;
	else if (p[uri_span(p, "@", true, &bad_pct)] == ':' && !bad_pct)
		return "The first segment of a relative reference holds a \":\", and what comes before it is no scheme.";

	if (p[0] == '/' && p[1] == '/')
	{
		/* the authority: [ userinfo "@" ] host [ ":" port ] */
		p += 2;
		n = uri_span(p, ":", true, &bad_pct);
		if (p[n] == '@')
			p += n + 1;
		if (*p == '[')
		{
			const char *close = strchr(p, ']');

			if (close == NULL)
				return "A \"[\" of the host is not closed.";
			if (!(is_ipv6(p + 1, close - p - 1) || is_ipvfuture(p + 1, close - p - 1)))
				return "The host in brackets is no IPv6 address (nor an IPvFuture).";
			p = close + 1;
		}
		else
			p += uri_span(p, NULL, true, &bad_pct);
		if (*p == ':')
			p += 1 + strspn(p + 1, "0123456789");
		if (*p != '\0' && *p != '/' && *p != '?' && *p != '#')
			return bad_pct ? "A \"%\" is not followed by two hexadecimal digits." :
				"The authority holds a character that a URI does not allow there.";
	}
	/* the path, the query, the fragment */
	p += uri_span(p, ":@/", true, &bad_pct);
	if (*p == '?')
		p += 1 + uri_span(p + 1, ":@/?", true, &bad_pct);
	if (*p == '#')
		p += 1 + uri_span(p + 1, ":@/?", true, &bad_pct);
	if (bad_pct)
		return "A \"%\" is not followed by two hexadecimal digits.";
	if (*p != '\0')
		return psprintf("The character at offset %d (byte 0x%02X) is not allowed there in a URI: other characters are written with %%.",
						(int) (p - s), (unsigned char) *p);
	return NULL;
}

/*
 * What keeps s from being a CloudEvents URI, an absolute URI of RFC 3986
 * (section 4.3: a scheme, no fragment), or NULL.
 */
static const char *
absolute_uri_problem(const char *s)
{
	size_t		n = strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+-.");
	const char *problem;

	if (n == 0 || s[n] != ':' || !isalpha((unsigned char) s[0]))
		return "It has no scheme: a CloudEvents URI is absolute, as \"https://shop.example/schemas/order.json\" or \"urn:example:order:v1\".";
	if ((problem = uri_reference_problem(s)) != NULL)
		return problem;
	if (strchr(s, '#') != NULL)
		return "It has a fragment: a CloudEvents URI is absolute, which has none.";
	return NULL;
}

/* RFC 7230's tchar: the characters of a token */
#define TCHAR "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"

/*
 * Is value a media type of RFC 7231 (section 3.1.1.1): type "/" subtype
 * *( OWS ";" OWS parameter ), tokens of RFC 7230, a parameter's value a
 * token or a quoted string?
 */
static bool
is_media_type(const char *value)
{
	const char *p = value;
	size_t		n;

	if ((n = strspn(p, TCHAR)) == 0 || p[n] != '/')
		return false;
	p += n + 1;
	if ((n = strspn(p, TCHAR)) == 0)
		return false;
	p += n;
	while (*p != '\0')
	{
		p += strspn(p, " \t");
		if (*p++ != ';')
			return false;
		p += strspn(p, " \t");
		if ((n = strspn(p, TCHAR)) == 0 || p[n] != '=')
			return false;
		p += n + 1;
		if (*p == '"')
		{
			/* qdtext: HTAB, SP, %x21, %x23-5B, %x5D-7E, obs-text; or a quoted-pair */
			for (p++; *p != '"'; p++)
			{
				if (*p == '\\' && (p[1] == '\t' || (unsigned char) p[1] >= 0x20) && p[1] != 0x7F)
					p++;
				else if (*p == '\0' || *p == 0x7F || *p == '\\' ||
						 ((unsigned char) *p < 0x20 && *p != '\t'))
					return false;
			}
			p++;
		}
		else if ((n = strspn(p, TCHAR)) == 0)
			return false;
		else
			p += n;
	}
	return true;
}

/*
 * What is wrong with the headers of ev (unpacked) for a record of format
 * cloudevents, or NULL; json says whether its payload is JSON, whose
 * content type the format records; stored, that ev is published as it was
 * stored, its headers of the names the format makes replaced
 * (make_headers).  *hint gets what to do, or NULL.
 */
static const char *
headers_problem(const OutboxEvent *ev, bool json, bool stored, const char **hint)
{
	const char *problem;

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
			if (!is_media_type(value))
			{
				*hint = "A media type is type/subtype, then parameters each after \";\" (\"text/plain; charset=utf-8\"), with no white space around it (RFC 7231).";
				return "The header content-type is not a media type.";
			}
			if (pg_strncasecmp(value, "application/cloudevents", 23) == 0)
				return "A content-type application/cloudevents is the structured content mode; records of format cloudevents are in binary content mode.";
			if ((problem = string_problem("The header content-type", value)) != NULL)
				return problem;
			continue;
		}
		if (pg_strncasecmp(name, "ce_", 3) != 0)
			continue;
		if (is_made(name) && stored)
			continue;
		if (is_made(name))
		{
			*hint = "ce_id is the event_id given to outbox_enqueue, or a new UUID; ce_source the topic's cloudevents_source; ce_time the event's creation; ce_specversion 1.0.";
			return psprintf("The header \"%s\" is made by format cloudevents.", name);
		}
		if (strcmp(name, "ce_datacontenttype") == 0)
			return "In binary content mode the data's content type is the header content-type.";
		if (strcmp(name, "ce_partitionkey") == 0 &&
			(ev->key == NULL || ev->key_base64 || strlen(value) != ev->key_len ||
			 memcmp(value, ev->key, ev->key_len) != 0))
		{
			*hint = "Give the partition key as the event's key: the format sends it as ce_partitionkey too.";
			return "The partitionkey of a record of format cloudevents is its key, a string.";
		}
		if (strcmp(name, "ce_data") == 0)
			return "The attribute name data is reserved: the data of an event is its payload.";
		if (name[3] == '\0' ||
			strspn(name + 3, "abcdefghijklmnopqrstuvwxyz0123456789") != strlen(name + 3))
			return psprintf("The header \"%s\" names no CloudEvents attribute: their names are lower-case ASCII letters and digits, after ce_.",
							name);
		if (*value == '\0')
			return psprintf("The header \"%s\" is empty: CloudEvents attributes are not.", name);
		if ((problem = string_problem(psprintf("The header \"%s\"", name),
														 value)) != NULL)
			return problem;
		if (strcmp(name, "ce_dataschema") == 0 &&
			(problem = absolute_uri_problem(value)) != NULL)
			return psprintf("The header \"ce_dataschema\" is not a URI. %s", problem);
	}
	return NULL;
}

/*
 * The key of ev (unpacked) as its partitionkey, a CloudEvents String, or
 * NULL if it has none or it is not one (bytes, empty).
 */
static char *
partition_key(const OutboxEvent *ev)
{
	char	   *key;

	if (ev->key == NULL || ev->key_base64 || ev->key_len == 0)
		return NULL;
	key = pnstrdup(ev->key, ev->key_len);
	return strlen(key) == ev->key_len && string_problem("The key", key) == NULL ? key : NULL;
}

/*
 * The most bytes that the format adds to a record of topic, by what
 * outbox.max_message_bytes counts; key_len < 0: no key.
 */
static int
made_bytes(const char *topic, const char *source, bool json, int key_len)
{
	int			bytes = 5 * OUTBOX_HEADER_OVERHEAD;

	bytes += strlen("ce_specversion") + strlen("1.0");
	bytes += strlen("ce_id") + UUID_TEXT_LEN;
	bytes += strlen("ce_source") + strlen(source);
	bytes += strlen("ce_time") + RFC3339_LEN;
	bytes += strlen("ce_type") + strlen(topic);
	if (key_len >= 0)
		bytes += OUTBOX_HEADER_OVERHEAD + strlen("ce_partitionkey") + key_len;
	if (json)
		bytes += OUTBOX_HEADER_OVERHEAD + strlen("content-type") +
			strlen(JSON_CONTENT_TYPE);
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
static void
make_headers(OutboxEvent *ev, const char *source)
{
	int			size = ev->nheaders + 6;
	char	  **names = palloc(sizeof(char *) * size);
	char	  **values = palloc(sizeof(char *) * size);
	char	   *time = palloc(RFC3339_LEN + 1);
	char	   *key = partition_key(ev);
	bool		typed = false;
	int			n = 0;

	Assert(ev->payload != NULL);
	for (int i = 0; i < ev->nheaders; i++)
	{
		typed |= strcmp(ev->header_names[i], "ce_type") == 0;
		if (strcmp(ev->header_names[i], "ce_partitionkey") == 0)
			key = NULL;			/* given, and the key: sent once */
	}

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
	if (key != NULL)
	{
		names[n] = "ce_partitionkey";
		values[n++] = key;
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

/*
 * Raise an error unless source can be a CloudEvents source: a URI
 * reference (RFC 3986), not empty.
 */
static void
check_source(const char *source)
{
	const char *problem = *source == '\0' ? "It is empty." :
		uri_reference_problem(source);

	if (problem != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid cloudevents_source \"%s\"", source),
				 errdetail("%s", problem),
				 errhint("A CloudEvents source is a URI reference (RFC 3986), not empty, such as \"/orders\" or \"https://shop.example/orders\"; other characters are written with %%.")));
}

/*
 * The source of a topic of format cloudevents, as outbox_set_topic is
 * given it: there, and a URI reference.  See OutboxFormat.check_topic.
 */
static void
cloudevents_check_topic(OutboxTopicSetting *setting)
{
	if (setting->cloudevents_source == NULL)
		outbox_format_conflict(setting, "Format cloudevents needs a cloudevents_source, the ce_source of its events.");
	check_source(setting->cloudevents_source);
}

/*
 * headers (NULL for none) with content-type application/json added, for a
 * JSON payload.
 */
static Jsonb *
with_json_content_type(Jsonb *headers)
{
	Jsonb	   *content_type;

	content_type = DatumGetJsonbP(DirectFunctionCall1(jsonb_in,
													  CStringGetDatum("{\"content-type\": \"" JSON_CONTENT_TYPE "\"}")));
	if (headers == NULL)
		return content_type;
	return DatumGetJsonbP(DirectFunctionCall2(jsonb_concat, JsonbPGetDatum(headers),
											  JsonbPGetDatum(content_type)));
}

/*
 * Refuse headers that contradict the format, on an event that is no
 * tombstone (a tombstone is no CloudEvent: the format leaves it alone),
 * and record content-type application/json for a JSON payload.  See
 * OutboxFormat.check_event.
 */
static int
cloudevents_check_event(const OutboxTopicSetting *setting, const char *topic,
						const OutboxEvent *ev, bool payload, bool json, Jsonb **headers)
{
	const char *problem;
	const char *hint;

	if (!payload)
		return 0;
	if (ev->key != NULL && !ev->key_base64 && partition_key(ev) == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid event key for format cloudevents"),
				 errdetail("The key is the event's partitionkey, a CloudEvents String: not empty, with no control character and no Unicode noncharacter."),
				 errcontext("topic %s", topic)));
	if ((problem = headers_problem(ev, json, false, &hint)) != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid event headers for format cloudevents"),
				 errdetail("%s", problem),
				 hint ? errhint("%s", hint) : 0,
				 errcontext("topic %s", topic)));
	if (json)
		*headers = with_json_content_type(*headers);
	return made_bytes(topic, setting->cloudevents_source, json,
					  ev->key != NULL ? ev->key_len : -1);
}

/*
 * Give ev the headers of its topic's format, unless it is a tombstone; an
 * event whose stored headers the format refuses (stored before its topic
 * took the format, unchecked: a control character, a content-type of the
 * structured mode) is refused for good.  See OutboxFormat.prepare.
 */
static void
cloudevents_prepare(const OutboxTopicSetting *setting, OutboxEvent *ev)
{
	const char *problem;
	const char *hint;

	if (ev->payload == NULL)
		return;
	/* one stored before its topic took the format: its headers unchecked */
	if ((problem = headers_problem(ev, false, true, &hint)) != NULL)
	{
		ev->outcome = OUTBOX_REFUSED;
		ev->error = psprintf("Its headers cannot be those of a record of format cloudevents: %s",
							 problem);
		ev->permanent = true;
		return;
	}
	make_headers(ev, setting->cloudevents_source);
}

const OutboxFormat outbox_cloudevents_format = {
	.name = "cloudevents",
	.settings = FORMAT_SOURCE,
	.check_topic = cloudevents_check_topic,
	.check_event = cloudevents_check_event,
	.prepare = cloudevents_prepare,
};
