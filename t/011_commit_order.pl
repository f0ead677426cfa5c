
# Commit order under load: an event of a transaction that enqueues first and
# commits last, while the worker publishes thousands of later-numbered
# events, is published once; so is one of a prepared transaction at COMMIT
# PREPARED.  Events of transactions that roll back, prepared or not, are
# never published.  COMMIT PREPARED wakes the worker, as a COMMIT does: the
# poll interval is an hour.

use strict;
use warnings;

use OutboxTest;
use PostgreSQL::Test::Utils;
use Test::More;

my ($node, $broker) = outbox_node_with_broker(
	'commit_order',
	'max_prepared_transactions' => '10',
	'outbox.poll_interval' => '1h');
worker_pid($node);

# ids 1 to 4: two open transactions, two prepared ones
my $long = $node->background_psql('postgres');
$long->query_safe(
	"BEGIN; SELECT outbox_enqueue('order.t', 'long'::text, key => 'long')");
my $doomed = $node->background_psql('postgres');
$doomed->query_safe(
	"BEGIN; SELECT outbox_enqueue('order.t', 'rolled back'::text, key => 'long')");
for my $gid (qw(prepared doomed))
{
	$node->safe_psql('postgres',
		"BEGIN; SELECT outbox_enqueue('order.t', '$gid'::text, key => '$gid'); PREPARE TRANSACTION '$gid'"
	);
}

# load: 4 clients, 3000 one-event transactions; the four end in its middle
my $script = $node->basedir . '/load.sql';
PostgreSQL::Test::Utils::append_to_file($script,
	"\\set k random(1, 50)\n"
	  . "SELECT outbox_enqueue('order.t', 'load'::text, key => 'k' || :k);\n");
my ($out, $err) = ('', '');
my $load = IPC::Run::start(
	[
		'pgbench', '-n', '-c', '4', '-j', '2', '-t', '750',
		'-f', $script, $node->connstr('postgres')
	],
	'>', \$out, '2>', \$err);
ok( wait_for_sql($node,
		"SELECT count(*) >= 500 FROM outbox_messages WHERE status = 'published'"),
	'the worker publishes later events while the first four are open');
$long->query_safe('COMMIT');
$doomed->query_safe('ROLLBACK');
$node->safe_psql('postgres', "COMMIT PREPARED 'prepared'");
$node->safe_psql('postgres', "ROLLBACK PREPARED 'doomed'");
$load->finish;
is($load->result(0), 0, 'the load ran') or diag($err);
$long->quit;
$doomed->quit;

my $records = wait_for_records($broker, 'order.t', 3002);
my %payloads;
$payloads{ $_->{payload} }++ for @$records;
is($payloads{load}, 3000, 'every event of the load arrived once');
is($payloads{long}, 1,
	'the event of the transaction that enqueued first and committed last arrived once');
is($payloads{prepared}, 1, 'the event of COMMIT PREPARED arrived once');
ok(!exists $payloads{'rolled back'} && !exists $payloads{doomed},
	'no event of a rolled-back transaction arrived');
my %event_ids;
$event_ids{ $_->{headers}{event_id} }++ for @$records;
is(scalar keys %event_ids, 3002, 'no event_id arrived twice');
ok(all_published($node), 'the worker records what the broker acknowledged');
is( $node->safe_psql('postgres',
		"SELECT string_agg(DISTINCT status::text, ',') || ' ' || count(*) FROM outbox_messages"),
	'published 3002',
	'the table says the same: 3002 events, all published');

# on a quiet server, only the wakeup of COMMIT PREPARED can publish it
$node->safe_psql('postgres',
	"BEGIN; SELECT outbox_enqueue('order.late', 'late'::text); PREPARE TRANSACTION 'late'");
sleep 1;
$node->safe_psql('postgres', "COMMIT PREPARED 'late'");
is(scalar @{ wait_for_records($broker, 'order.late', 1, 10) },
	1, 'COMMIT PREPARED wakes the worker: published within seconds, not at the next poll');

done_testing();
