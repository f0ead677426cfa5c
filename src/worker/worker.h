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

/* what the launcher passes a worker it starts, in bgw_extra */
typedef struct OutboxWorkerArgs
{
	Oid			database;
	Oid			owner;			/* InvalidOid: look the owner up */
} OutboxWorkerArgs;

extern PGDLLEXPORT void outbox_worker_main(Datum main_arg);

#endif							/* OUTBOX_WORKER_H */
