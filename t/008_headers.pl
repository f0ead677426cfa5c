
# Headers from the transaction: with SET LOCAL outbox.headers, an enqueued
# event and a captured row change of that transaction arrive in Kafka with
# those headers (beside event_id, under the call's own); a transaction
# without it adds none.

use strict;
use warnings;

use OutboxTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $TRACEPARENT = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';

my ($node, $broker) =
  outbox_node_with_broker('headers', 'outbox.poll_interval' => '100ms');
$node->safe_psql(
	'postgres', qq{
	CREATE TABLE orders (id int PRIMARY KEY, total numeric);
	SELECT outbox_attach('orders', 'orders.changes');
	BEGIN;
	SET LOCAL outbox.headers = '{"traceparent": "$TRACEPARENT", "tenant": "acme"}';
	INSERT INTO orders VALUES (1, 9.99);
	SELECT outbox_enqueue('orders', '{"id": 1}'::jsonb, key => '1', headers => '{"tenant": "acme-eu"}');
	COMMIT;
	BEGIN;
	INSERT INTO orders VALUES (2, 5.00);
	SELECT outbox_enqueue('orders', '{"id": 2}'::jsonb, key => '2');
	COMMIT;
});

my $changes = wait_for_records($broker, 'orders.changes', 2);
my $events = wait_for_records($broker, 'orders', 2);
my ($change1) = grep { $_->{key} eq '1' } @$changes;
my ($change2) = grep { $_->{key} eq '2' } @$changes;
my ($event1) = grep { $_->{key} eq '1' } @$events;
my ($event2) = grep { $_->{key} eq '2' } @$events;

is_deeply([ @{ $change1->{headers} }{qw(traceparent tenant)} ],
	[ $TRACEPARENT, 'acme' ], 'the captured change carries the transaction\'s headers');
ok($change1->{headers}{event_id}, 'beside its event_id');
is_deeply([ @{ $event1->{headers} }{qw(traceparent tenant)} ],
	[ $TRACEPARENT, 'acme-eu' ],
	'the enqueued event too, the call\'s own header winning');
is_deeply([ sort keys %{ $change2->{headers} } ],
	['event_id'], 'a transaction without the setting adds none: capture');
is_deeply([ sort keys %{ $event2->{headers} } ],
	['event_id'], 'and enqueue');

$node->stop;
$broker->stop;
done_testing();
