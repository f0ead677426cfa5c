
# Debezium's own fixtures, byte for byte: the tables and inserts of the
# PostgreSQL connector's tests (debezium-connector-postgres,
# src/test/resources/postgres_create_tables.ddl and
# AbstractRecordsProducerTest's INSERT_*_STMT), attached with
# outbox_attach(..., format => 'debezium') and its defaults, arrive in
# Kafka as the connector writes them with the JSON converter: each record's
# key, value (its "after", written down below from the test's expected
# values, as Kafka's JsonConverter.convertToJson serializes them: bytes as
# base64, Decimal as its unscaled value's bytes, NaN as a string), headers
# and partition (murmur2 of the key, as Kafka's default partitioner).
# Then decimal_handling in its three modes, deletes and their tombstones,
# truncates skipped, TOASTed values an update leaves alone, schemas_enable,
# and kafkajs decoding keys and values as a Debezium consumer does.

use strict;
use warnings;

use File::Basename qw(dirname);
use IPC::Run;
use JSON::PP;
use OutboxTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $drivers = dirname(__FILE__) . '/drivers';
my $PARTITIONS = 4;    # what the mock cluster auto-creates

my ($node, $broker) =
  outbox_node_with_broker('fixtures', 'outbox.poll_interval' => '100ms');
my $has = sub {
	$node->safe_psql('postgres',
		"SELECT count(*) FROM pg_available_extensions WHERE name = '$_[0]'") eq '1';
};
my $hstore = $has->('hstore');
my $citext = $has->('citext');
$node->safe_psql('postgres', 'CREATE EXTENSION hstore') if $hstore;
$node->safe_psql('postgres', 'CREATE EXTENSION citext') if $citext;

# Kafka's murmur2 (org.apache.kafka.common.utils.Utils.murmur2)
sub mul32
{
	my ($a, $b) = @_;
	return ((($a & 0xffff) * $b) + (((($a >> 16) * $b) & 0xffff) << 16)) & 0xffffffff;
}

sub murmur2
{
	my @b = unpack('C*', $_[0]);
	my $len = @b;
	my $m = 0x5bd1e995;
	my $h = (0x9747b28c ^ $len) & 0xffffffff;
	my $i = 0;
	for (; $len - $i >= 4; $i += 4)
	{
		my $k = $b[$i] | ($b[ $i + 1 ] << 8) | ($b[ $i + 2 ] << 16) | ($b[ $i + 3 ] << 24);
		$k = mul32($k, $m);
		$k ^= $k >> 24;
		$k = mul32($k, $m);
		$h = mul32($h, $m) ^ $k;
	}
	my $rest = $len - $i;
	$h ^= $b[ $i + 2 ] << 16 if $rest == 3;
	$h ^= $b[ $i + 1 ] << 8 if $rest >= 2;
	$h = mul32($h ^ $b[$i], $m) if $rest >= 1;
	$h ^= $h >> 13;
	$h = mul32($h, $m);
	$h ^= $h >> 15;
	return $h;
}

sub partition_of { return (murmur2($_[0]) & 0x7fffffff) % $PARTITIONS; }

