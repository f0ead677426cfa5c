
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
use MIME::Base64;
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

# an id used before (the documentation's example, its row deleted since,
# as the outbox pattern does) is published again: the router copies the
# id to header id and checks nothing (debezium-connect-plugins
# .../transforms/outbox/EventRouterDelegate.java 152-161, at debezium
# aad5519); consumers deduplicate by it if they want
my ($ret, $out, $err) = $node->psql('postgres', qq{
	BEGIN;
	INSERT INTO outboxevent VALUES ('$DOC_ID', 'order', '1', 'OrderCreated', '{"again": true}');
	DELETE FROM outboxevent;
	COMMIT;});
is($ret, 0, 'an id used before: the insert commits') or diag($err);
my $again = wait_for_records($broker, 'outbox.event.order',
	1 + scalar grep { $_->{type} eq 'order' } @events);
is_deeply(
	[ map { $_->{payload} } grep { ($_->{headers}{id} // '') eq $DOC_ID } @$again ],
	[ $DOC_ESCAPED, '"{\"again\": true}"' ],
	'an id used before: published again, in order, header id the same');

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


# converter => 'avro': the router's records as Confluent's AvroConverter
# writes them (key.converter and value.converter), each in the registry's
# wire format (a zero byte, the schema's id in 4 bytes big-endian, the
# Avro binary), the schemas registered under <topic>-value and
# <topic>-key (TopicNameStrategy).  The value is the payload column with
# its schema in the connector's value (EventRouterDelegate.java 145-149
# and 224-226: no additional field in the envelope, the payload as it
# is), a jsonb column's the connector's Json, a string named
# io.debezium.data.Json, version 1 (PostgresValueConverter.java 250-252,
# debezium-connector-common .../data/Json.java), a bytea column's bytes
# (283); nullable, so ["null", T] (TableSchemaBuilder.java 422-424,
# AvroData.java 1134-1150), a value the union's branch 1.  The key is
# aggregateid with its schema (EventRouterDelegate.java 233-238 and
# 288-303): a NOT NULL varchar, "string".  A null payload is a tombstone:
# AvroData gives null for a null, which the converter's serializer writes
# as no value (avro-converter .../AvroConverter.java 131-137 and 293-297).
# @kafkajs/confluent-schema-registry decodes them, with the BigInt hook or
# without (no long here).
SKIP:
{
	my $no_modules =
	  node_module_unavailable('avsc@5', 'kafkajs@2', '@kafkajs/confluent-schema-registry@3');
	skip "the consumer's modules: $no_modules", 10 if $no_modules;
	my $registry = start_schema_registry();
	$node->safe_psql('postgres',
		"ALTER SYSTEM SET outbox.schema_registry_url = '$registry->{url}'; SELECT pg_reload_conf()");
	my ($ret, $out, $err) = $node->psql(
		'postgres', q{
		CREATE TABLE avro_events (LIKE outboxevent INCLUDING ALL);
		CREATE TABLE avro_blobs (id uuid PRIMARY KEY, aggregatetype text NOT NULL,
								 aggregateid varchar(255) NOT NULL, payload bytea);
		SELECT outbox_attach_router('avro_events', 'avro.${routedByValue}',
									header_columns => '{type:eventType}', converter => 'avro');
		SELECT outbox_attach_router('avro_blobs', 'avro.${routedByValue}', converter => 'avro');
	});
	is($ret, 0, 'converter => avro: attached') or diag($err);
	$node->safe_psql(
		'postgres', qq{
		INSERT INTO avro_events VALUES ('00000000-0000-4000-8000-000000000900', 'order', '1', 'OrderCreated', '$DOC_PAYLOAD');
		INSERT INTO avro_events VALUES ('00000000-0000-4000-8000-000000000901', 'order', '1', 'OrderDeleted', NULL);
		INSERT INTO avro_blobs VALUES ('00000000-0000-4000-8000-000000000902', 'blob', 'b1', '\\x00ff10');
		DELETE FROM avro_events;
		DELETE FROM avro_blobs;
	});
	my $json_schema =
	  { type => 'string', 'connect.version' => 1, 'connect.name' => 'io.debezium.data.Json' };
	is_deeply(
		{
			map { $_ => [ map { $_->{schema} } @{ $registry->versions($_) } ] }
			  qw(avro.order-value avro.order-key avro.blob-value avro.blob-key)
		},
		{
			'avro.order-value' => [ [ 'null', $json_schema ] ],
			'avro.order-key' => ['string'],
			'avro.blob-value' => [ [ 'null', 'bytes' ] ],
			'avro.blob-key' => ['string']
		},
		'the schemas registered, one version each: the payload column\'s, the key column\'s');

	# Avro's binary: a long zig-zag and varint, a string its length then
	# its UTF-8; the registry's wire format around it
	my $avro_long = sub {
		my ($n) = @_;
		my ($z, $bytes) = (($n << 1) ^ ($n >> 63), '');
		while ($z > 0x7f) { $bytes .= chr(($z & 0x7f) | 0x80); $z >>= 7; }
		return $bytes . chr($z);
	};
	my $avro_string = sub {
		my ($s) = @_;
		utf8::encode($s);
		return $avro_long->(length $s) . $s;
	};
	my $wire = sub {
		my ($subject, $avro) = @_;
		my $id = $registry->versions($subject)->[0]{id} // -1;
		return "\0" . pack('N', $id) . $avro;
	};
	my $stored = $node->safe_psql('postgres', "SELECT '$DOC_PAYLOAD'::jsonb::text");
	for my $hook (0, 1)
	{
		my $with = $hook ? 'with the BigInt hook' : 'without it';
		my $records = consume_avro($broker, $registry, 3, [ 'avro.order', 'avro.blob' ],
			without_bigint_hook => !$hook);
		my %by_type = map { ($_->{headers}{eventType} // $_->{topic}) => $_ } @$records;
		is_deeply(
			[
				map { [ $_->{key}, $_->{value}, decode_base64($_->{key_bytes}), defined $_->{value_bytes} ? decode_base64($_->{value_bytes}) : undef ] }
				  @by_type{qw(OrderCreated OrderDeleted avro.blob)}
			],
			[
				[
					'1', $stored,
					$wire->('avro.order-key', $avro_string->('1')),
					$wire->('avro.order-value', "\x02" . $avro_string->($stored))
				],
				[ '1', undef, $wire->('avro.order-key', $avro_string->('1')), undef ],
				[
					'b1', 'AP8Q',
					$wire->('avro.blob-key', $avro_string->('b1')),
					$wire->('avro.blob-value', "\x02" . $avro_long->(3) . "\x00\xff\x10")
				]
			],
			"decoded $with: the keys, the payloads, a null payload a tombstone; the bytes");
		is_deeply(
			[ @{ $by_type{OrderCreated}{headers} }{qw(id eventType)} ],
			[ '00000000-0000-4000-8000-000000000900', 'OrderCreated' ],
			"decoded $with: headers id and eventType, as with the JSON converter");
	}
	$registry->stop;

	# the registry down: a topic whose schemas were registered goes on, in
	# a new session (the ids kept in outbox_schema_ids); a topic that needs
	# new ones fails the insert with 08006, nothing stored
	($ret, $out, $err) = $node->psql('postgres',
		q{INSERT INTO avro_events VALUES ('00000000-0000-4000-8000-000000000903', 'order', '2', 'OrderPaid', '{"n": 1}')});
	is($ret, 0, 'the registry down: an event of a registered topic is stored') or diag($err);
	($ret, $out, $err) = $node->psql('postgres',
		q{INSERT INTO avro_events VALUES ('00000000-0000-4000-8000-000000000904', 'invoice', '2', 'InvoiceSent', '{"n": 1}')},
		extra_params => [ '-v', 'VERBOSITY=verbose' ]);
	like($err, qr/ERROR:  08006: .*subject "avro\.invoice-(key|value)"/s,
		'the registry down: an event that needs a new schema fails with 08006, naming the subject');
}

$node->stop;
$broker->stop;
done_testing();
