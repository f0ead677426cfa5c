/*-------------------------------------------------------------------------
 *
 * worker.h
 *		The publishing worker of one database.
 *
 * src/worker/worker.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef OUTBOX_WORKER_H
#define OUTBOX_WORKER_H

extern PGDLLEXPORT void outbox_worker_main(Datum main_arg);

#endif							/* OUTBOX_WORKER_H */
