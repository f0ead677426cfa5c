
# An outbox table's owner, with no right on the extension, changes the
# columns the router reads after it was attached: retyped payload and
# timestamp columns, a dropped column, timestamps Kafka cannot carry.  Each
# insert fails with its SQLSTATE, the server does not restart (a bystander's
# open transaction commits), nothing of a refused insert is published, and
# what the owner may insert still arrives with its timestamp.

use strict;
use warnings;

use OutboxTest;
use PostgreSQL::Test::Utils;
use Test::More;

my ($node, $broker) =
  outbox_node_with_broker('owner', 'outbox.poll_interval' => '100ms');
$node->safe_psql(
	'postgres', q{
	CREATE ROLE table_owner LOGIN;
	CREATE SCHEMA app AUTHORIZATION table_owner;
	CREATE TABLE app.ev (id uuid PRIMARY KEY, aggregatetype text NOT NULL, aggregateid text,
		type text, payload jsonb, ts timestamptz);
	ALTER TABLE app.ev OWNER TO table_owner;
	SELECT outbox_attach_router('app.ev', timestamp_column => 'ts');
});

# a bystander's transaction, open while the owner tries
my $bystander = $node->background_psql('postgres');
$bystander->query_safe(
	"BEGIN; SELECT outbox_enqueue('owner.bystander', 'still here'::text, key => 'b')");
my $started = $node->safe_psql('postgres', 'SELECT pg_postmaster_start_time()');

# Run $sql as the table's owner; its SQLSTATE, or '' on success.
sub as_owner
{
	my ($sql) = @_;
	my ($ret, $out, $err) =
	  $node->psql('postgres', "\\set VERBOSITY verbose\n$sql", extra_params => [ '-U', 'table_owner' ]);
	my ($state) = $err =~ /ERROR:  ([0-9A-Z]{5}):/;
	return $state // ($ret == 0 ? '' : "psql exit $ret: $err");
}

my $insert = "INSERT INTO app.ev VALUES (gen_random_uuid(), 'owned', '1', 't'";
my @cases = (
	[ 'payload retyped to integer', 'ALTER TABLE app.ev ALTER COLUMN payload TYPE integer USING 1', "$insert, 1, NULL)", '42804' ],
	[ 'payload retyped to bigint', 'ALTER TABLE app.ev ALTER COLUMN payload TYPE bigint', "$insert, 1, NULL)", '42804' ],
	[ 'payload retyped to jsonb[]', 'ALTER TABLE app.ev ALTER COLUMN payload TYPE jsonb[] USING NULL', "$insert, '{}', NULL)", '42804' ],
	[ 'timestamp retyped to text', "ALTER TABLE app.ev ALTER COLUMN payload TYPE jsonb USING '{}', ALTER COLUMN ts TYPE text", "$insert, '{}', '2021-01-01')", '42804' ],
	[ 'timestamp retyped to bigint', 'ALTER TABLE app.ev ALTER COLUMN ts TYPE bigint USING NULL', "$insert, '{}', 1)", '42804' ],
	[ 'timestamp infinity', 'ALTER TABLE app.ev ALTER COLUMN ts TYPE timestamptz USING NULL', "$insert, '{}', 'infinity')", '22008' ],
	[ 'timestamp -infinity', '', "$insert, '{}', '-infinity')", '22008' ],
	[ 'timestamp in 1900', '', "$insert, '{}', '1900-01-01 00:00:00+00')", '22008' ],
	[ 'timestamp a millisecond before 1970', '', "$insert, '{}', '1969-12-31 23:59:59.999+00')", '22008' ],
	[ 'payload column dropped', 'ALTER TABLE app.ev DROP COLUMN payload', "INSERT INTO app.ev VALUES (gen_random_uuid(), 'owned', '1', 't', NULL)", '42703' ]);
for my $case (@cases)
{
	my ($what, $alter, $sql, $want) = @$case;
	is(as_owner($alter), '', "$what: the owner may change the table") if $alter;
	is(as_owner($sql), $want, "$what: the insert fails with $want");
}

is($node->safe_psql('postgres', 'SELECT pg_postmaster_start_time()'),
	$started, 'the server did not restart');
$bystander->query_safe('COMMIT');
$bystander->quit;

# what the owner may insert arrives, with its timestamp
is( as_owner(
		"ALTER TABLE app.ev ADD COLUMN payload text; $insert, '2021-01-01 00:00:00+00', '{\"a\": 1}')"),
	'', 'a valid insert goes through');
wait_for_records($broker, 'outbox.event.owned', 1);
my $records = kafka_read_json($broker, 'outbox.event.owned');
is(scalar @$records, 1, 'one record published: none of the refused inserts');
is($records->[0]{payload}, '"{\"a\": 1}"', 'its payload');
is($records->[0]{ts}, 1609459200000, 'its timestamp, 2021-01-01');
wait_for_records($broker, 'owner.bystander', 1);
is(scalar @{ kafka_read($broker, 'owner.bystander') }, 1, 'the bystander\'s event is published');

$node->stop;
$broker->stop;
done_testing();