# The fixtures: table (in schema public unless named), its DDL, Debezium's
# insert, outbox_attach's options, and the expected "after", with where it
# comes from.
my @FIXTURES = (
	{
		table => 'numeric_table',
		ddl => 'CREATE TABLE numeric_table (pk SERIAL, si SMALLINT, i INTEGER, bi BIGINT, r REAL, db DOUBLE PRECISION, r_int REAL, db_int DOUBLE PRECISION, r_nan REAL, db_nan DOUBLE PRECISION, r_pinf REAL, db_pinf DOUBLE PRECISION, r_ninf REAL, db_ninf DOUBLE PRECISION, ss SMALLSERIAL, bs BIGSERIAL, b BOOLEAN, o OID, PRIMARY KEY(pk))',
		insert => q{INSERT INTO numeric_table (si, i, bi, r, db, r_int, db_int, r_nan, db_nan, r_pinf, db_pinf, r_ninf, db_ninf, ss, bs, b, o) VALUES (1, 123456, 1234567890123, 3.3, 4.44, 3, 4, 'NaN', 'NaN', 'Infinity', 'Infinity', '-Infinity', '-Infinity', 1, 123, true, 4000000000)},
		# schemasAndValuesForNumericType
		after => '{"pk":1,"si":1,"i":123456,"bi":1234567890123,"r":3.3,"db":4.44,"r_int":3.0,"db_int":4.0,"r_nan":"NaN","db_nan":"NaN","r_pinf":"Infinity","db_pinf":"Infinity","r_ninf":"-Infinity","db_ninf":"-Infinity","ss":1,"bs":123,"b":true,"o":4000000000}'
	},
	{
		table => 'numeric_decimal_table',
		ddl => 'CREATE TABLE numeric_decimal_table (pk SERIAL, d DECIMAL(3,2), dzs DECIMAL(4), dvs DECIMAL, d_nn DECIMAL(3,2) NOT NULL, n NUMERIC(6,4), nzs NUMERIC(4), nvs NUMERIC, d_int DECIMAL(3,2), dzs_int DECIMAL(4), dvs_int DECIMAL, n_int NUMERIC(6,4), nzs_int NUMERIC(4), nvs_int NUMERIC, d_nan DECIMAL(3,2), dzs_nan DECIMAL(4), dvs_nan DECIMAL, n_nan NUMERIC(6,4), nzs_nan NUMERIC(4), nvs_nan NUMERIC, PRIMARY KEY(pk))',
		# INSERT_NUMERIC_DECIMAL_TYPES_STMT_NO_NAN
		insert => 'INSERT INTO numeric_decimal_table (d, dzs, dvs, d_nn, n, nzs, nvs, d_int, dzs_int, dvs_int, n_int, nzs_int, nvs_int, d_nan, dzs_nan, dvs_nan, n_nan, nzs_nan, nvs_nan) VALUES (1.1, 10.11, 10.1111, 3.30, 22.22, 22.2, 22.2222, 1, 10, 10, 22, 22, 22, null, null, null, null, null, null)',
		# schemasAndValuesForBigDecimalEncodedNumericTypes: 1.10 -> 110,
		# 10.1111 -> scale 4 and 101111, 22.2200 -> 222200 ...
		after => '{"pk":1,"d":"bg==","dzs":"Cg==","dvs":{"scale":4,"value":"AYr3"},"d_nn":"AUo=","n":"A2P4","nzs":"Fg==","nvs":{"scale":4,"value":"A2QO"},"d_int":"ZA==","dzs_int":"Cg==","dvs_int":{"scale":0,"value":"Cg=="},"n_int":"A1tg","nzs_int":"Fg==","nvs_int":{"scale":0,"value":"Fg=="},"d_nan":null,"dzs_nan":null,"dvs_nan":null,"n_nan":null,"nzs_nan":null,"nvs_nan":null}'
	},
	{
		schema => 'strmode',
		table => 'numeric_decimal_table',
		options => q{decimal_handling => 'string'},
		# INSERT_NUMERIC_DECIMAL_TYPES_STMT
		insert => q{INSERT INTO strmode.numeric_decimal_table (d, dzs, dvs, d_nn, n, nzs, nvs, d_int, dzs_int, dvs_int, n_int, nzs_int, nvs_int, d_nan, dzs_nan, dvs_nan, n_nan, nzs_nan, nvs_nan) VALUES (1.1, 10.11, 10.1111, 3.30, 22.22, 22.2, 22.2222, 1, 10, 10, 22, 22, 22, 'NaN', 'NaN', 'NaN', 'NaN', 'NaN', 'NaN')},
		# schemasAndValuesForStringEncodedNumericTypes
		after => '{"pk":1,"d":"1.10","dzs":"10","dvs":"10.1111","d_nn":"3.30","n":"22.2200","nzs":"22","nvs":"22.2222","d_int":"1.00","dzs_int":"10","dvs_int":"10","n_int":"22.0000","nzs_int":"22","nvs_int":"22","d_nan":"NAN","dzs_nan":"NAN","dvs_nan":"NAN","n_nan":"NAN","nzs_nan":"NAN","nvs_nan":"NAN"}'
	},
	{
		schema => 'dblmode',
		table => 'numeric_decimal_table',
		options => q{decimal_handling => 'double'},
		insert => q{INSERT INTO dblmode.numeric_decimal_table (d, dzs, dvs, d_nn, n, nzs, nvs, d_int, dzs_int, dvs_int, n_int, nzs_int, nvs_int, d_nan, dzs_nan, dvs_nan, n_nan, nzs_nan, nvs_nan) VALUES (1.1, 10.11, 10.1111, 3.30, 22.22, 22.2, 22.2222, 1, 10, 10, 22, 22, 22, 'NaN', 'NaN', 'NaN', 'NaN', 'NaN', 'NaN')},
		# schemasAndValuesForDoubleEncodedNumericTypes
		after => '{"pk":1,"d":1.1,"dzs":10.0,"dvs":10.1111,"d_nn":3.3,"n":22.22,"nzs":22.0,"nvs":22.2222,"d_int":1.0,"dzs_int":10.0,"dvs_int":10.0,"n_int":22.0,"nzs_int":22.0,"nvs_int":22.0,"d_nan":"NaN","dzs_nan":"NaN","dvs_nan":"NaN","n_nan":"NaN","nzs_nan":"NaN","nvs_nan":"NaN"}'
	},
	{
		table => 'cash_table',
		ddl => 'CREATE TABLE cash_table (pk SERIAL, csh MONEY, PRIMARY KEY(pk))',
		# INSERT_CASH_TYPES_STMT, INSERT_NEGATIVE_CASH_TYPES_STMT
		insert => q{INSERT INTO cash_table (csh) VALUES ('$1234.11'); INSERT INTO cash_table (csh) VALUES ('($1234.11)')},
		# schemaAndValuesForMoneyTypes: Decimal(2) 1234.11 -> 123411;
		# schemaAndValuesForNegativeMoneyTypes: -123411
		after => '{"pk":1,"csh":"AeIT"}',
		after2 => '{"pk":2,"csh":"/h3t"}'
	},
	{
		table => 'string_table',
		needs => $citext ? undef : 'citext',
		ddl => 'CREATE TABLE string_table (pk SERIAL, vc VARCHAR(2), vcv CHARACTER VARYING(2), ch CHARACTER(4), c CHAR(3), t TEXT, b BYTEA, bnn BYTEA NOT NULL, ct CITEXT, PRIMARY KEY(pk))',
		insert => q{INSERT INTO string_table (vc, vcv, ch, c, t, b, bnn, ct) VALUES (E'\u017E\u0161', 'bb', 'cdef', 'abc', 'some text', E'\\\\000\\\\001\\\\002'::bytea, E'\\\\003\\\\004\\\\005'::bytea, 'Hello World')},
		# schemasAndValuesForStringTypes
		after => qq{{"pk":1,"vc":"\x{17E}\x{161}","vcv":"bb","ch":"cdef","c":"abc","t":"some text","b":"AAEC","bnn":"AwQF","ct":"Hello World"}}
	},
	{
		table => 'bitbin_table',
		ddl => 'CREATE TABLE bitbin_table (pk SERIAL, ba BYTEA, bol BIT(1), bol2 BIT, bs BIT(2), bs7 BIT(7), bv1 BIT VARYING(1), bv BIT VARYING(2), bv2 BIT VARYING(24), bvl BIT VARYING(64), bvunlimited1 BIT VARYING, bvunlimited2 BIT VARYING, PRIMARY KEY(pk))',
		insert => q{INSERT INTO bitbin_table (ba, bol, bol2, bs, bs7, bv1, bv, bv2, bvl, bvunlimited1, bvunlimited2) VALUES (E'\\\\001\\\\002\\\\003'::bytea, '0'::bit(1), '1'::bit(1), '11'::bit(2), '1'::bit(7), '1'::bit varying(1), '00'::bit(2), '000000110000001000000001'::bit(24),'1000000000000000000000000000000000000000000000000000000000000000'::bit(64), '101', '111011010001000110000001000000001')},
		# schemaAndValuesForBinTypes: {3}, {64}, {}, {1,2,3},
		# {0,0,0,0,0,0,0,-128}, {5}, {1,2,35,-38,1}
		after => '{"pk":1,"ba":"AQID","bol":false,"bol2":true,"bs":"Aw==","bs7":"QA==","bv1":true,"bv":"","bv2":"AQID","bvl":"AAAAAAAAAIA=","bvunlimited1":"BQ==","bvunlimited2":"AQIj2gE="}'
	},
	{
		table => 'time_table',
		ddl => 'CREATE TABLE time_table (pk SERIAL, ts TIMESTAMP, tsneg TIMESTAMP(6) WITHOUT TIME ZONE, ts_ms TIMESTAMP(3), ts_us TIMESTAMP(6), tz TIMESTAMPTZ, date DATE, date_pinf DATE, date_ninf DATE, ti TIME, tip TIME(3), ttf TIME, ttz TIME WITH TIME ZONE, tptz TIME(3) WITH TIME ZONE, it INTERVAL, tsp TIMESTAMP (0) WITH TIME ZONE, ts_large TIMESTAMP, ts_large_us TIMESTAMP(6), ts_large_ms TIMESTAMP(3), tz_large TIMESTAMPTZ, ts_max TIMESTAMP(6), ts_min TIMESTAMP(6), tz_max TIMESTAMPTZ, tz_min TIMESTAMPTZ, ts_pinf TIMESTAMP(6), ts_ninf TIMESTAMP(6), tz_pinf TIMESTAMPTZ, tz_ninf TIMESTAMPTZ, tz_zero TIMESTAMP WITH TIME ZONE, PRIMARY KEY(pk))',
		insert => q{INSERT INTO time_table(ts, tsneg, ts_ms, ts_us, tz, date, date_pinf, date_ninf, ti, tip, ttf, ttz, tptz, it, ts_large, ts_large_us, ts_large_ms, tz_large, ts_max, ts_min, tz_max, tz_min, ts_pinf, ts_ninf, tz_pinf, tz_ninf, tz_zero) VALUES ('2016-11-04T13:51:30.123456'::TIMESTAMP, '1936-10-25T22:10:12.608'::TIMESTAMP, '2016-11-04T13:51:30.123456'::TIMESTAMP, '2016-11-04T13:51:30.123456'::TIMESTAMP, '2016-11-04T13:51:30.123456+02:00'::TIMESTAMPTZ, '2016-11-04'::DATE, 'infinity'::DATE, '-infinity'::DATE, '13:51:30'::TIME, '13:51:30.123'::TIME, '24:00:00'::TIME, '13:51:30.123789+02:00'::TIMETZ, '13:51:30.123+02:00'::TIMETZ, 'P1Y2M3DT4H5M6.78S'::INTERVAL,'21016-11-04T13:51:30.123456'::TIMESTAMP, '21016-11-04T13:51:30.123457'::TIMESTAMP, '21016-11-04T13:51:30.124'::TIMESTAMP,'21016-11-04T13:51:30.123456+07:00'::TIMESTAMPTZ,'294247-01-01T23:59:59.999999'::TIMESTAMP,'4713-12-31T23:59:59.999999 BC'::TIMESTAMP,'294247-01-01T23:59:59.999999+00:00'::TIMESTAMPTZ,'4714-12-31T23:59:59.999999Z BC'::TIMESTAMPTZ,'infinity'::TIMESTAMP,'-infinity'::TIMESTAMP,'infinity'::TIMESTAMPTZ,'-infinity'::TIMESTAMPTZ,'21016-11-04T13:51:30.000000+07:00'::TIMESTAMPTZ)},
		# schemaAndValuesForDateTimeTypes (date_pinf and date_ninf, which it
		# does not check, as docs/debezium.md says)
		after => '{"pk":1,"ts":1478267490123456,"tsneg":-1047174587392000,"ts_ms":1478267490123,"ts_us":1478267490123456,"tz":"2016-11-04T11:51:30.123456Z","date":17109,"date_pinf":2147483647,"date_ninf":-2147483648,"ti":49890000000,"tip":49890123,"ttf":86400000000,"ttz":"11:51:30.123789Z","tptz":"11:51:30.123Z","it":37091106780000,"tsp":null,"ts_large":601060312290123456,"ts_large_us":601060312290123457,"ts_large_ms":601060312290124,"tz_large":"+21016-11-04T06:51:30.123456Z","ts_max":9223371331199999999,"ts_min":-210831897600000001,"tz_max":"+294247-01-01T23:59:59.999999Z","tz_min":"-4713-12-31T23:59:59.999999Z","ts_pinf":9223372036825200000,"ts_ninf":-9223372036832400000,"tz_pinf":"infinity","tz_ninf":"-infinity","tz_zero":"+21016-11-04T06:51:30.000000Z"}'
	},
	{
		table => 'text_table',
		ddl => 'CREATE TABLE text_table (pk SERIAL, j JSON, jb JSONB, x XML, u Uuid, PRIMARY KEY(pk))',
		insert => q{INSERT INTO text_table(j, jb, x, u) VALUES ('{"bar": "baz"}'::json, '{"bar": "baz"}'::jsonb, '<foo>bar</foo><foo>bar</foo>'::xml, 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::UUID)},
		# schemasAndValuesForTextTypes
		after => '{"pk":1,"j":"{\"bar\": \"baz\"}","jb":"{\"bar\": \"baz\"}","x":"<foo>bar</foo><foo>bar</foo>","u":"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"}'
	},
	{
		table => 'network_address_table',
		ddl => 'CREATE TABLE network_address_table (pk SERIAL, i INET, c CIDR, m MACADDR, m8 MACADDR8, PRIMARY KEY(pk))',
		insert => q{INSERT INTO network_address_table (i, c, m, m8) VALUES ('192.168.2.0/12', '192.168.100.128/25', '08:00:2b:01:02:03', '08:00:2b:01:02:03:04:05')},
		# schemasAndValuesForNetworkAddressTypes, schemasAndValueForCidrAddressType,
		# schemasAndValueForMacaddrType, schemaAndValueForMacaddr8Type
		after => '{"pk":1,"i":"192.168.2.0/12","c":"192.168.100.128/25","m":"08:00:2b:01:02:03","m8":"08:00:2b:01:02:03:04:05"}'
	},
	{
		table => 'geom_table',
		ddl => 'CREATE TABLE geom_table (pk SERIAL, p POINT, PRIMARY KEY(pk))',
		insert => q{INSERT INTO geom_table(p) VALUES ('(1,1)'::point)},
		# schemaAndValuesForGeomTypes: Point.createValue(schema, 1, 1), the
		# WKB of POINT(1 1), little-endian
		after => '{"pk":1,"p":{"x":1.0,"y":1.0,"wkb":"AQEAAAAAAAAAAADwPwAAAAAAAPA/","srid":null}}'
	},
	{
		table => 'range_table',
		ddl => 'CREATE TABLE range_table (pk SERIAL, unbounded_exclusive_tsrange TSRANGE, bounded_inclusive_tsrange TSRANGE, unbounded_exclusive_tstzrange TSTZRANGE, bounded_inclusive_tstzrange TSTZRANGE, unbounded_exclusive_daterange DATERANGE, bounded_exclusive_daterange DATERANGE, int4_number_range INT4RANGE, numerange NUMRANGE, int8_number_range INT8RANGE, PRIMARY KEY(pk))',
		insert => q{INSERT INTO range_table (unbounded_exclusive_tsrange, bounded_inclusive_tsrange, unbounded_exclusive_tstzrange, bounded_inclusive_tstzrange, unbounded_exclusive_daterange, bounded_exclusive_daterange, int4_number_range, numerange, int8_number_range) VALUES ('[2019-03-31 15:30:00, infinity)', '[2019-03-31 15:30:00, 2019-04-30 15:30:00]', '[2017-06-05 11:29:12.549426+00,)', '[2017-06-05 11:29:12.549426+00, 2017-06-05 12:34:56.789012+00]', '[2019-03-31, infinity)', '[2019-03-31, 2019-04-30)', '[1000,6000)', '[5.3,6.3)', '[1000000,6000000)')},
		# schemaAndValuesForRangeTypes (tstzrange in UTC, the server's zone there)
		after => '{"pk":1,"unbounded_exclusive_tsrange":"[\"2019-03-31 15:30:00\",infinity)","bounded_inclusive_tsrange":"[\"2019-03-31 15:30:00\",\"2019-04-30 15:30:00\"]","unbounded_exclusive_tstzrange":"[\"2017-06-05 11:29:12.549426+00\",)","bounded_inclusive_tstzrange":"[\"2017-06-05 11:29:12.549426+00\",\"2017-06-05 12:34:56.789012+00\"]","unbounded_exclusive_daterange":"[2019-03-31,infinity)","bounded_exclusive_daterange":"[2019-03-31,2019-04-30)","int4_number_range":"[1000,6000)","numerange":"[5.3,6.3)","int8_number_range":"[1000000,6000000)"}'
	},
	{
		table => 'array_table',
		needs => $citext ? undef : 'citext',
		ddl => 'CREATE TABLE array_table (pk SERIAL, int_array INT[], bigint_array BIGINT[], text_array TEXT[], char_array CHAR(10)[], varchar_array VARCHAR(10)[], date_array DATE[], numeric_array NUMERIC(10, 2)[], varnumeric_array NUMERIC[3], citext_array CITEXT[], inet_array INET[], cidr_array CIDR[], macaddr_array MACADDR[], tsrange_array TSRANGE[], tstzrange_array TSTZRANGE[], daterange_array DATERANGE[], int4range_array INT4RANGE[],numerange_array NUMRANGE[], int8range_array INT8RANGE[], uuid_array UUID[], json_array json[], jsonb_array jsonb[], oid_array OID[], PRIMARY KEY(pk))',
		insert => q{INSERT INTO array_table (int_array, bigint_array, text_array, char_array, varchar_array, date_array, numeric_array, varnumeric_array, citext_array, inet_array, cidr_array, macaddr_array, tsrange_array, tstzrange_array, daterange_array, int4range_array, numerange_array, int8range_array, uuid_array, json_array, jsonb_array, oid_array) VALUES ('{1,2,3}', '{1550166368505037572}', '{"one","two","three"}', '{"cone","ctwo","cthree"}', '{"vcone","vctwo","vcthree"}', '{2016-11-04,2016-11-05,2016-11-06}', '{1.2,3.4,5.6}', '{1.1,2.22,3.333}', '{"four","five","six"}', '{"192.168.2.0/12","192.168.1.1","192.168.0.2/1"}', '{"192.168.100.128/25", "192.168.0.0/25", "192.168.1.0/24"}', '{"08:00:2b:01:02:03", "08-00-2b-01-02-03", "08002b:010203"}','{"[2019-03-31 15:30:00, infinity)", "[2019-03-31 15:30:00, 2019-04-30 15:30:00]"}', '{"[2017-06-05 11:29:12.549426+00,)", "[2017-06-05 11:29:12.549426+00, 2017-06-05 12:34:56.789012+00]"}', '{"[2019-03-31, infinity)", "[2019-03-31, 2019-04-30)"}', '{"[1,6)", "[1,4)"}', '{"[5.3,6.3)", "[10.0,20.0)"}', '{"[1000000,6000000)", "[5000,9000)"}', '{"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "f0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"}',array['{"bar": "baz"}','{"foo": "qux"}']::json[], array['{"bar": "baz"}','{"foo": "qux"}']::jsonb[], '{3,4000000000}')},
		# schemasAndValuesForArrayTypes: numeric(10,2) elements as Decimal(2)
		# 1.20 -> 120, 3.40 -> 340, 5.60 -> 560; numeric elements as
		# VariableScaleDecimal 1.1, 2.22, 3.333
		after => '{"pk":1,"int_array":[1,2,3],"bigint_array":[1550166368505037572],"text_array":["one","two","three"],"char_array":["cone      ","ctwo      ","cthree    "],"varchar_array":["vcone","vctwo","vcthree"],"date_array":[17109,17110,17111],"numeric_array":["eA==","AVQ=","AjA="],"varnumeric_array":[{"scale":1,"value":"Cw=="},{"scale":2,"value":"AN4="},{"scale":3,"value":"DQU="}],"citext_array":["four","five","six"],"inet_array":["192.168.2.0/12","192.168.1.1","192.168.0.2/1"],"cidr_array":["192.168.100.128/25","192.168.0.0/25","192.168.1.0/24"],"macaddr_array":["08:00:2b:01:02:03","08:00:2b:01:02:03","08:00:2b:01:02:03"],"tsrange_array":["[\"2019-03-31 15:30:00\",infinity)","[\"2019-03-31 15:30:00\",\"2019-04-30 15:30:00\"]"],"tstzrange_array":["[\"2017-06-05 11:29:12.549426+00\",)","[\"2017-06-05 11:29:12.549426+00\",\"2017-06-05 12:34:56.789012+00\"]"],"daterange_array":["[2019-03-31,infinity)","[2019-03-31,2019-04-30)"],"int4range_array":["[1,6)","[1,4)"],"numerange_array":["[5.3,6.3)","[10.0,20.0)"],"int8range_array":["[1000000,6000000)","[5000,9000)"],"uuid_array":["a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11","f0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"],"json_array":["{\"bar\": \"baz\"}","{\"foo\": \"qux\"}"],"jsonb_array":["{\"bar\": \"baz\"}","{\"foo\": \"qux\"}"],"oid_array":[3,4000000000]}'
	},
	{
		table => 'hstore_table_mul',
		needs => $hstore ? undef : 'hstore',
		ddl => 'CREATE TABLE hstore_table_mul (pk serial, hs hstore, hsarr hstore[], PRIMARY KEY(pk))',
		insert => q{INSERT INTO hstore_table_mul (hs, hsarr) VALUES ('"key1" => "val1","key2" => "val2","key3" => "val3"', array['"key4" => "val4","key5" => NULL'::hstore, '"key6" => "val6"'])},
		# schemaAndValueFieldForJsonEncodedHStoreTypeWithMultipleValues: the
		# pairs in Java HashMap order ("key5" before "key4")
		after => '{"pk":1,"hs":"{\"key1\":\"val1\",\"key2\":\"val2\",\"key3\":\"val3\"}","hsarr":["{\"key5\":null,\"key4\":\"val4\"}","{\"key6\":\"val6\"}"]}'
	},
	{
		table => 'hstore_table_with_special',
		needs => $hstore ? undef : 'hstore',
		ddl => 'CREATE TABLE hstore_table_with_special (pk serial, hs hstore, PRIMARY KEY(pk))',
		insert => q{INSERT INTO hstore_table_with_special (hs) VALUES ('"key_#1" => "val 1","key 2" =>" ##123 78"')},
		# schemaAndValueFieldForJsonEncodedHStoreTypeWithSpcialCharacters
		after => '{"pk":1,"hs":"{\"key_#1\":\"val 1\",\"key 2\":\" ##123 78\"}"}'
	});

