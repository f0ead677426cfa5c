/*-------------------------------------------------------------------------
 *
 * launcher.h
 *		The launcher of the publishing workers, and what other processes
 *		ask of it: wake a database's worker, start it again, leave a
 *		database alone for a while.
 *
 * src/launcher/launcher.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef OUTBOX_LAUNCHER_H
#define OUTBOX_LAUNCHER_H

#include "access/xact.h"

/*
 * What DROP DATABASE is told of a database's events that are not delivered
 * (outbox_launcher_undelivered): docs/design.md, "The hooks of every
 * backend".
 */
typedef enum OutboxUndelivered
{
	OUTBOX_UNDELIVERED_NONE,	/* none: its worker counted, or its extension
								 * was created, and nothing came since */
	OUTBOX_UNDELIVERED_SOME,	/* its worker found some when it last looked */
	OUTBOX_UNDELIVERED_MAYBE,	/* a transaction may have added some since */
	OUTBOX_UNDELIVERED_UNKNOWN	/* no worker has looked since it got its slot */
} OutboxUndelivered;

/* is the launcher's shared memory there (the library preloaded)? */
extern bool outbox_launcher_exists(void);

extern void outbox_launcher_shmem_init(void);
extern void outbox_launcher_register(void);
extern PGDLLEXPORT void outbox_launcher_main(Datum main_arg);

/* asked by backends */
extern void outbox_launcher_wake_worker(Oid dboid);
extern void outbox_launcher_restart_workers(Oid dboid, Oid roleid);
extern void outbox_launcher_extension_created(Oid dboid);
extern void outbox_launcher_check_room(void);
extern void outbox_launcher_hold_database(Oid dboid, bool hold);
extern int	outbox_launcher_current_log(Oid dboid);
extern void outbox_launcher_note_restore(Oid dboid);
extern OutboxUndelivered outbox_launcher_undelivered(Oid dboid);
extern uint64 outbox_launcher_some_undelivered(Oid dboid, bool say);
extern void outbox_launcher_none_undelivered(Oid dboid, uint64 seen);

/* asked by backends of the current transaction, done at its commit */
extern void outbox_wake_at_commit(void);
extern void outbox_none_undelivered_at_commit(void);
extern void outbox_launcher_extension_born(Oid dboid);
extern void outbox_launcher_at_eoxact(XactEvent event);

#endif							/* OUTBOX_LAUNCHER_H */
