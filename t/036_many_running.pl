
# Many transactions in progress at a claim.  The claim lists every one of
# them in the reader row as running; a hundred (here prepared, each
# holding an xid) make a row that monitoring and the claim read whole,
# at 1.4 and at 1.3: outbox_stats answers, a worker started again reads
# the row at its first claim and publishes, and once they end the list
# shrinks.  The server never crashes.

use strict;
use warnings;

use OutboxTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $broker = start_broker(1);
my $node = outbox_node('many_running', $broker, 'max_prepared_transactions' => '110');
$node->safe_psql('postgres', 'CREATE DATABASE v13');
$node->safe_psql('v13', "CREATE EXTENSION outbox VERSION '1.3'");
my @dbs = qw(postgres v13);

# Enqueue one event of topic "$db.$what" in each database; it arrives in
# Kafka, and the worker records it.
sub publish
{
	my ($what) = @_;
	$node->safe_psql($_, "SELECT outbox_enqueue('$_.$what', 'x'::text)") for @dbs;
	for my $db (@dbs)
	{
		is(scalar @{ wait_for_records($broker, "$db.$what", 1, 30) },
			1, "$db: the $what event arrives");
		ok( wait_for_sql($node,
				"SELECT status = 'published' FROM outbox_messages WHERE topic = '$db.$what'",
				30, $db),
			"$db: and is recorded");
	}
	return;
}

publish('before');

# a hundred transactions in progress, each with an xid
$node->safe_psql('postgres',
	join '', map { "BEGIN; SELECT pg_current_xact_id(); PREPARE TRANSACTION 'many_$_';" } 1 .. 100);

publish('during');
for my $db (@dbs)
{
	is($node->safe_psql($db, 'SELECT cardinality(running) >= 100 FROM outbox_reader'),
		't', "$db: the claim lists the transactions in progress as running");
	my ($ret, $out, $err) = $node->psql($db, 'SELECT pending FROM outbox_stats WHERE topic IS NULL');
	is("$ret $out", '0 0', "$db: outbox_stats reads that reader row") or diag $err;
}

# a worker started again reads the row at its first claim, by a scan
for my $db (@dbs)
{
	my $pid = $node->safe_psql('postgres',
		"SELECT pid FROM outbox_worker_status() WHERE database = '$db'");
	$node->safe_psql('postgres', "SELECT pg_terminate_backend($pid)");
	ok( wait_for_sql($node,
			"SELECT state = 'idle' AND pid <> $pid FROM outbox_worker_status() WHERE database = '$db'"),
		"$db: the worker is started again");
}
publish('after');

$node->safe_psql('postgres', join '', map { "COMMIT PREPARED 'many_$_';" } 1 .. 100);
publish('last');
is($node->safe_psql($_, 'SELECT cardinality(running) < 100 FROM outbox_reader'),
	't', "$_: the transactions ended leave the list")
  for @dbs;

ok(!$node->log_contains('terminated by signal'), 'no backend crashed');

$node->stop;
done_testing();