my @run;
for my $f (@FIXTURES)
{
	SKIP:
	{
		skip "$f->{table}: $f->{needs} is not installed", 1 if $f->{needs};
		my $schema = $f->{schema} // 'public';
		if ($schema ne 'public')
		{
			my ($ddl) = map { $_->{ddl} } grep { $_->{table} eq $f->{table} && $_->{ddl} } @FIXTURES;
			$node->safe_psql('postgres', "CREATE SCHEMA IF NOT EXISTS $schema; SET search_path = $schema; $ddl");
		}
		else
		{
			$node->safe_psql('postgres', $f->{ddl});
		}
		my $options = $f->{options} ? ", $f->{options}" : '';
		$node->safe_psql('postgres',
			"SELECT outbox_attach('$schema.$f->{table}', 'test_server', format => 'debezium'$options)");
		$node->safe_psql('postgres', $f->{insert});
		push @run, { %$f, topic => "test_server.$schema.$f->{table}" };
		pass("$schema.$f->{table}: attached and inserted");
	}
}

# a record's parts: the value's before, after and op as they are written
sub parts
{
	my ($raw) = @_;
	return $raw =~ /^\{"before":(null|\{.*\}),"after":(null|\{.*\}),"source":\{.*\},"transaction":null,"op":"(\w)","ts_ms":\d+,"ts_us":\d+,"ts_ns":\d+\}$/;
}

