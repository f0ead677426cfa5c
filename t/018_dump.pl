
# Dump and restore keep the queue.  A database holds events published
# (kept: retention on), failed with attempts, abandoned, and thousands
# pending that the worker is publishing, with a transaction that enqueued
# still open; pg_dump -Fc runs while the worker publishes.  Restored into
# a new database of the same server and into a second server (pg_restore
# -j 2), each publishes exactly the events that were not delivered in the
# dump's snapshot: failed ones with their attempts, every key in order,
# none published or abandoned before, not the open transaction's.  The
# worker of a database being restored waits until the restore ends.  A
# database whose outbox.enabled is off before the restore (docs/operations.md's
# way to restore without publishing) publishes nothing, holds the queue as
# it was, and publishes it once turned on.

use strict;
use warnings;

use IPC::Run;
use OutboxTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my @topics = qw(load.t denied.t flaky.t pub.t open.t orders.changes);

# (log_disconnections: when the backends that restore the log go)
my ($node, $broker) = outbox_node_with_broker(
	'dump',
	'log_disconnections' => 'on',
	'outbox.poll_interval' => '100ms',
	'outbox.batch_size' => '100',
	'outbox.retry_base_delay' => '2s',
	'outbox.retry_jitter' => '0');
my $copy_broker = start_broker(1);
my $second_broker = start_broker(1);
my $quiet_broker = start_broker(1);
my $dir = PostgreSQL::Test::Utils::tempdir;

$node->safe_psql('postgres', 'CREATE DATABASE shop');
$node->safe_psql(
	'shop', q{
	CREATE EXTENSION outbox;
	CREATE TABLE orders (id int PRIMARY KEY, item text);
	SELECT outbox_attach('orders', 'orders.changes');
	-- restored after the event log, in the same session
	CREATE TABLE zz_bulk AS SELECT i, md5(i::text) AS h FROM generate_series(1, 300000) i;
});

sub shop
{
	my ($sql) = @_;
	return $node->safe_psql('shop', $sql);
}

# --- published, kept
shop(q{SELECT outbox_enqueue('pub.t', 'p' || i, key => 'P') FROM generate_series(1, 20) i});
shop(q{INSERT INTO orders SELECT i, 'item ' || i FROM generate_series(1, 5) i});
ok( wait_for_sql(
		$node, "SELECT count(*) = 25 FROM outbox_messages WHERE status = 'published'", 30, 'shop'),
	'published events, kept');

# --- failed once, then published: a published row of the retry table
$broker->command("topic_error flaky.t $TOPIC_AUTHORIZATION_FAILED");
shop(q{SELECT outbox_enqueue('flaky.t', 'f1'::text, key => 'F')});
ok( wait_for_sql(
		$node, "SELECT status = 'failed' FROM outbox_messages WHERE topic = 'flaky.t'",
		30, 'shop'),
	'an event fails');
$broker->command('topic_error flaky.t 0');
ok( wait_for_sql(
		$node,
		"SELECT status = 'published' AND attempts = 2 FROM outbox_messages WHERE topic = 'flaky.t'",
		30, 'shop'),
	'and is published at its second attempt');

# --- failed, with later events of its key waiting; and abandoned
$broker->command("topic_error denied.t $TOPIC_AUTHORIZATION_FAILED");
shop(q{SELECT outbox_enqueue('denied.t', 'j1'::text, key => 'J')});
shop(q{SELECT outbox_enqueue('denied.t', 'd1'::text, key => 'K')});
shop(q{SELECT outbox_enqueue('denied.t', 'd2'::text, key => 'K')});
ok( wait_for_sql(
		$node,
		"SELECT count(*) = 2 FROM outbox_messages WHERE topic = 'denied.t' AND status = 'failed'",
		30, 'shop'),
	'the events of a refused topic fail');
shop(q{SELECT outbox_abandon(id) FROM outbox_messages WHERE topic = 'denied.t' AND key = 'J'});

# --- pending: thousands, which the worker publishes slowly
$broker->command('rtt 1 100');
shop(q{SELECT outbox_enqueue('denied.t', 'd3'::text, key => 'K')});
shop(
	q{SELECT outbox_enqueue('load.t', 'e0'::text, key => 'E', event_id => 'e0000000-0000-4000-8000-000000000000')}
);
for my $t (1 .. 10)
{
	shop(
		"SELECT count(outbox_enqueue('load.t', ($t * 10000 + i)::text, key => 'L' || (i % 10))) FROM generate_series(1, 500) i"
	);
}
shop(q{INSERT INTO orders SELECT i, 'item ' || i FROM generate_series(6, 105) i});
ok( wait_for_sql(
		$node, "SELECT count(*) >= 500 FROM outbox_messages WHERE topic = 'load.t' AND status = 'published'",
		30, 'shop'),
	'the worker publishes the load');

