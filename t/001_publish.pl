
# Publishing: what arrives in Kafka is exactly what was committed, in order
# per key, and a commit wakes the worker at once.

use strict;
use warnings;

use OutboxTest;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

# an hour-long poll interval: only the commit wakeup can explain a delivery
my ($node, $broker) =
  outbox_node_with_broker('publish', 'outbox.poll_interval' => '1h');

ok( wait_for_sql($node,
		"SELECT count(*) = 2 FROM pg_stat_activity WHERE backend_type IN ('outbox launcher', 'outbox worker')"
	),
	'the launcher and the worker show in pg_stat_activity');

# --- fidelity: every payload type, tombstone, headers, event_id, offsets
$node->safe_psql(
	'postgres', q{
	BEGIN;
	SELECT outbox_enqueue('fidelity', '{"b": 1, "a": "é"}'::jsonb, key => 'k1',
						  headers => '{"trace": "t-1", "source": "tap"}');
	SELECT outbox_enqueue('fidelity', 'plain é'::text, key => 'k1');
	SELECT outbox_enqueue('fidelity', '\x00ff0a41'::bytea, key => 'k1');
	SELECT outbox_enqueue('fidelity', NULL::jsonb, key => 'k1');
	SELECT outbox_enqueue('fidelity', 'no key'::text);
	COMMIT;
});
my $records = wait_for_records($broker, 'fidelity', 5);
is(scalar @$records, 5, 'five records arrived');
# (the worker records the outcomes once the broker has acknowledged them)
ok(all_published($node, 'fidelity'), 'and are recorded as published');

my @rows = map { [ split /\|/ ] } split /\n/,
  $node->safe_psql('postgres',
	"SELECT id, event_id, status, kafka_partition, kafka_offset, attempts FROM outbox_messages WHERE topic = 'fidelity' ORDER BY id"
  );
my %by_event = map { $_->{headers}{event_id} => $_ } @$records;
is_deeply(
	[ map { $_->[2] } @rows ],
	[ ('published') x 5 ],
	'every row is published');
is_deeply([ map { $_->[5] } @rows ], [ (1) x 5 ], 'after one attempt each');
is(scalar(grep { exists $by_event{ $_->[1] } } @rows),
	5, 'every record carries its row\'s event_id header');
is( scalar(
		grep {
			my $r = $by_event{ $_->[1] };
			$r && $r->{partition} == $_->[3] && $r->{offset} == $_->[4]
		} @rows),
	5,
	'partition and offset recorded as Kafka assigned them');

my @k1 = map { $by_event{ $_->[1] } } @rows[ 0 .. 3 ];
is($k1[0]{payload}, '{"a": "é", "b": 1}', 'jsonb: its canonical text');
is($k1[0]{key}, 'k1', 'the key');
is($k1[0]{headers}{trace}, 't-1', 'header trace');
is($k1[0]{headers}{source}, 'tap', 'header source');
is($k1[1]{payload}, 'plain é', 'text: its UTF-8 bytes');
is($k1[2]{payload}, "\x00\xff\x0a\x41", 'bytea: the bytes as given');
is($k1[3]{payload}, undef, 'a NULL payload is a tombstone');
ok( $k1[0]{offset} < $k1[1]{offset}
	  && $k1[1]{offset} < $k1[2]{offset}
	  && $k1[2]{offset} < $k1[3]{offset},
	'one key, one partition, in enqueue order');
is($by_event{ $rows[4][1] }{key}, undef, 'an event without key has no key');

# --- rolled back events never exist
$node->safe_psql(
	'postgres', q{
	BEGIN;
	SELECT outbox_enqueue('tx', 'rolled back'::text);
	ROLLBACK;
	BEGIN;
	SELECT outbox_enqueue('tx', 'kept 1'::text, key => 'k');
	SAVEPOINT s;
	SELECT outbox_enqueue('tx', 'rolled back to savepoint'::text, key => 'k');
	ROLLBACK TO SAVEPOINT s;
	SELECT outbox_enqueue('tx', 'kept 2'::text, key => 'k');
	COMMIT;
	BEGIN;
	SELECT outbox_enqueue('tx', 'rolled back too'::text, key => 'k');
	ROLLBACK;
	SELECT outbox_enqueue('tx', 'kept 3'::text, key => 'k');
});
ok( wait_for_sql(
		$node,
		"SELECT count(*) = 3 FROM outbox_messages WHERE topic = 'tx' AND status = 'published'"
	),
	'the committed events are published');
$records = kafka_read($broker, 'tx');
is_deeply(
	[ map { $_->{payload} } @$records ],
	[ 'kept 1', 'kept 2', 'kept 3' ],
	'exactly the committed events arrived, in order');

# --- order per key over thousands of events, enqueued while publishing
for my $t (0 .. 29)
{
	$node->safe_psql(
		'postgres', qq{
		SELECT outbox_enqueue('ordered', (json_build_object('seq', $t * 100 + i))::jsonb,
							  key => 'key-' || (i % 17))
		  FROM generate_series(0, 99) i;
	});
}
ok( wait_for_sql(
		$node,
		"SELECT count(*) = 3000 FROM outbox_messages WHERE topic = 'ordered' AND status = 'published'"
	),
	'3000 events published');