for my $f (@run)
{
	my @expected = grep { defined } ($f->{after}, $f->{after2});
	my $records = wait_for_records($broker, $f->{topic}, scalar @expected);
	$records = kafka_read_json($broker, $f->{topic});
	is(scalar @$records, scalar @expected, "$f->{topic}: one record per row");
	for my $n (0 .. $#expected)
	{
		my $key = '{"pk":' . ($n + 1) . '}';
		my ($r) = grep { ($_->{key} // '') eq $key } @$records;
		ok($r, "$f->{topic} $key: arrived with its key, as the connector's") or next;
		is($r->{partition}, partition_of($key), "$f->{topic} $key: the partition Kafka's partitioner gives it");
		my %headers = @{ $r->{headers} };
		is_deeply([ sort keys %headers ], ['event_id'], "$f->{topic} $key: no header but event_id");
		my ($before, $after, $op) = parts($r->{payload});
		is($op, 'c', "$f->{topic} $key: op c, the envelope in the connector's order");
		is($before, 'null', "$f->{topic} $key: no before");
		is($after, $expected[$n], "$f->{topic} $key: after, byte for byte");
	}
}

# Deletes: the key columns before (REPLICA IDENTITY DEFAULT), then a
# tombstone; truncates are skipped (skipped.operations=t).  An update
# leaves unchanged TOASTed values out (the placeholder).
$node->safe_psql(
	'postgres', q{
	DELETE FROM cash_table WHERE pk = 2;
	TRUNCATE numeric_table;
	INSERT INTO numeric_table (pk, si) VALUES (7, 7);
	CREATE TABLE toast_table (pk int PRIMARY KEY, n int, body text);
	ALTER TABLE toast_table ALTER body SET STORAGE EXTERNAL;
	INSERT INTO toast_table VALUES (1, 0, repeat('x', 10000));
	SELECT outbox_attach('toast_table', 'test_server', format => 'debezium');
	UPDATE toast_table SET n = 1;
});
my $cash = wait_for_records($broker, 'test_server.public.cash_table', 4);
$cash = kafka_read_json($broker, 'test_server.public.cash_table');
my @deleted = grep { ($_->{key} // '') eq '{"pk":2}' } @$cash;
is(scalar @deleted, 3, 'the deleted row: its insert, its delete, its tombstone');
my ($before, $after, $op) = parts($deleted[1]{payload});
is($op, 'd', 'the delete');
is($before, '{"pk":2,"csh":null}', 'before: the key columns alone (REPLICA IDENTITY DEFAULT)');
is($after, 'null', 'no after');
is($deleted[2]{payload}, undef, 'then a tombstone of its key');
is($deleted[2]{partition}, $deleted[1]{partition}, 'in the partition of the key');

my $numeric = wait_for_records($broker, 'test_server.public.numeric_table', 2);
$numeric = kafka_read_json($broker, 'test_server.public.numeric_table');
is_deeply([ sort map { $_->{key} } @$numeric ], [ '{"pk":1}', '{"pk":7}' ],
	'the truncate between two inserts is not published');

my $toast = wait_for_records($broker, 'test_server.public.toast_table', 1);
($before, $after, $op) = parts($toast->[0]{payload});
is($op, 'u', 'an update of a row with a TOASTed value');
is($before, 'null', 'no before (REPLICA IDENTITY DEFAULT)');
is($after, '{"pk":1,"n":1,"body":"__debezium_unavailable_value"}',
	'the TOASTed value it left alone: the placeholder');

# schemas_enable: {"schema":...,"payload":...}, key and value; the serial
# key column's schema has its default, 0, the placeholder of nextval(),
# in the key's schema too (TableSchemaBuilder.java 166-170 and 431-438,
# PostgresDefaultValueConverter.java 181 and 224-232, at debezium
# aad5519; RecordsStreamProducerIT.java 3463: a SERIAL pk is
# int32().defaultValue(0)), after its parameters (Kafka's
# JsonConverter.java 442-443)
$node->safe_psql(
	'postgres', q{
	CREATE SCHEMA withschema;
	CREATE TABLE withschema.money_table (pk SERIAL, d DECIMAL(3,2), dvs DECIMAL, d_nn DECIMAL(3,2) NOT NULL, ts TIMESTAMP, j JSONB, PRIMARY KEY(pk));
	SELECT outbox_attach('withschema.money_table', 'test_server', format => 'debezium', schemas_enable => true);
	INSERT INTO withschema.money_table (d, dvs, d_nn, ts, j) VALUES (1.1, 10.1111, 3.30, '2016-11-04T13:51:30.123456', '{"bar": "baz"}');
});
my $withschema = wait_for_records($broker, 'test_server.withschema.money_table', 1);
my $r = $withschema->[0];
is( $r->{key},
	'{"schema":{"type":"struct","fields":[{"type":"int32","optional":false,"default":0,"field":"pk"}],"optional":false,"name":"test_server.withschema.money_table.Key"},"payload":{"pk":1}}',
	'schemas_enable: the key with its schema, as the JSON converter writes it');
is($r->{partition}, partition_of($r->{key}), 'schemas_enable: the partition of those key bytes');
like(
	$r->{payload},
	qr/^\{"schema":\{"type":"struct","fields":\[\{"type":"struct","fields":\[\{"type":"int32","optional":false,"default":0,"field":"pk"\},\{"type":"bytes","optional":true,"name":"org\.apache\.kafka\.connect\.data\.Decimal","version":1,"parameters":\{"scale":"2","connect\.decimal\.precision":"3"\},"field":"d"\},\{"type":"struct","fields":\[\{"type":"int32","optional":false,"field":"scale"\},\{"type":"bytes","optional":false,"field":"value"\}\],"optional":true,"name":"io\.debezium\.data\.VariableScaleDecimal","version":1,"doc":"Variable scaled decimal","field":"dvs"\},\{"type":"bytes","optional":false,"name":"org\.apache\.kafka\.connect\.data\.Decimal","version":1,"parameters":\{"scale":"2","connect\.decimal\.precision":"3"\},"field":"d_nn"\},\{"type":"int64","optional":true,"name":"io\.debezium\.time\.MicroTimestamp","version":1,"field":"ts"\},\{"type":"string","optional":true,"name":"io\.debezium\.data\.Json","version":1,"field":"j"\}\],"optional":true,"name":"test_server\.withschema\.money_table\.Value","field":"before"\},/,
	'schemas_enable: the value schema, field by field');
like($r->{payload}, qr/"optional":false,"name":"test_server\.withschema\.money_table\.Envelope","version":2\},"payload":\{"before":null,"after":\{"pk":1,"d":"bg==","dvs":\{"scale":4,"value":"AYr3"\},"d_nn":"AUo=","ts":1478267490123456,"j":"\{\\"bar\\": \\"baz\\"\}"\},/,
	'schemas_enable: the envelope schema, then the payload');

# kafkajs, as a Debezium consumer: keys and values parsed, decimals decoded
# from their schema
SKIP:
{
	my ($out, $err) = ('', '');
	my $no_kafkajs = node_module_unavailable('kafkajs@2');
	skip "kafkajs: $no_kafkajs", 4 if $no_kafkajs;
	IPC::Run::run(
		[
			'node', "$drivers/debezium_consume.js", $broker->{bootstrap}, 5,
			'test_server.withschema.money_table', 'test_server.public.cash_table'
		],
		'>', \$out, '2>', \$err, IPC::Run::timeout(120));
	my @consumed = map { decode_json($_) } grep { /\S/ } split /\n/, $out;
	is(scalar @consumed, 5, 'kafkajs reads every record') or diag($err);
	my ($with) = grep { $_->{topic} =~ /withschema/ } @consumed;
	is_deeply($with->{key}, { pk => 1 }, 'kafkajs: the key, its payload');
	is_deeply(
		$with->{value}{after},
		{
			pk => 1,
			d => '1.10',
			dvs => '10.1111',
			d_nn => '3.30',
			ts => '2016-11-04T13:51:30.123456Z',
			j => { bar => 'baz' }
		},
		'kafkajs: the values, decoded by their schema');
	my @tombstones = grep { $_->{topic} =~ /cash/ && !defined $_->{value} } @consumed;
	is_deeply([ map { $_->{key} } @tombstones ], [ { pk => 2 } ], 'kafkajs: the tombstone, a null value');
}

$node->stop;
$broker->stop;
done_testing();
