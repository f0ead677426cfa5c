
# Captured changes that wait (their cluster down) while their tables
# change: a column added with a default, one dropped, one retyped, one
# renamed, the schema renamed, a table dropped.  What arrives once the
# cluster is back is what each change was when it was made, byte for byte
# (the same changes published at once, before, are the reference: only the
# transaction id, the WAL position and the times differ), in both formats;
# an event enqueued between two changes of a row keeps its place among
# them (order per key); and nothing is published while the cluster is down.

use strict;
use warnings;

use JSON::PP;
use OutboxTest;
use PostgreSQL::Test::Utils;
use Test::More;

my ($node, $broker) =
  outbox_node_with_broker('waiting', 'outbox.poll_interval' => '100ms');
$node->safe_psql(
	'postgres', q{
	CREATE SCHEMA shop;
	CREATE TABLE shop.dbz (id int PRIMARY KEY, qty int, price numeric(10,2),
						   note text, at timestamptz);
	CREATE TABLE shop.env (LIKE shop.dbz INCLUDING ALL);
	CREATE TABLE shop.gone (LIKE shop.dbz INCLUDING ALL);
	SELECT outbox_attach('shop.dbz', 'dbserver1', format => 'debezium');
	SELECT outbox_attach('shop.env', 'envelopes', format => 'outbox');
	SELECT outbox_attach('shop.gone', 'dbserver1', format => 'debezium');
});

# the same changes of row 1 of each table, each its own transaction; with
# $between, an event enqueued on the debezium table's topic and key
# between the insert and the update
sub changes
{
	my ($between) = @_;
	for my $t ('dbz', 'env')
	{
		$node->safe_psql('postgres',
			"INSERT INTO shop.$t VALUES (1, 3, 19.90, 'first', '2024-02-29 13:14:15.5+05:30')"
		);
		$node->safe_psql('postgres',
			q{SELECT outbox_enqueue('dbserver1.shop.dbz', '{"n": 1}'::jsonb, key => '{"id":1}')})
		  if $between && $t eq 'dbz';
		$node->safe_psql('postgres',
			"UPDATE shop.$t SET qty = 4, note = 'second' WHERE id = 1");
		$node->safe_psql('postgres', "DELETE FROM shop.$t WHERE id = 1");
	}
	return;
}

# a record's parts that two captures of the same change share: what the
# transaction, the WAL position and the clock gave taken out
sub comparable
{
	my ($r) = @_;
	my $value = defined $r->{payload} ? decode_json($r->{payload}) : undef;
	if (ref $value eq 'HASH')
	{
		delete @{$value}{qw(ts_ms ts_us ts_ns)};
		delete @{ $value->{source} }{qw(txId txid lsn ts_ms ts_us ts_ns xmin)}
		  if ref $value->{source} eq 'HASH';
	}
	my %headers = %{ $r->{headers} };
	delete $headers{event_id};
	return JSON::PP->new->canonical->encode(
		{ key => $r->{key}, value => $value, headers => \%headers });
}

# the reference: published at once
changes(0);
my $dbz = wait_for_records($broker, 'dbserver1.shop.dbz', 4);
my $env = wait_for_records($broker, 'envelopes', 3);
is(scalar @$dbz, 4, 'debezium: insert, update, delete and its tombstone, published at once');
is(scalar @$env, 3, 'outbox: insert, update and delete, published at once');
my @dbz_reference = map { comparable($_) } @$dbz;
my @env_reference = map { comparable($_) } @$env;

# the same changes while the cluster is down, then the tables change
$broker->command('down -1');
changes(1);
$node->safe_psql('postgres',
	"INSERT INTO shop.gone VALUES (7, 1, 1.50, 'gone', '2024-02-29 13:14:15.5+05:30')");
$node->safe_psql(
	'postgres', q{
	ALTER TABLE shop.dbz ADD COLUMN extra int DEFAULT 7, DROP COLUMN note,
		ALTER COLUMN qty TYPE text, ALTER COLUMN at TYPE timestamp;
	ALTER TABLE shop.dbz RENAME COLUMN price TO cost;
	ALTER TABLE shop.env ADD COLUMN extra int DEFAULT 7, DROP COLUMN note,
		ALTER COLUMN qty TYPE text, ALTER COLUMN at TYPE timestamp;
	ALTER TABLE shop.env RENAME COLUMN price TO cost;
	DROP TABLE shop.gone;
	ALTER SCHEMA shop RENAME TO store;
});
ok( wait_for_activity($node, 'no Kafka broker reachable'),
	'the worker says no broker is reachable');
is( $node->safe_psql(
		'postgres',
		q{SELECT count(*) FROM outbox_messages WHERE status = 'pending' AND attempts = 0}),
	'9',
	'while the cluster is down, the changes and the event wait, pending');

$broker->command('up -1');
$dbz = wait_for_records($broker, 'dbserver1.shop.dbz', 9);
$env = wait_for_records($broker, 'envelopes', 6);
my $gone = wait_for_records($broker, 'dbserver1.shop.gone', 1);
is(scalar @$dbz, 9, 'debezium: the waiting changes and the event arrived');
is(scalar @$env, 6, 'outbox: the waiting changes arrived');

my @waited = @$dbz[ 4 .. 8 ];
my ($event) = splice(@waited, 1, 1);
is($event->{payload}, '{"n": 1}',
	'the event enqueued between the insert and the update arrived between them');
is($event->{key}, '{"id":1}', 'with the key of the row');
is_deeply([ map { comparable($_) } @waited ],
	\@dbz_reference,
	'debezium: the waiting changes are what they were when made, whatever the table became');
is_deeply([ map { comparable($_) } @$env[ 3 .. 5 ] ],
	\@env_reference,
	'outbox: the waiting changes are what they were when made, whatever the table became');

my $after = decode_json($waited[0]{payload})->{after};
is_deeply(
	[ sort keys %$after ],
	[qw(at id note price qty)],
	'the columns are those of the insert (note and price, no extra)');
like($waited[0]{payload}, qr/"qty":3,/, 'qty as the integer it was, not text');
is($after->{at}, '2024-02-29T07:44:15.500000Z', 'at as the timestamptz it was');
is(decode_json($waited[0]{payload})->{source}{schema},
	'shop', 'source.schema is the schema the table was in');
is(decode_json($gone->[0]{payload})->{after}{note},
	'gone', 'a change of a table dropped while it waited arrives');

$node->stop;
$broker->stop;
done_testing();
