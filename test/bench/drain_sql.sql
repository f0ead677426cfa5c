-- The worker's statements for one batch of 1000, without Kafka: the claim,
-- then the record of the deliveries (the partition and offset made up).
BEGIN;
SELECT outbox_mark_published(ids, array_fill(0, ARRAY[cardinality(ids)]), ids, :keep)
  FROM (SELECT array_agg(id ORDER BY id) AS ids FROM outbox_claim(1000)) s
 WHERE ids IS NOT NULL;
END;
