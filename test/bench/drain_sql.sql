-- The worker's statements for one batch of 1000, without Kafka: the claim,
-- then the record of the deliveries with what the claim returned
-- (created_at stands in for the enqueue time, which the worker reads from
-- the log row and outbox_claim() does not return).
SELECT outbox_mark_logged(ids, array_fill(0, ARRAY[cardinality(ids)]), ids, topics,
						  array_fill(now(), ARRAY[cardinality(ids)]), :keep)
  FROM (SELECT array_agg(id ORDER BY id) AS ids, array_agg(topic ORDER BY id) AS topics
		  FROM outbox_claim(1000)) s
 WHERE ids IS NOT NULL;
