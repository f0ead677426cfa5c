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
extern int	outbox_launcher_undelivered(Oid dboid);
extern uint64 outbox_launcher_some_undelivered(Oid dboid, bool say);
extern void outbox_launcher_none_undelivered(Oid dboid, uint64 seen);

/* asked by backends of the current transaction, done at its commit */
extern void outbox_wake_at_commit(void);
extern void outbox_none_undelivered_at_commit(void);
extern void outbox_launcher_at_eoxact(XactEvent event);

#endif							/* OUTBOX_LAUNCHER_H */
