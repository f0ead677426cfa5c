
# Grants that work with real drivers.  The statement of docs/monitoring.md
# (EXECUTE on the three outbox_enqueue overloads) lets a role enqueue the
# ways psycopg2 (Debian's python3-psycopg2) and node's pg (from the npm
# registry, skipped where it cannot be had) send by default: psycopg2's str
# and Json() and pg's untyped parameters resolve to the text overload, so
# the jsonb one alone is refused with 42501.  Committed events arrive in
# Kafka with the payload bytes sent, keys and headers; rolled back ones do
# not.  On a topic of format avro, their untyped parameters are refused
# and a cast to jsonb in the statement enqueues.  The drivers' side is in
# t/drivers/.

use strict;
use warnings;

use File::Basename qw(dirname);
use File::Spec;
use IPC::Run;
use JSON::PP;
use OutboxTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $root = File::Spec->rel2abs(dirname(__FILE__) . '/..');
my $drivers = "$root/t/drivers";
my $python = '/usr/bin/python3';

# the SQL block of docs/monitoring.md that contains $pattern
sub doc_sql
{
	my ($pattern) = @_;
	my $doc = slurp_file("$root/docs/monitoring.md");
	my @found = grep { /$pattern/ } $doc =~ /^```sql\n(.*?)^```/msg;
	die "docs/monitoring.md has no SQL block matching $pattern" unless @found == 1;
	return $found[0];
}

# Run a command; returns its standard output, or dies with its errors.
sub run_driver
{
	my @cmd = @_;
	my ($out, $err) = ('', '');
	IPC::Run::run(\@cmd, '>', \$out, '2>', \$err, IPC::Run::timeout(120))
	  or die "@cmd failed: $err";
	return $out;
}

my ($node, $broker) = outbox_node_with_broker('drivers');
$node->safe_psql('postgres', 'CREATE ROLE app_role LOGIN');
my $dsn = 'host=' . $node->host . ' port=' . $node->port . ' dbname=postgres user=app_role';
my @pg_args = ($node->host, $node->port, 'postgres', 'app_role');
my $no_node = node_module_unavailable('pg@8');

# --- the jsonb overload alone (what was documented before) is not enough
$node->safe_psql('postgres',
	'GRANT EXECUTE ON FUNCTION outbox_enqueue(text, jsonb, text, jsonb, uuid) TO app_role');
is(run_driver($python, "$drivers/psycopg2_enqueue.py", $dsn, 'probe', 'probe'),
	"42501\n", "with the jsonb overload alone, psycopg2's Json() is refused");
SKIP:
{
	skip "node pg: $no_node", 1 if $no_node;
	is(run_driver('node', "$drivers/pg_enqueue.js", @pg_args, 'probe', 'probe'),
		"42501\n", "and so is node pg's untyped parameter");
}
$node->safe_psql('postgres',
	'REVOKE EXECUTE ON FUNCTION outbox_enqueue(text, jsonb, text, jsonb, uuid) FROM app_role');

# --- the documented statement
$node->safe_psql('postgres', doc_sql(qr/GRANT EXECUTE ON FUNCTION outbox_enqueue/));
is( $node->safe_psql(
		'postgres', q{
	SELECT string_agg(p.oid::regprocedure::text, ' ' ORDER BY p.oid::regprocedure::text)
	  FROM pg_proc p
	 WHERE p.proname LIKE 'outbox%' AND has_function_privilege('app_role', p.oid, 'EXECUTE')}),
	'outbox_enqueue(text,bytea,text,jsonb,uuid) outbox_enqueue(text,jsonb,text,jsonb,uuid) outbox_enqueue(text,text,text,jsonb,uuid)',
	'the documented grant gives the three overloads, and nothing else');
is(run_driver($python, "$drivers/psycopg2_enqueue.py", $dsn, 'probe', 'probe'),
	"ok\n", "psycopg2's Json() enqueues with it");

# The records of $topic are those the driver's lines describe, and nothing
# else: a marker enqueued after the driver's transactions shows the worker
# got past every id they could have taken.
sub arrived_as_sent
{
	my ($driver, $topic, $output) = @_;
	my @sent = map { decode_json($_) } split /\n/, $output;
	$node->safe_psql('postgres', "SELECT outbox_enqueue('$topic', 'marker'::text, 'marker')");
	my $records = wait_for_records($broker, $topic, @sent + 1);
	my @got = grep { ($_->{key} // '') ne 'marker' } @$records;
	is(scalar @got, scalar @sent,
		"$driver: every committed event arrived, no rolled back one");

	my %by_key = map { ($_->{key} // '(none)') => $_ } @got;
	for my $e (@sent)
	{
		my $key = $e->{key} // '(none)';
		my $r = $by_key{$key};
		my $headers = join ',', map { "$_=$e->{headers}{$_}" } sort keys %{ $e->{headers} };
		is( $r && join('|',
				unpack('H*', $r->{payload}),
				join(',', map { "$_=$r->{headers}{$_}" } sort keys %{ $e->{headers} })),
			"$e->{payload}|$headers",
			"$driver: the event of key $key has the payload bytes and headers sent");
	}
}

arrived_as_sent('psycopg2', 'py',
	run_driver($python, "$drivers/psycopg2_enqueue.py", $dsn, 'py', 'events'));

SKIP:
{
	skip "node pg: $no_node", 7 if $no_node;
	is(run_driver('node', "$drivers/pg_enqueue.js", @pg_args, 'probe', 'probe'),
		"ok\n", "node pg's untyped parameter enqueues with it");
	is(run_driver('node', "$drivers/pg_enqueue.js", @pg_args, 'probe', 'buffer'),
		"22021\n", 'an untyped Buffer goes to the text overload: refused unless UTF-8');
	arrived_as_sent('node pg', 'js',
		run_driver('node', "$drivers/pg_enqueue.js", @pg_args, 'js', 'events'));
}

# --- on a topic of format avro the text overload is refused, as
# docs/avro.md says, and a cast to jsonb in the statement is the fix
SKIP:
{
	my $no_avsc = node_module_unavailable('avsc@5');
	skip "the test schema registry needs avsc: $no_avsc", 3 if $no_avsc;
	my $registry = start_schema_registry();
	reconfigure($node, "SET outbox.schema_registry_url = '$registry->{url}'");
	$node->safe_psql('postgres', q{SELECT outbox_set_topic('avro.orders', format => 'avro',
		value_schema => '{"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]}')});
	my $refused = qq{22023 the payload of an event on topic "avro.orders" must be jsonb\n};
	is(run_driver($python, "$drivers/psycopg2_enqueue.py", $dsn, 'avro.orders', 'avro'),
		"${refused}ok\n", "psycopg2's Json() on an Avro topic: refused, and enqueued with %s::jsonb");
	my @keys = ('py');
  SKIP:
	{
		skip "node pg: $no_node", 1 if $no_node;
		is(run_driver('node', "$drivers/pg_enqueue.js", @pg_args, 'avro.orders', 'avro'),
			"${refused}ok\n", "node pg's object on an Avro topic: refused, and enqueued with \$2::jsonb");
		push @keys, 'js';
	}
	my $records = wait_for_records($broker, 'avro.orders', scalar @keys);
	is( join(',', sort map { unpack('H2', $_->{payload}) . ":$_->{key}" } @$records),
		join(',', sort map { "00:$_" } @keys),
		'what was enqueued with the cast is published in the wire format');
	$registry->stop;
}

$node->stop;
$broker->stop;
done_testing();
