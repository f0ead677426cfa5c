/*-------------------------------------------------------------------------
 *
 * outbox.c
 *		Entry point of the outbox extension: module magic and _PG_init.
 *
 * Loaded on demand (the first outbox_enqueue of a session), the library
 * only defines its settings and the commit callback that wakes the worker.
 * Loaded through shared_preload_libraries, it also reserves shared memory,
 * hooks DROP DATABASE and registers the launcher of the publishing worker.
 *
 * src/outbox.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"

#include "outbox.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

/*
 * Module load callback.
 */
void
_PG_init(void)
{
	outbox_define_gucs();
	outbox_register_xact_callback();

	if (!process_shared_preload_libraries_in_progress)
		return;

	outbox_shmem_install_hooks();
	outbox_install_utility_hook();
	outbox_register_launcher();
}
