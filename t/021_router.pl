
# An outbox table in the shape Debezium's outbox event router reads,
# attached with outbox_attach_router: each insert arrives in Kafka as the
# router writes it with the JSON converter (its documentation's example,
# record for record), checked for every record of several transactions,
# aggregate types and ids, rows deleted in the transaction that inserted
# them: topic outbox.event.<aggregatetype>, key aggregateid, headers id
# and event_id (the same) and type as eventType, value the payload
# expanded, timestamp the transaction's start or the timestamp column.
# Updates and deletes publish nothing; expand_payload => false writes the
# payload's text as a JSON string.

use strict;
use warnings;

use JSON::PP;
use OutboxTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $broker = start_broker(1);
my $node = outbox_node('router', $broker, 'outbox.poll_interval' => '100ms');
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
	my ($record) = grep { $_->{key} eq $event->{aggregate} && !$taken{"$topic/$_->{partition}/$_->{offset}"} }
	  @{ $records{$topic} };
	my $what = "$event->{event_type} ($event->{id})";
	ok($record, "$what: in $topic, key $event->{aggregate}") or next;
	$taken{"$topic/$record->{partition}/$record->{offset}"} = 1;
	my %headers = @{ $record->{headers} };
	is_deeply(
		\%headers,
		{ id => $event->{id}, event_id => $event->{id}, eventType => $event->{event_type} },
		"$what: headers id and event_id (the same), eventType");
	is($record->{ts}, $event->{started}, "$what: timestamp, the transaction's start");
	if (!defined $event->{payload})
	{
		is($record->{payload}, undef, "$what: a null payload is a tombstone");
		next;
	}
	my $stored = $node->safe_psql('postgres', "SELECT '$event->{payload}'::jsonb::text");
	if ($stored =~ /^[\[{]/)
	{
		unlike($record->{payload}, qr/\s(?=(?:[^"]*"[^"]*")*[^"]*$)/,
			"$what: expanded, without white space");
		is_deeply(JSON::PP->new->decode($record->{payload}),
			expanded(JSON::PP->new->decode($stored)),
			"$what: the payload, null members and empty arrays left out");
	}
	else
	{
		is($record->{payload}, JSON::PP->new->allow_nonref->encode($stored),
			"$what: not an object or array: its text as a JSON string");
	}
}

# the documentation's example, byte for byte
my ($doc) = grep { $_->{headers}[1] eq $DOC_ID } @{ $records{'outbox.event.order'} };
is($doc->{payload}, $DOC_EXPANDED, 'the documentation\'s example, expanded, byte for byte');
is($doc->{key}, '1', 'its key is the aggregateid');

# per key, in the order of the inserts
my @order_1 = map { $_->{event_type} } grep { $_->{type} eq 'order' && $_->{aggregate} eq '1' } @events;
is_deeply(
	[
		map { my %h = @{ $_->{headers} }; $h{eventType} }
		grep { $_->{key} eq '1' } @{ $records{'outbox.event.order'} }
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

# not expanded, and the timestamp from a column: the documentation's
# example again, as its text in a JSON string, with its timestamp
$node->safe_psql(
	'postgres', qq{
	ALTER TABLE outboxevent ADD COLUMN ts timestamptz;
	SELECT outbox_attach_router('outboxevent', timestamp_column => 'ts',
								header_columns => '{type:eventType}', expand_payload => false);
	INSERT INTO outboxevent VALUES ('5e58f2a1-0402-4048-bc2c-89dd54343cdc', 'invoice', '1',
		'InvoiceCreated', '$DOC_PAYLOAD', to_timestamp($DOC_TIMESTAMP / 1000.0));
});
my $records = wait_for_records($broker, 'outbox.event.invoice', 1);
$records = kafka_read_json($broker, 'outbox.event.invoice');
is($records->[0]{payload}, $DOC_ESCAPED,
	'expand_payload => false: the payload as a JSON string, as the documentation shows it');
is($records->[0]{ts}, $DOC_TIMESTAMP, 'the timestamp column is the record\'s timestamp');

$node->stop;
$broker->stop;
done_testing();