$records = kafka_read($broker, 'ordered');
my (%last, %partition_of, $out_of_order, %seen);
for my $r (@$records)
{
	my ($seq) = $r->{payload} =~ /"seq": (\d+)/;
	$seen{$seq}++;
	$out_of_order++ if defined $last{ $r->{key} } && $seq <= $last{ $r->{key} };
	$last{ $r->{key} } = $seq;
	$partition_of{ $r->{key} }{ $r->{partition} } = 1;
}
is(scalar keys %seen, 3000, 'every event arrived');
is($out_of_order // 0, 0, 'in enqueue order within each key');
is(scalar(grep { keys %{ $partition_of{$_} } > 1 } keys %partition_of),
	0, 'each key stays on one partition');

# --- wakeup: with a one-hour poll interval, each commit is delivered at once
my $slow = 0;
for my $i (1 .. 20)
{
	$node->safe_psql('postgres',
		"SELECT outbox_enqueue('latency', 'ping $i'::text)");
	$slow++
	  unless wait_for_sql(
		$node,
		"SELECT bool_and(status = 'published') FROM outbox_messages WHERE topic = 'latency'",
		20);
	usleep(50_000);
}
is($slow, 0, 'each lone event published within seconds of its commit, not after the 1h poll');

# --- commits that come slower than two a wake_delay are each
# published at once, in a batch of their own: a wait would add its length
# to each and gather next to nothing.  At a wake_delay of 1 s, commits 600
# ms apart: a worker that let the commits of every wake_delay gather put
# two in most batches.
reconfigure($node, "SET outbox.wake_delay = '1s'");
for my $i (1 .. 6)
{
	$node->safe_psql('postgres', "SELECT outbox_enqueue('lone', 'lone $i'::text)");
	usleep(600_000);
}
ok( wait_for_sql(
		$node,
		"SELECT count(*) = 6 AND bool_and(status = 'published') FROM outbox_messages WHERE topic = 'lone'"
	),
	'lone commits are published');
is( $node->safe_psql(
		'postgres', q{
		SELECT count(*) FROM outbox_ledger g
		 WHERE g.ids && (SELECT array_agg(id) FROM outbox_messages WHERE topic = 'lone')}),
	6,
	'slow commits are not made to wait for each other: a batch each');

# --- a stream of commits, each enqueuing one event, as fast as one
# session commits (tens of thousands a second): every one is published, in
# order per key.
# - The claim takes as running only the transactions its snapshot does,
#   where the xids of its whole read, each drained by a scan of its own,
#   made the next claim slower and the set larger until the worker stalled.
# - Below the worker's pace (batches never full), the events of a
#   wake_delay share a batch: at 200 ms, about ten in 2 s, where batches
#   back to back, each with the commits of one turn, were hundreds.  The
#   first commits of a stream after a quiet while are published without
#   waiting, until the worker has counted enough of them to know their
#   pace (about 64): the batches of those are not counted.
reconfigure($node, "SET outbox.wake_delay = '200ms'", 'SET outbox.batch_size = 100000');
my $elapsed_ms = $node->safe_psql(
	'postgres', q{
	DO $$
	DECLARE
		start timestamptz := clock_timestamp();
		i int := 0;
	BEGIN
		WHILE clock_timestamp() < start + interval '2 s' LOOP
			PERFORM outbox_enqueue('stream', json_build_object('seq', i)::jsonb,
								   key => 'key-' || (i % 7));
			COMMIT;
			i := i + 1;
		END LOOP;
		PERFORM set_config('stream.ms', (1000 * extract(epoch FROM clock_timestamp() - start))::text, false);
	END
	$$;
	SELECT current_setting('stream.ms');
});
ok( wait_for_sql(
		$node,
		"SELECT bool_and(status = 'published') FROM outbox_messages WHERE topic = 'stream'"),
	'a stream of commits is published');
my ($events, $batches, $running) = split /\|/, $node->safe_psql(
	'postgres', q{
	SELECT count(*),
		   (SELECT count(*) FROM outbox_ledger g
			 WHERE g.ids && (SELECT array_agg(id) FROM
							  (SELECT id FROM outbox_messages WHERE topic = 'stream'
								ORDER BY id OFFSET 64) paced)),
		   (SELECT cardinality(running) FROM outbox_reader)
	  FROM outbox_messages WHERE topic = 'stream'});
my (%seq_of, $stream_out_of_order);
for my $r (@{ kafka_read($broker, 'stream') })
{
	my ($seq) = $r->{payload} =~ /"seq": (\d+)/;
	$stream_out_of_order++ if defined $seq_of{ $r->{key} } && $seq <= $seq_of{ $r->{key} };
	$seq_of{ $r->{key} } = $seq;
}
is($stream_out_of_order // 0, 0, 'in order within each key');
ok($running < 100, "the claim holds few transactions as running ($running)");
my $bound = int($elapsed_ms / 200) + 3;
ok($events > 100 * $bound, "many commits ($events in $elapsed_ms ms)");
ok($batches <= $bound, "past its first 64, in batches 200 ms apart ($batches, at most $bound)");

$node->stop;
$broker->stop;
done_testing();
