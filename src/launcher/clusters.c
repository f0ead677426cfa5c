/*-------------------------------------------------------------------------
 *
 * clusters.c
 *		The status of the Kafka clusters a worker publishes to, as
 *		outbox_cluster_status() shows it: in a dynamic shared memory
 *		segment of the worker's, sized to its clusters, whose handle its
 *		slot holds.  However many clusters a worker has, every one shows.
 *
 * The worker is the segment's only writer.  It bumps the segment's change
 * count before and after each write, as a backend writes its entry of
 * pg_stat_activity; a reader copies the segment and keeps the copy only if
 * the count was even, and the same, before and after.  A segment too small
 * for the clusters is replaced by a larger one: the slot names the new one,
 * under the slot's lock, before the worker detaches the old one, so that a
 * reader that attached the old one reads it whole, and one that finds it
 * gone looks at the slot again.
 *
 * src/launcher/clusters.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/dsm.h"

#include "launcher/launcher_internal.h"

/* "obxc": a segment of this file's, not another's that took its handle */
#define CLUSTERS_MAGIC 0x6f627863

/* one cluster; its strings are offsets from the start of the segment */
typedef struct ClusterEntry
{
	bool		open;
	bool		reachable;
	int			brokers_up;
	TimestampTz state_since;
	int64		published;
	int64		failed;
	Size		brokers;
	Size		properties_file;
} ClusterEntry;

typedef struct ClusterSegment
{
	uint32		magic;
	pid_t		pid;			/* the worker that writes it */
	pg_atomic_uint32 changes;	/* odd while the worker writes */
	int			count;
	ClusterEntry entries[FLEXIBLE_ARRAY_MEMBER];
	/* then the strings */
} ClusterSegment;

/* the worker's segment, NULL until it has clusters to show */
static dsm_segment *segment = NULL;

/*
 * A new segment for the worker, of at least size bytes, or NULL if the
 * server has no dynamic shared memory segment left.  Its mapping lasts
 * until the worker exits.
 */
static dsm_segment *
new_segment(Size size)
{
	dsm_segment *seg = dsm_create(size, DSM_CREATE_NULL_IF_MAXSEGMENTS);
	ClusterSegment *shared;

	if (seg == NULL)
		return NULL;
	dsm_pin_mapping(seg);
	shared = dsm_segment_address(seg);
	shared->magic = CLUSTERS_MAGIC;
	shared->pid = MyProcPid;
	pg_atomic_init_u32(&shared->changes, 0);
	shared->count = 0;
	return seg;
}

/*
 * Show the n clusters of the calling worker in its slot, replacing what it
 * showed before.  The clusters go in the order given, as many as fit: all
 * of them, unless the segment could not grow (the server is out of dynamic
 * shared memory segments, which it says in the log), so the caller puts
 * first the ones that must show.  The caller holds no lock.
 */
void
outbox_slot_show_clusters(OutboxWorkerSlot *slot, const OutboxProducerStatus *clusters,
						  int n)
{
	static bool said_full = false;
	Size		need = offsetof(ClusterSegment, entries);
	Size		limit;
	Size		offset;
	dsm_segment *old = NULL;
	bool		replaced = false;
	ClusterSegment *shared;
	int			shown;

	if (segment == NULL && n == 0)
		return;
	for (int i = 0; i < n; i++)
		need += sizeof(ClusterEntry) + strlen(clusters[i].cluster.brokers) + 1 +
			strlen(clusters[i].cluster.properties_file) + 1;
	if (segment == NULL || need > dsm_segment_map_length(segment))
	{
		dsm_segment *grown = new_segment(need * 2);

		if (grown != NULL)
		{
			old = segment;
			segment = grown;
			replaced = true;
		}
		else if (!said_full)
			ereport(LOG,
					(errmsg("outbox_cluster_status() cannot show every Kafka cluster of this worker"),
					 errdetail("The server has no dynamic shared memory segment left to show them in; the unreachable ones show first.")));
		said_full = grown == NULL;
		if (segment == NULL)
			return;
	}

	/* as many as fit, from the first */
	limit = dsm_segment_map_length(segment);
	offset = offsetof(ClusterSegment, entries);
	for (shown = 0; shown < n; shown++)
	{
		Size		more = sizeof(ClusterEntry) + strlen(clusters[shown].cluster.brokers) + 1 +
			strlen(clusters[shown].cluster.properties_file) + 1;

		if (offset + more > limit)
			break;
		offset += more;
	}

	shared = dsm_segment_address(segment);
	pg_atomic_write_u32(&shared->changes, pg_atomic_read_u32(&shared->changes) + 1);
	pg_write_barrier();
	offset = offsetof(ClusterSegment, entries) + shown * sizeof(ClusterEntry);
	for (int i = 0; i < shown; i++)
	{
		const OutboxProducerStatus *cluster = &clusters[i];
		ClusterEntry *entry = &shared->entries[i];

		entry->open = cluster->open;
		entry->reachable = cluster->reachable;
		entry->brokers_up = cluster->brokers_up;
		entry->state_since = cluster->state_since;
		entry->published = cluster->published;
		entry->failed = cluster->failed;
		entry->brokers = offset;
		strcpy((char *) shared + offset, cluster->cluster.brokers);
		offset += strlen(cluster->cluster.brokers) + 1;
		entry->properties_file = offset;
		strcpy((char *) shared + offset, cluster->cluster.properties_file);
		offset += strlen(cluster->cluster.properties_file) + 1;
	}
	shared->count = shown;
	pg_write_barrier();
	pg_atomic_write_u32(&shared->changes, pg_atomic_read_u32(&shared->changes) + 1);

	if (replaced)
	{
		outbox_slot_lock();
		slot->clusters = dsm_segment_handle(segment);
		outbox_slot_unlock();
		if (old != NULL)
			dsm_detach(old);
	}
}