# --- a transaction that enqueued, open through the dump
my $open = $node->background_psql('shop');
$open->query_safe('BEGIN');
$open->query_safe(q{SELECT outbox_enqueue('open.t', 'open'::text, key => 'O')});

# --- the dump, in a snapshot that we read too
my $snap = $node->background_psql('shop');
$snap->query_safe('BEGIN ISOLATION LEVEL REPEATABLE READ');
my $snapshot = $snap->query_safe('SELECT pg_export_snapshot()');
chomp $snapshot;
# what was not delivered: every event, but those the ledger or the retry
# table records as published, and those abandoned
my $undelivered = $snap->query_safe(
	q{
	WITH events AS (SELECT id, event_id FROM outbox_log UNION SELECT id, event_id FROM outbox_retries),
		 done AS (SELECT unnest(ids) AS id FROM outbox_ledger
				  UNION SELECT id FROM outbox_retries WHERE status IN ('published', 'abandoned'))
	SELECT string_agg(event_id::text, ' ' ORDER BY id) FROM events WHERE id NOT IN (SELECT id FROM done)
});
chomp $undelivered;
my %expected = map { $_ => 1 } split / /, $undelivered;
my $as_viewed = $snap->query_safe(
	q{SELECT string_agg(event_id::text, ' ' ORDER BY id) FROM outbox_messages WHERE status IN ('pending', 'failed')}
);
chomp $as_viewed;
is($as_viewed, $undelivered,
	'in the dump\'s snapshot, outbox_messages shows the events not delivered as pending or failed');
my $retries = $snap->query_safe(
	q{SELECT string_agg(concat_ws(':', id, event_id, topic, key, status, attempts, coalesce(last_error, '-')), ',' ORDER BY id) FROM outbox_retries}
);
chomp $retries;
my ($d1_attempts) = $snap->query_safe(
	q{SELECT attempts FROM outbox_retries WHERE convert_from(payload, 'UTF8') = 'd1'}) =~ /(\d+)/;
my ($load_pending, $load_total) = split /\|/, $snap->query_safe(
	q{SELECT count(*) FILTER (WHERE status = 'pending'), count(*) FROM outbox_messages WHERE topic = 'load.t'});
chomp $load_total;
my $orders_at_dump = $snap->query_safe('SELECT count(*) FROM orders');
chomp $orders_at_dump;
# (published after the dump: in the ledger, and published rows of the
# retry table beyond these)
my $published_at_dump =
  $snap->query_safe("SELECT count(*) FROM outbox_retries WHERE status = 'published'");
chomp $published_at_dump;
diag("at the dump: $load_pending of $load_total load events pending, "
	  . scalar(keys %expected) . ' events undelivered in all');
ok($load_pending > 0 && $load_pending < $load_total,
	'the dump is taken while the worker publishes the load');

my ($out, $err) = ('', '');
my $dump_start = time;
ok( IPC::Run::run(
		[
			'pg_dump', '-Fc', "--snapshot=$snapshot", '-f', "$dir/shop.dump",
			'-h', $node->host, '-p', $node->port, 'shop'
		],
		'>', \$out, '2>', \$err),
	'pg_dump -Fc while the worker publishes') or diag($err);
diag(sprintf('pg_dump took %.2f s', time - $dump_start));
$snap->query_safe('COMMIT');
$snap->quit;
$open->query_safe('COMMIT');
$open->quit;

# the source goes on: the open transaction's event is published there
ok(scalar(@{ wait_for_records($broker, 'open.t', 1, 30) }) == 1,
	'the open transaction, committed after the dump, is published by the source');
$broker->command('rtt 1 0');

