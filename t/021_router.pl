
# An outbox table in the shape Debezium's outbox event router reads,
# attached with outbox_attach_router and its defaults, which are
# Debezium's with the converters of its outbox example (JsonConverter for
# keys and values, schemas.enable=false): each insert arrives in Kafka as
# the router writes it, checked for every record of several transactions,
# aggregate types and ids, rows deleted in the transaction that inserted
# them: topic outbox.event.<aggregatetype>, key aggregateid as a JSON
# string, headers id and event_id (the same) and type as eventType, value
# the payload's text as a JSON string (a null payload the JSON null),
# timestamp the transaction's start or the timestamp column.  Updates and
# deletes publish nothing; expand_payload => true writes the payload
# expanded; the key's bytes choose the partition as Kafka Connect's
# producer would: "1" (the JSON converter's) and 1 (key_converter =>
# 'string') go to different partitions of six.

use strict;
use warnings;

use JSON::PP;
use OutboxTest;
use PostgreSQL::Test::Utils;
use Test::More;

my ($node, $broker) =
  outbox_node_with_broker('router', 'outbox.poll_interval' => '100ms');
$node->safe_psql(
	'postgres', q{
	CREATE TABLE outboxevent (
		id				uuid NOT NULL PRIMARY KEY,
		aggregatetype	varchar(255) NOT NULL,
		aggregateid		varchar(255) NOT NULL,
		type			varchar(255) NOT NULL,
		payload			jsonb
	);
	SELECT outbox_attach_router('outboxevent', header_columns => '{type:eventType}');
});
my $json_string = JSON::PP->new->allow_nonref;

# Debezium's documentation: the example event, and the value the router
# writes for it, expanded and not
my $DOC_ID = '4d47e190-0402-4048-bc2c-89dd54343cdc';
my $DOC_PAYLOAD =
  '{"id": 1, "lineItems": [{"id": 1, "item": "Debezium in Action", "status": "ENTERED", "quantity": 2, "totalPrice": 39.98}, {"id": 2, "item": "Debezium for Dummies", "status": "ENTERED", "quantity": 1, "totalPrice": 29.99}], "orderDate": "2019-01-31T12:13:01", "customerId": 123}';
my $DOC_EXPANDED =
  '{"id":1,"lineItems":[{"id":1,"item":"Debezium in Action","status":"ENTERED","quantity":2,"totalPrice":39.98},{"id":2,"item":"Debezium for Dummies","status":"ENTERED","quantity":1,"totalPrice":29.99}],"orderDate":"2019-01-31T12:13:01","customerId":123}';
my $DOC_ESCAPED =
  '"{\"id\": 1, \"lineItems\": [{\"id\": 1, \"item\": \"Debezium in Action\", \"status\": \"ENTERED\", \"quantity\": 2, \"totalPrice\": 39.98}, {\"id\": 2, \"item\": \"Debezium for Dummies\", \"status\": \"ENTERED\", \"quantity\": 1, \"totalPrice\": 29.99}], \"orderDate\": \"2019-01-31T12:13:01\", \"customerId\": 123}"';
my $DOC_TIMESTAMP = 1556890294484;

my $json = JSON::PP->new->canonical;

# the events written, in order: id, type, aggregate type and id, payload,
# the start of their transaction in ms
my @events;
my $n = 0;

