/*-------------------------------------------------------------------------
 *
 * standby.h
 *		Publish only what the standbys of outbox.standby_slots have.
 *
 * src/worker/standby.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef OUTBOX_STANDBY_H
#define OUTBOX_STANDBY_H

#include "access/xlogdefs.h"

extern bool outbox_standbys_have(XLogRecPtr target, long max_ms, char **reason);

#endif							/* OUTBOX_STANDBY_H */
