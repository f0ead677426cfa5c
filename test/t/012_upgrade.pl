
# ALTER EXTENSION outbox UPDATE with the worker: a 1.0 installation (the
# script kept in the repository) with pending, failed, published and
# abandoned rows is updated to 1.1, then served; the pending and the failed
# events are published, the published and abandoned ones are not sent
# again, and every row keeps its history.

use strict;
use warnings;

use OutboxTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $broker = start_broker(1);
# no database served until the update is done
my $node = outbox_node('upgrade', $broker, 'outbox.databases' => 'up');
$node->safe_psql('postgres', 'DROP EXTENSION outbox');
$node->safe_psql('postgres', 'CREATE DATABASE up');
reconfigure($node, "SET outbox.databases = 'nothing'");

$node->safe_psql(
	'up', q{
	CREATE EXTENSION outbox VERSION '1.0';
	-- (the library of 1.1 enqueues into the log of 1.1 only)
	INSERT INTO outbox_messages (topic, key, payload)
		SELECT 'up.t', 'k' || i, convert_to('e' || i, 'UTF8') FROM generate_series(1, 6) i;
	SELECT outbox_mark_published('{1}', '{0}', '{10}', true);
	SELECT outbox_mark_failed('{2}', '{"Local: Message timed out"}', '{f}', 10, '0s', '0s', 0, '');
	SELECT outbox_mark_failed('{3}', '{"Broker: Message size too large"}', '{t}', 10, '0s', '0s', 0, '');
});
is( $node->safe_psql('up',
		"SELECT string_agg(id || ':' || status, ',' ORDER BY id) FROM outbox_messages"),
	'1:published,2:failed,3:abandoned,4:pending,5:pending,6:pending',
	'1.0 holds rows in every state');

$node->safe_psql('up', "ALTER EXTENSION outbox UPDATE TO '1.1'");
reconfigure($node, "SET outbox.databases = 'up'");

my $records = wait_for_records($broker, 'up.t', 4);
is_deeply([ sort map { $_->{payload} } @$records ],
	[qw(e2 e4 e5 e6)],
	'after the update the failed and the pending events are published, nothing else');
ok( wait_for_sql($node,
		"SELECT count(*) = 4 FROM outbox_messages WHERE status = 'published' AND id <> 1",
		60, 'up'),
	'and recorded as published');
is( $node->safe_psql('up',
		"SELECT string_agg(id || ':' || status || ':' || attempts || ':' || coalesce(kafka_offset::text, '-') || ':' || coalesce(last_error, '-'), ',' ORDER BY id) FROM outbox_messages WHERE id <= 3"
	),
	'1:published:1:10:-,2:published:2:'
	  . $node->safe_psql('up', 'SELECT kafka_offset FROM outbox_messages WHERE id = 2')
	  . ':Local: Message timed out,3:abandoned:1:-:Broker: Message size too large',
	'the rows of 1.0 keep their attempts, offsets and errors');

done_testing();
