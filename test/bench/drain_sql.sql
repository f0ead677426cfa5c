SELECT outbox_mark_published(ids, array_fill(0, ARRAY[cardinality(ids)]), ids, :keep)
  FROM (SELECT array_agg(id) AS ids FROM outbox_claim(1000)) s
 WHERE ids IS NOT NULL;
