/*-------------------------------------------------------------------------
 *
 * topics.h
 *		The settings of topics (outbox_topic_settings): which cluster a
 *		topic's events go to, by the longest pattern that matches it.
 *
 * src/format/topics.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef OUTBOX_TOPICS_H
#define OUTBOX_TOPICS_H

#include "base/catalog.h"
#include "kafka/kafka.h"

struct OutboxFormat;

/* one row of outbox_topic_settings; NULL: the outbox.* setting */
typedef struct OutboxTopicSetting
{
	char	   *pattern;		/* a topic, or a prefix and '*' */
	OutboxCluster cluster;
	const struct OutboxFormat *format;	/* src/format/format.h; NULL: the
										 * payload as given */
	char	   *value_schema;	/* avro: the schemas, as JSON text */
	char	   *key_schema;
	int32		value_schema_id;	/* avro: their registry ids; 0: none */
	int32		key_schema_id;
	char	   *cloudevents_source; /* cloudevents: ce_source */
} OutboxTopicSetting;

typedef struct OutboxTopicSettings
{
	int			count;
	OutboxTopicSetting *rows;
} OutboxTopicSettings;

extern OutboxTopicSettings *outbox_topic_settings_load(const OutboxExtension *ext);
extern const OutboxTopicSetting *outbox_topic_setting(const OutboxTopicSettings *settings,
													  const char *topic);
extern const OutboxTopicSetting *outbox_topic_setting_to_enqueue(const OutboxExtension *ext,
																 const char *topic);

#endif							/* OUTBOX_TOPICS_H */
