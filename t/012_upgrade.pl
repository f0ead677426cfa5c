
# ALTER EXTENSION outbox UPDATE with the worker: a 1.0 installation (the
# script kept in the repository) with pending, failed, published and
# abandoned rows, which this library does not serve, is updated to 1.1,
# which it serves as it is, then to 1.2.  The pending and the failed events
# are published, the published and abandoned ones are not sent again, every
# row keeps its history, and what is enqueued at 1.1 and at 1.2 is
# published too.

use strict;
use warnings;

use OutboxTest;
use PostgreSQL::Test::Utils;
use Test::More;

# (the extension in postgres answers outbox_worker_status(); up's is 1.0)
my ($node, $broker) = outbox_node_with_broker('upgrade');
$node->safe_psql('postgres', 'CREATE DATABASE up');

# rows in every state, written by hand: this library runs none of 1.0's C
$node->safe_psql(
	'up', q{
	CREATE EXTENSION outbox VERSION '1.0';
	INSERT INTO outbox_messages (topic, key, payload)
		SELECT 'up.t', 'k' || i, convert_to('e' || i, 'UTF8') FROM generate_series(1, 6) i;
	UPDATE outbox_messages SET status = 'published', attempts = 1, published_at = now(),
		   kafka_partition = 0, kafka_offset = 10 WHERE id = 1;
	UPDATE outbox_messages SET status = 'failed', attempts = 1, next_attempt_at = now(),
		   last_error = 'Local: Message timed out' WHERE id = 2;
	UPDATE outbox_messages SET status = 'abandoned', attempts = 1,
		   last_error = 'Broker: Message size too large' WHERE id = 3;
});
ok( wait_for_sql($node,
		"SELECT state = 'waiting for extension' AND last_error LIKE 'extension outbox is at version 1.0, which this library no longer serves%' FROM outbox_worker_status() WHERE database = 'up'"
	),
	'at 1.0, the worker waits and says to update');
is(scalar @{ kafka_read($broker, 'up.t') }, 0, 'and publishes nothing');

$node->safe_psql('up', "ALTER EXTENSION outbox UPDATE TO '1.1'");
my $records = wait_for_records($broker, 'up.t', 4);
is_deeply([ sort map { $_->{payload} } @$records ],
	[qw(e2 e4 e5 e6)],
	'at 1.1, served as it is: the failed and the pending events are published, nothing else');
$node->safe_psql('up', "SELECT outbox_enqueue('up.t', 'at 1.1'::text, key => 'k1')");
ok(scalar @{ wait_for_records($broker, 'up.t', 5) } == 5, 'what is enqueued at 1.1 is published');

$node->safe_psql('up', 'ALTER EXTENSION outbox UPDATE');
$node->safe_psql('up', "SELECT outbox_enqueue('up.t', 'at 1.2'::text, key => 'k1')");
$records = wait_for_records($broker, 'up.t', 6);
is_deeply([ map { $_->{payload} } grep { $_->{key} eq 'k1' } @$records ],
	[ 'at 1.1', 'at 1.2' ],
	'what is enqueued at 1.2 is published, after the earlier event of its key');
ok( wait_for_sql($node,
		"SELECT count(*) = 6 FROM outbox_messages WHERE status = 'published' AND id <> 1",
		60, 'up'),
	'and every delivery is recorded');
is( $node->safe_psql('up',
		"SELECT string_agg(id || ':' || status || ':' || attempts || ':' || coalesce(kafka_offset::text, '-') || ':' || coalesce(last_error, '-'), ',' ORDER BY id) FROM outbox_messages WHERE id <= 3"
	),
	'1:published:1:10:-,2:published:2:'
	  . $node->safe_psql('up', 'SELECT kafka_offset FROM outbox_messages WHERE id = 2')
	  . ':Local: Message timed out,3:abandoned:1:-:Broker: Message size too large',
	'the rows of 1.0 keep their attempts, offsets and errors');

$node->stop;
$broker->stop;
done_testing();