/*
 * Is offset the start of a string inside the copy of size bytes?
 */
static bool
string_inside(const char *copy, Size size, Size offset)
{
	return offset < size && memchr(copy + offset, '\0', size - offset) != NULL;
}

/*
 * The clusters that the worker pid of slot shows, in a copy in the current
 * memory context (*n of them; none if it shows none, or has exited).  The
 * caller holds no lock.
 */
OutboxProducerStatus *
outbox_slot_clusters(OutboxWorkerSlot *slot, pid_t pid, int *n)
{
	dsm_handle	tried = DSM_HANDLE_INVALID;
	dsm_segment *seg;
	const ClusterSegment *shared;
	ClusterSegment *copy;
	OutboxProducerStatus *clusters;
	Size		size;

	*n = 0;
	for (;;)
	{
		dsm_handle	handle;

		outbox_slot_lock();
		handle = slot->pid == pid ? slot->clusters : DSM_HANDLE_INVALID;
		outbox_slot_unlock();
		/* none, or gone: the worker exited */
		if (handle == DSM_HANDLE_INVALID || handle == tried)
			return NULL;
		if ((seg = dsm_attach(handle)) != NULL)
			break;
		/* replaced since the slot was read: read it again */
		tried = handle;
	}

	shared = dsm_segment_address(seg);
	size = dsm_segment_map_length(seg);
	if (size < offsetof(ClusterSegment, entries) ||
		shared->magic != CLUSTERS_MAGIC || shared->pid != pid)
	{
		dsm_detach(seg);
		return NULL;
	}
	copy = palloc(size);
	for (;;)
	{
		uint32		before = pg_atomic_read_u32(&((ClusterSegment *) shared)->changes);

		pg_read_barrier();
		memcpy(copy, shared, size);
		pg_read_barrier();
		if (before % 2 == 0 &&
			before == pg_atomic_read_u32(&((ClusterSegment *) shared)->changes))
			break;
		CHECK_FOR_INTERRUPTS();
	}
	dsm_detach(seg);

	if (copy->count < 0 ||
		(Size) copy->count > (size - offsetof(ClusterSegment, entries)) / sizeof(ClusterEntry))
		return NULL;
	clusters = palloc(sizeof(OutboxProducerStatus) * (copy->count + 1));
	for (int i = 0; i < copy->count; i++)
	{
		const ClusterEntry *entry = &copy->entries[i];

		if (!string_inside((char *) copy, size, entry->brokers) ||
			!string_inside((char *) copy, size, entry->properties_file))
			return NULL;
		clusters[i].cluster.brokers = (char *) copy + entry->brokers;
		clusters[i].cluster.properties_file = (char *) copy + entry->properties_file;
		clusters[i].open = entry->open;
		clusters[i].reachable = entry->reachable;
		clusters[i].state_since = entry->state_since;
		clusters[i].brokers_up = entry->brokers_up;
		clusters[i].published = entry->published;
		clusters[i].failed = entry->failed;
	}
	*n = copy->count;
	return clusters;
}

/*
 * Show the producers of the calling worker in its slot: each cluster, the
 * unreachable ones first (see outbox_slot_show_clusters), and the broker
 * connections up, the brokers of several producers (properties files)
 * counted once (-1 if none is open).  The caller holds no lock.
 */
void
outbox_slot_show_producers(OutboxWorkerSlot *slot)
{
	List	   *producers = outbox_kafka_producers();
	OutboxProducerStatus *clusters = palloc(sizeof(OutboxProducerStatus) *
											(list_length(producers) + 1));
	int			n = 0;
	int			brokers_up = -1;
	ListCell   *lc;

	foreach(lc, producers)
	{
		OutboxProducerStatus status;

		outbox_kafka_status(lfirst(lc), &status);
		if (status.open && !status.reachable)
		{
			memmove(&clusters[1], &clusters[0], sizeof(OutboxProducerStatus) * n);
			clusters[0] = status;
		}
		else
			clusters[n] = status;
		n++;
	}
	/* of the producers of the same brokers, the one with most up counts */
	for (int i = 0; i < n; i++)
	{
		bool		skip = clusters[i].brokers_up < 0;

		for (int j = 0; j < n && !skip; j++)
			skip = j != i && strcmp(clusters[j].cluster.brokers, clusters[i].cluster.brokers) == 0 &&
				(clusters[j].brokers_up > clusters[i].brokers_up ||
				 (clusters[j].brokers_up == clusters[i].brokers_up && j < i));
		if (!skip)
			brokers_up = Max(brokers_up, 0) + clusters[i].brokers_up;
	}
	outbox_slot_show_clusters(slot, clusters, n);
	pfree(clusters);
	outbox_slot_lock();
	slot->brokers_up = brokers_up;
	outbox_slot_unlock();
}
