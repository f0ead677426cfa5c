/*-------------------------------------------------------------------------
 *
 * utility.h
 *		What every backend does for the launcher, the workers and the
 *		extension's safety: the ProcessUtility and post-parse-analyze hooks,
 *		and the end-of-transaction callback that wakes or restarts workers
 *		at commit.
 *
 * src/queue/utility.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef OUTBOX_UTILITY_H
#define OUTBOX_UTILITY_H

extern void outbox_utility_init(bool preloaded);

#endif							/* OUTBOX_UTILITY_H */
