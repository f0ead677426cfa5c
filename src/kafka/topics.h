/*-------------------------------------------------------------------------
 *
 * topics.h
 *		The settings of topics (outbox_topic_settings): which cluster a
 *		topic's events go to, by the longest pattern that matches it.
 *
 * src/kafka/topics.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef OUTBOX_TOPICS_H
#define OUTBOX_TOPICS_H

#include "base/catalog.h"

/* one row of outbox_topic_settings; NULL: the outbox.* setting */
typedef struct OutboxTopicSetting
{
	char	   *pattern;		/* a topic, or a prefix and '*' */
	char	   *brokers;
	char	   *properties_file;
} OutboxTopicSetting;

typedef struct OutboxTopicSettings
{
	int			count;
	OutboxTopicSetting *rows;
} OutboxTopicSettings;

extern OutboxTopicSettings *outbox_topic_settings_load(const OutboxExtension *ext);
extern const OutboxTopicSetting *outbox_topic_setting(const OutboxTopicSettings *settings,
													  const char *topic);

#endif							/* OUTBOX_TOPICS_H */
