/*-------------------------------------------------------------------------
 *
 * outbox.c
 *		Entry point of the outbox extension: module magic and _PG_init.
 *
 * Loaded on demand (the first outbox_enqueue of a session), the library
 * only defines its settings and the end-of-transaction callback that wakes
 * the worker.  Loaded through shared_preload_libraries, it also reserves
 * the launcher's shared memory, installs the hooks every backend runs and
 * registers the launcher of the publishing workers.
 *
 * src/outbox.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "utils/guc.h"

#include "base/guc.h"
#include "kafka/properties.h"
#include "launcher/launcher.h"
#include "queue/utility.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

/*
 * Module load callback.
 */
void
_PG_init(void)
{
	bool		preloaded = process_shared_preload_libraries_in_progress;

	outbox_define_gucs();
	outbox_kafka_define_gucs();
	MarkGUCPrefixReserved("outbox");
	outbox_utility_init(preloaded);
	if (!preloaded)
		return;
	outbox_launcher_shmem_init();
	outbox_launcher_register();
}