# Every record of our topics on $broker: event_id => [ topic, key, payload ]
# in order of arrival per topic and partition, and the count of each
# event_id.
sub published
{
	my ($b) = @_;
	my (@records, %count);
	for my $topic (@topics)
	{
		for my $r (@{ kafka_read($b, $topic) })
		{
			push @records, { %$r, topic => $topic };
			$count{ $r->{headers}{event_id} // '' }++;
		}
	}
	return (\@records, \%count);
}

# Are each key's events in order?  load.t payloads are numbers growing
# with their enqueue, denied.t d1 d2 d3.
sub keys_in_order
{
	my ($records) = @_;
	my %last;
	for my $r (grep { $_->{topic} =~ /^(load|denied)\.t$/ } @$records)
	{
		my ($n) = $r->{payload} =~ /(\d+)$/;
		my $key = "$r->{topic}/" . ($r->{key} // '');
		return "$key: $last{$key} before $n" if defined $last{$key} && $last{$key} >= $n;
		$last{$key} = $n;
	}
	return '';
}

# Check what a restored database published on $b.
sub check_published
{
	my ($name, $b) = @_;
	my $deadline = time + 90;
	my ($records, $count);
	do
	{
		usleep(200_000);
		($records, $count) = published($b);
	} until (scalar(keys %$count) >= scalar(keys %expected) || time > $deadline);
	my @missing = grep { !$count->{$_} } sort keys %expected;
	my @extra = grep { !$expected{$_} } sort keys %$count;
	my @twice = grep { $count->{$_} > 1 } sort keys %$count;
	is(scalar @missing, 0, "$name: every event undelivered at the dump is published")
	  or diag("missing: @missing[0 .. ($#missing < 5 ? $#missing : 5)]");
	is(scalar @extra, 0,
		"$name: nothing else (nothing published or abandoned before, not the open transaction's)")
	  or diag('extra: ' . join(' ', map { "$_->{topic}:" . ($_->{payload} // '') } grep { !$expected{ $_->{headers}{event_id} // '' } } @$records[0 .. 5]));
	is(scalar @twice, 0, "$name: each once");
	is(keys_in_order($records), '', "$name: each key in order");
	return $records;
}

# Restore the dump into $db of $target with @options, watching the state
# of its worker while pg_restore runs.  Returns the states seen, how many
# events were published before the backends that wrote the log by hand
# had gone (published_while_restoring), and the seconds pg_restore took.
sub restore
{
	my ($target, $db, @options) = @_;
	my ($rout, $rerr) = ('', '');
	my %seen;
	my $log_from = -s $target->logfile;
	my $since = $target->safe_psql('postgres', 'SELECT clock_timestamp()');
	my $start = time;
	my $h = IPC::Run::start(
		[
			'pg_restore', @options, '-d', $db, '-h', $target->host, '-p', $target->port,
			"$dir/shop.dump"
		],
		'>', \$rout, '2>', \$rerr);
	while ($h->pumpable)
	{
		my $state = $target->safe_psql('postgres',
			"SELECT state FROM outbox_worker_status() WHERE database = '$db'");
		$seen{$state}++ if $state ne '';
		$h->pump_nb;
		usleep(20_000);
	}
	my $ok = $h->finish;
	my $took = time - $start;
	ok($ok, "pg_restore @options into $db") or diag($rerr);
	return (\%seen, published_while_restoring($target, $db, $log_from, $since), $took);
}

# How many events $db of $target recorded as published (from $since on)
# before the last backend that wrote its log by hand had gone: the
# backends whose COPY into a log table the server log shows from byte
# $log_from on, gone when it logs their disconnection (which comes before
# they leave the backends the worker looks at).  pg_restore itself may
# end later: with -j, its leader connects again after its jobs.  Undef if
# no backend wrote the log.
sub published_while_restoring
{
	my ($target, $db, $log_from, $since) = @_;
	my $deadline = time + 30;
	my $gone;
	for (;;)
	{
		my $log = slurp_file($target->logfile, $log_from);
		my %wrote = map { $_ => 1 } $log =~ /\[(\d+)\] [^\n]*LOG:  statement: COPY [^\n]*\.outbox_log_\d /g;
		return undef if !%wrote;
		my %left = reverse $log =~ /^(\S+ \S+ \S+) \[(\d+)\] [^\n]*LOG:  disconnection:/mg;
		my @left = grep { defined } @left{ keys %wrote };
		if (@left == keys %wrote)
		{
			($gone) = sort { $b cmp $a } @left;
			last;
		}
		return 'the disconnection of a backend that wrote the log is not in the log'
		  if time > $deadline;
		usleep(100_000);
	}
	return $target->safe_psql($db,
		"SELECT coalesce((SELECT sum(cardinality(ids)) FROM outbox_ledger WHERE published_at < '$gone'), 0)"
		  . " + (SELECT count(*) FROM outbox_retries WHERE status = 'published'"
		  . " AND published_at >= '$since' AND published_at < '$gone')");
}

# --- a new database of the same server, to its own cluster
$node->safe_psql('postgres', 'CREATE DATABASE copy');
$node->safe_psql('postgres',
	"ALTER DATABASE copy SET outbox.brokers = '$copy_broker->{bootstrap}'");
# in its three sections, so that its worker runs before the data comes
restore($node, 'copy', '--section=pre-data');
ok( wait_for_sql(
		$node, "SELECT state = 'idle' FROM outbox_worker_status() WHERE database = 'copy'"),
	'the restored extension has its worker');
my ($seen, $published, $took) = restore($node, 'copy', '--section=data');
my $restored_at = time;
diag(sprintf('data of the restore into copy took %.2f s; worker states seen meanwhile: %s',
		$took, join(', ', map { "$_ ($seen->{$_})" } sort keys %$seen)));
ok($seen->{'waiting for restore'},
	'its worker waits while the restore writes the event log, and until it ends');
is($published, 0, 'and publishes nothing before the restore ends');
ok( wait_for_sql(
		$node,
		"SELECT (SELECT count(*) FROM outbox_ledger) + (SELECT count(*) FROM outbox_retries WHERE status = 'published') - $published_at_dump > 0",
		60, 'copy'),
	'it publishes once the restore has ended');
diag(sprintf('first restored event recorded as published %.2f s after the data was restored',
		time - $restored_at));
restore($node, 'copy', '--section=post-data');
is($node->safe_psql('copy', 'SELECT count(*) FROM orders'),
	$orders_at_dump, 'the business rows are restored');
check_published('copy', $copy_broker);
diag(sprintf('every restored event in the copy\'s cluster %.2f s after the data was restored',
		time - $restored_at));
ok( wait_for_sql(
		$node,
		"SELECT status = 'published' AND attempts = $d1_attempts + 1 FROM outbox_messages WHERE convert_from(payload, 'UTF8') = 'd1'",
		30, 'copy'),
	"the failed event kept its attempts ($d1_attempts) and counts its publication as one more");

# --- a second server, restored by two jobs
my $second = outbox_node('second', $second_broker,
	'log_disconnections' => 'on',
	'outbox.poll_interval' => '100ms');
$second->safe_psql('postgres', 'CREATE DATABASE shop');
($seen, $published, $took) = restore($second, 'shop', '-j', '2');
$restored_at = time;
diag(sprintf('restore -j 2 into the second server took %.2f s; worker states seen: %s',
		$took, join(', ', map { "$_ ($seen->{$_})" } sort keys %$seen)));
is($published, 0, 'second server: nothing published before the restore ends');
check_published('second server', $second_broker);
diag(sprintf('every restored event in the second server\'s cluster %.2f s after pg_restore ended',
		time - $restored_at));

# --- outbox.enabled off before the restore: nothing published
$node->safe_psql('postgres', 'CREATE DATABASE quiet');
$node->safe_psql('postgres',
	"ALTER DATABASE quiet SET outbox.enabled = off; ALTER DATABASE quiet SET outbox.brokers = '$quiet_broker->{bootstrap}'"
);
restore($node, 'quiet');
sleep 3;
is(scalar @{ (published($quiet_broker))[0] }, 0,
	'outbox.enabled off before the restore: nothing is published');
is( $node->safe_psql('postgres',
		"SELECT count(*) FROM outbox_worker_status() WHERE database = 'quiet' AND pid IS NOT NULL"),
	'0', 'no worker serves the database');
is( $node->safe_psql(
		'quiet',
		q{SELECT string_agg(concat_ws(':', id, event_id, topic, key, status, attempts, coalesce(last_error, '-')), ',' ORDER BY id) FROM outbox_retries}
	),
	$retries,
	'the retry table is as it was in the dump\'s snapshot: states, attempts, errors');
is( $node->safe_psql(
		'quiet',
		q{SELECT string_agg(event_id::text, ' ' ORDER BY id) FROM outbox_messages WHERE status IN ('pending', 'failed')}
	),
	$undelivered,
	'the undelivered events wait, pending or failed');
is( $node->safe_psql(
		'quiet',
		q{SELECT nextval('outbox_event_id_seq') > (SELECT max(id) FROM outbox_messages)}),
	't', 'the id sequence is restored: a new event is numbered after every restored one');
my ($ret, $stdout, $stderr) = $node->psql('quiet',
	q{SELECT outbox_enqueue('load.t', 'again'::text, event_id => 'e0000000-0000-4000-8000-000000000000')});
like($stderr, qr/duplicate key value violates unique constraint "outbox_event_ids_pkey"/,
	'a caller-given event id stays taken');
$node->safe_psql('postgres', 'ALTER DATABASE quiet RESET outbox.enabled');
check_published('quiet, once enabled', $quiet_broker);

$second->stop;
$node->stop;
$_->stop for ($broker, $copy_broker, $second_broker, $quiet_broker);
done_testing();
