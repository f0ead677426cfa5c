/*-------------------------------------------------------------------------
 *
 * properties.h
 *		The librdkafka properties that outbox allows: the settings
 *		outbox.kafka_properties and outbox.kafka_properties_file, and the
 *		checks of both.
 *
 * src/kafka/properties.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef OUTBOX_PROPERTIES_H
#define OUTBOX_PROPERTIES_H

#include <sys/types.h>
#include <time.h>

#include "nodes/pg_list.h"

/* librdkafka's rd_kafka_conf_t, for the files that include librdkafka */
struct rd_kafka_conf_s;

extern char *outbox_kafka_properties;
extern char *outbox_kafka_properties_file;
extern char *outbox_schema_registry_url;

/* why Kafka properties are refused, for an ereport; never their values */
typedef struct OutboxPropertyError
{
	char		message[MAXPGPATH + 256];
	char		detail[512];
	const char *hint;			/* a constant, or NULL */
	bool		missing;		/* the properties file does not exist */
} OutboxPropertyError;

/* what identifies the contents of a properties file that was read */
typedef struct OutboxFileVersion
{
	bool		exists;
	dev_t		dev;
	ino_t		ino;
	off_t		size;
	struct timespec mtime;
	struct timespec ctime;
} OutboxFileVersion;

extern void outbox_kafka_define_gucs(void);
extern const char *outbox_kafka_path_problem(const char *path);
extern bool outbox_kafka_read_file(const char *path, List **lines,
								   OutboxFileVersion *version,
								   OutboxPropertyError *error);
extern bool outbox_kafka_apply_property_list(struct rd_kafka_conf_s *conf,
											 const char *properties,
											 bool secrets_allowed,
											 OutboxPropertyError *error);
extern bool outbox_kafka_apply_property_file(struct rd_kafka_conf_s *conf,
											 const char *path,
											 OutboxFileVersion *version,
											 OutboxPropertyError *error);
extern bool outbox_kafka_check_properties(const char *properties,
										  bool secrets_allowed,
										  OutboxPropertyError *error);
extern bool outbox_kafka_check_properties_file(const char *path,
											   OutboxPropertyError *error);
extern void outbox_kafka_file_version(const char *path, OutboxFileVersion *version);
extern bool outbox_kafka_registry_in_clear(const char *url, const char *path);
extern void outbox_kafka_warn_registry_in_clear(const char *url);
extern bool outbox_kafka_same_file_version(const OutboxFileVersion *a,
										   const OutboxFileVersion *b);

#endif							/* OUTBOX_PROPERTIES_H */