# One transaction: inserts of [aggregatetype, aggregateid, type, payload],
# deleted at its end if $delete.
sub transaction
{
	my ($delete, @rows) = @_;
	my $sql = 'BEGIN;';
	my @ids;
	for my $row (@rows)
	{
		my ($type, $aggregate, $event_type, $payload) = @$row;
		my $id = $n == 0 ? $DOC_ID : sprintf('00000000-0000-4000-8000-%012d', $n);
		$n++;
		push @ids, $id;
		$payload = defined $payload ? "'$payload'" : 'NULL';
		$sql .= "INSERT INTO outboxevent VALUES ('$id', '$type', '$aggregate', '$event_type', $payload);";
	}
	$sql .= 'SELECT floor(extract(epoch FROM now()) * 1000)::bigint;';
	$sql .= 'DELETE FROM outboxevent;' if $delete;
	$sql .= 'COMMIT;';
	my $started = $node->safe_psql('postgres', $sql);
	for my $i (0 .. $#rows)
	{
		push @events,
		  {
			id => $ids[$i],
			type => $rows[$i][0],
			aggregate => $rows[$i][1],
			event_type => $rows[$i][2],
			payload => $rows[$i][3],
			started => $started
		  };
	}
	return;
}

transaction(
	1,
	[ 'order', '1', 'OrderCreated', $DOC_PAYLOAD ],
	[ 'customer', 'c7', 'CustomerCreated', '{"name": "ann", "note": null, "tags": []}' ]);
transaction(0, [ 'order', '1', 'OrderLineUpdated', '{"id": 1, "line": 2, "status": "CANCELLED"}' ]);
transaction(
	1,
	[ 'order', '2', 'OrderCreated', '{"id": 2, "lineItems": []}' ],
	[ 'shipment', 's-1', 'ShipmentCreated', '[1, "two", {"three": 3.0}]' ],
	[ 'order', '1', 'OrderPaid', '"paid"' ],
	[ 'customer', 'c7', 'CustomerDeleted', undef ]);
transaction(1, map { [ 'order', 1 + $_ % 3, "OrderStep$_", "{\"step\": $_}" ] } 1 .. 6);

# update and delete publish nothing: afterwards, one last event
$node->safe_psql(
	'postgres', q{
	UPDATE outboxevent SET type = 'Changed';
	DELETE FROM outboxevent;
});
transaction(1, [ 'order', '3', 'Last', '{}' ]);

# what the router writes of a JSON document with the default settings
# (table.json.payload.null.behavior and .empty.array.behavior: ignore)
sub expanded
{
	my ($doc) = @_;
	if (ref $doc eq 'HASH')
	{
		my %kept;
		for my $k (keys %$doc)
		{
			my $v = $doc->{$k};
			next if !defined $v || (ref $v eq 'ARRAY' && !@$v);
			$kept{$k} = expanded($v);
		}
		return \%kept;
	}
	return [ map { expanded($_) } @$doc ] if ref $doc eq 'ARRAY';
	return $doc;
}

my %topics = map { ("outbox.event.$_->{type}" => 1) } @events;
my %records;
for my $topic (sort keys %topics)
{
	my $want = grep { "outbox.event.$_->{type}" eq $topic } @events;
	wait_for_records($broker, $topic, $want);
	$records{$topic} = kafka_read_json($broker, $topic);
	is(scalar @{ $records{$topic} }, $want, "$topic: one record per insert, $want");
}

# every record, against its event (the first of its key not yet taken)
my %taken;
for my $event (@events)
{
	my $topic = "outbox.event.$event->{type}";
	my $key = $json_string->encode("$event->{aggregate}");
	my ($record) = grep { $_->{key} eq $key && !$taken{"$topic/$_->{partition}/$_->{offset}"} }
	  @{ $records{$topic} };
	my $what = "$event->{event_type} ($event->{id})";
	ok($record, "$what: in $topic, key $key") or next;
	$taken{"$topic/$record->{partition}/$record->{offset}"} = 1;
	my %headers = @{ $record->{headers} };
	is_deeply(
		\%headers,
		{ id => $event->{id}, event_id => $event->{id}, eventType => $event->{event_type} },
		"$what: headers id and event_id (the same), eventType");
	is($record->{ts}, $event->{started}, "$what: timestamp, the transaction's start");
	if (!defined $event->{payload})
	{
		is($record->{payload}, 'null', "$what: a null payload is the JSON null, not a tombstone");
		next;
	}
	my $stored = $node->safe_psql('postgres', "SELECT '$event->{payload}'::jsonb::text");
	is($record->{payload}, $json_string->encode($stored),
		"$what: the payload's text as a JSON string");
}

# the documentation's example, byte for byte
my ($doc) = grep { $_->{headers}[1] eq $DOC_ID } @{ $records{'outbox.event.order'} };
is($doc->{payload}, $DOC_ESCAPED, 'the documentation\'s example as a JSON string, byte for byte');
is($doc->{key}, '"1"', 'its key is the aggregateid as a JSON string');

# per key, in the order of the inserts
my @order_1 = map { $_->{event_type} } grep { $_->{type} eq 'order' && $_->{aggregate} eq '1' } @events;
is_deeply(
	[
		map { my %h = @{ $_->{headers} }; $h{eventType} }
		grep { $_->{key} eq '"1"' } @{ $records{'outbox.event.order'} }
	],
	\@order_1,
	'the events of one aggregate arrive in order');

is($node->safe_psql('postgres', 'SELECT count(*) FROM outboxevent'),
	0, 'the outbox table is empty');
is( $node->safe_psql(
		'postgres',
		"SELECT count(*) FILTER (WHERE event_id::text = headers->>'id') || '/' || count(*) FROM outbox_messages"
	),
	scalar(@events) . '/' . scalar(@events),
	'each event\'s event_id is its id');

# expanded, and the timestamp from a column: the documentation's example
# again, expanded, with its timestamp; then another document, expanded
# without its null members and empty arrays.  On a topic of six
# partitions: the key "1" goes to partition 4, as murmur2 of its three
# bytes says; with key_converter => 'string' the key 1 goes to partition 3.
$broker->command('create outbox.event.invoice 6');
$node->safe_psql(
	'postgres', qq{
	ALTER TABLE outboxevent ADD COLUMN ts timestamptz;
	SELECT outbox_attach_router('outboxevent', timestamp_column => 'ts',
								header_columns => '{type:eventType}', expand_payload => true);
	INSERT INTO outboxevent VALUES ('5e58f2a1-0402-4048-bc2c-89dd54343cdc', 'invoice', '1',
		'InvoiceCreated', '$DOC_PAYLOAD', to_timestamp($DOC_TIMESTAMP / 1000.0));
	INSERT INTO outboxevent VALUES ('6f69a3b2-0402-4048-bc2c-89dd54343cdc', 'invoice', '1',
		'InvoiceChanged', '{"name": "ann", "note": null, "tags": [], "lines": [{"a": [], "b": 1}]}', NULL);
	SELECT outbox_attach_router('outboxevent', key_converter => 'string');
	INSERT INTO outboxevent VALUES ('7a7ab4c3-0402-4048-bc2c-89dd54343cdc', 'invoice', '1',
		'InvoicePaid', '{}', NULL);
});
wait_for_records($broker, 'outbox.event.invoice', 3);
my $records = kafka_read_json($broker, 'outbox.event.invoice');
my %invoice = map { my %h = @{ $_->{headers} }; ($h{eventType} // 'InvoicePaid') => $_ } @$records;
is($invoice{InvoiceCreated}{payload}, $DOC_EXPANDED,
	'expand_payload => true: the documentation\'s example expanded, byte for byte');
is($invoice{InvoiceCreated}{ts}, $DOC_TIMESTAMP, 'the timestamp column is the record\'s timestamp');
is_deeply(
	JSON::PP->new->decode($invoice{InvoiceChanged}{payload}),
	expanded(JSON::PP->new->decode('{"name": "ann", "note": null, "tags": [], "lines": [{"a": [], "b": 1}]}')),
	'expanded: null members and empty arrays left out');
is($invoice{InvoiceCreated}{partition}, 4, 'the key "1" goes to partition 4 of 6 (murmur2 of "1")');
is($invoice{InvoicePaid}{key}, '1', 'key_converter => string: the key as it is');
is($invoice{InvoicePaid}{partition}, 3, 'the key 1 goes to partition 3 of 6 (murmur2 of 1)');

$node->stop;
$broker->stop;
done_testing();
