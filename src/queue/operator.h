/*-------------------------------------------------------------------------
 *
 * operator.h
 *		What an operator does to events by hand.
 *
 * src/queue/operator.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef OUTBOX_OPERATOR_H
#define OUTBOX_OPERATOR_H

#include "base/catalog.h"

extern int64 outbox_undelivered(const OutboxExtension *ext);

#endif							/* OUTBOX_OPERATOR_H */
