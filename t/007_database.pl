
# outbox.databases names a database that does not exist yet: the launcher
# waits and says so, without a worker crashing in a loop; DROP DATABASE of
# it, once served, succeeds without FORCE.  In that
# database, SQL_ASCII, enqueue refuses a key or header that is not UTF-8,
# and a row stored without that check (by an older version) fails alone
# instead of stalling the queue.

use strict;
use warnings;

use OutboxTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $broker = start_broker(1);
my $node = PostgreSQL::Test::Cluster->new('database');
$node->init(extra => [ '--encoding=SQL_ASCII', '--locale=C' ]);
$node->append_conf('postgresql.conf',
	outbox_settings($broker, 'outbox.databases' => 'app',
		'outbox.poll_interval' => '100ms'));
$node->start;
# outbox_worker_status() is read from here; the worker does not serve it
$node->safe_psql('postgres', 'CREATE EXTENSION outbox');

# --- a database that does not exist is waited for, once, and said
ok( wait_for_sql($node,
		"SELECT state = 'waiting for database' AND last_error = 'database \"app\" does not exist' AND pid IS NULL FROM outbox_worker_status()"
	),
	'the status says which database is missing');
sleep 3;
my $log = slurp_file($node->logfile);
my $said = () = $log =~ /database "app" named in outbox.databases does not exist or does not allow connections, waiting for it/g;
is($said, 1, 'the log says it once');
unlike($log, qr/FATAL/, 'no worker crashed trying to connect');

$node->safe_psql('postgres', 'CREATE DATABASE app; ');
$node->safe_psql('app', 'CREATE EXTENSION outbox');
ok( wait_for_sql($node,
		"SELECT state = 'idle' FROM outbox_worker_status()", 20),
	'once it exists, with the extension, the worker runs');

# --- SQL_ASCII: bytes that are not UTF-8 are refused at enqueue
my ($ret, $out, $err) = $node->psql('app',
	"SELECT outbox_enqueue('enc.t', 'x'::text, key => E'\\xff')");
like($err, qr/event key cannot be converted to UTF-8/, 'a key that is not UTF-8 is refused');
($ret, $out, $err) = $node->psql('app',
	"SELECT outbox_enqueue('enc.t', 'x'::text, headers => jsonb_build_object('h', E'\\xfe'))");
like($err, qr/event header cannot be converted to UTF-8/, 'so is a header');
($ret, $out, $err) = $node->psql('app',
	"SELECT outbox_enqueue('enc.t', E'\\xfe'::text)");
like($err, qr/event payload cannot be converted to UTF-8/, 'and a text payload');

# --- a row stored without the check fails alone; the queue goes on
$node->safe_psql(
	'app', q{
	SELECT outbox_enqueue('enc.t', 'before'::text, key => 'ok');
	INSERT INTO outbox_retries (topic, key, payload) VALUES ('enc.t', E'\xff', 'legacy');
	SELECT outbox_enqueue('enc.t', 'after'::text, key => 'ok');
});
ok( wait_for_sql($node,
		"SELECT count(*) = 2 FROM outbox_messages WHERE topic = 'enc.t' AND status = 'published'", 20, 'app'),
	'the events around it are published');
is( $node->safe_psql('app',
		"SELECT status || ' ' || attempts || ' ' || last_error FROM outbox_messages WHERE convert_from(payload, 'SQL_ASCII') = 'legacy'"
	),
	'abandoned 1 The key cannot be converted to UTF-8.',
	'the bad one is abandoned with the reason');
is_deeply([ map { $_->{payload} } @{ kafka_read($broker, 'enc.t') } ],
	[ 'before', 'after' ], 'Kafka has the good ones');

# --- DROP DATABASE of a database whose events are not delivered is
# refused, as DROP EXTENSION is, until they are published or discarded;
# here its worker is off (outbox.enabled), the event waits
$node->safe_psql('postgres', 'ALTER DATABASE app SET outbox.enabled = off');
ok(wait_for_sql($node, "SELECT state = 'disabled' FROM outbox_worker_status()"),
	'the worker of app is off');
$node->safe_psql('app', "SELECT outbox_enqueue('held.t', 'x'::text)");
($ret, $out, $err) = $node->psql('postgres', 'DROP DATABASE app');
like($err,
	qr/ERROR:  database "app" (may hold|holds) events of extension outbox that are not delivered/,
	'DROP DATABASE of a database holding an event not delivered is refused');
like($err, qr/HINT:  .*SELECT outbox_discard\(\)/, 'the hint says how to give it up');
$node->restart;
ok(wait_for_sql($node, "SELECT state = 'disabled' FROM outbox_worker_status()"),
	'after a restart, the worker of app is off');
($ret, $out, $err) = $node->psql('postgres', 'DROP DATABASE app');
like($err,
	qr/ERROR:  database "app" may hold events of extension outbox that are not delivered\nDETAIL:  No outbox worker has looked there since the server started or since the database was last served: events from before may wait there\./,
	'and DROP DATABASE is still refused: what no worker has looked at may hold events, as it says');
($ret, $out, $err) = $node->psql('postgres', 'CREATE DATABASE plain; DROP DATABASE plain');
is($err, '', 'DROP DATABASE of a database without the extension is not refused');
$node->safe_psql('app', 'SELECT outbox_discard()');
$node->safe_psql('postgres', 'ALTER DATABASE app RESET outbox.enabled');
ok(wait_for_sql($node, "SELECT state = 'idle' FROM outbox_worker_status()", 20),
	'its event discarded, the worker serves the database again');

# --- a transaction held open there by any role, which enqueued nothing,
# does not make delivered events "not delivered" to DROP DATABASE
my $holder = $node->background_psql('app');
$holder->query_safe('BEGIN; SELECT pg_current_xact_id()');
$node->safe_psql('app', "SELECT outbox_enqueue('open.t', 'x'::text)");
is(scalar @{ wait_for_records($broker, 'open.t', 1, 20) }, 1, 'an event is published while a transaction is open');
my $refused = 1;
for (1 .. 50)
{
	($ret, $out, $err) = $node->psql('postgres', 'DROP DATABASE app');
	$refused = $err =~ /not delivered/;
	last unless $refused;
	usleep(200_000);
}
like($err, qr/database "app" is being accessed by other users/,
	'DROP DATABASE is refused for the session only, not for events not delivered');
$holder->quit;

# --- DROP DATABASE of the served database succeeds without FORCE, and
# the worker is not started into it again
my $start = time;
my ($dropped) = $node->psql('postgres', 'DROP DATABASE app');
is($dropped, 0, 'DROP DATABASE of the worker\'s database succeeds');
ok(time - $start < 5, 'within 5 seconds');
ok( wait_for_sql($node,
		"SELECT state = 'waiting for database' AND pid IS NULL FROM outbox_worker_status()"),
	'then the launcher waits for the database again');

$node->stop;
$broker->stop;
done_testing();
