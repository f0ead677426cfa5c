
# Prometheus metrics: Debian's prometheus-postgres-exporter with the queries
# file the extension ships (monitoring/outbox_prometheus.yaml), scraping two
# databases as a role with only the grants of docs/monitoring.md.
# The counters follow what was published; the histogram's buckets are the
# extension's; during a broker outage pending grows, brokers up is 0 and
# the worker is "broker unreachable" and outbox_health critical, and after
# it the backlog drains; a second cluster down beside the first shows as
# such, with its events waiting, and the alert rules fire on what the
# exporter gives; a missing grant shows as a failed scrape; the alert rules
# and their tests (monitoring/) pass promtool.

use strict;
use warnings;

use File::Basename qw(dirname);
use File::Spec;
use HTTP::Tiny;
use IPC::Run;
use OutboxTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $root = File::Spec->rel2abs(dirname(__FILE__) . '/..');
my $exporter_bin = '/usr/bin/prometheus-postgres-exporter';
my $queries = "$root/monitoring/outbox_prometheus.yaml";
my $rules = "$root/monitoring/outbox-alerts.yml";
my $promtool = '/usr/bin/promtool';

# --- the alert rules and their tests (monitoring/) pass promtool, when it
# is installed (Debian's prometheus, which test/setup.sh installs)
SKIP:
{
	skip 'promtool is not installed', 3 unless -x $promtool;
	my ($stdout, $stderr);
	my $checked = IPC::Run::run([ $promtool, 'check', 'rules', $rules ], '>', \$stdout, '2>', \$stderr);
	ok($checked, 'promtool check rules passes monitoring/outbox-alerts.yml') or diag("$stdout$stderr");
	like($stdout, qr/SUCCESS: 4 rules found/, 'all four of them');
	my $tested = IPC::Run::run([ $promtool, 'test', 'rules', "$root/monitoring/outbox-alerts.test.yml" ],
		'>', \$stdout, '2>', \$stderr);
	ok($tested,
		'promtool test rules: a cluster down beside one up, a backlog, a failing topic, a worker down each fire their alert after its delay, and nothing else does'
	) or diag("$stdout$stderr");
}

ok(-x $exporter_bin,
	'prometheus-postgres-exporter is installed (test/setup.sh installs it)')
  or done_testing(), exit;

# the block of docs/monitoring.md in $language that contains $pattern
sub doc_block
{
	my ($language, $pattern) = @_;
	my $doc = slurp_file("$root/docs/monitoring.md");
	my @blocks = $doc =~ /^```$language\n(.*?)^```/msg;
	my @found = grep { /$pattern/ } @blocks;
	die "docs/monitoring.md has no $language block matching $pattern" unless @found == 1;
	return $found[0];
}

sub doc_sql { return doc_block('sql', @_); }

my ($node, $broker) =
  outbox_node_with_broker('prometheus', 'outbox.poll_interval' => '200ms');
$node->safe_psql('postgres', 'CREATE DATABASE billing');
$node->safe_psql('billing', 'CREATE EXTENSION outbox');

# the exporter's role, with the documented grants only
$node->safe_psql('postgres', doc_sql(qr/CREATE ROLE prometheus/));
my $grants = doc_sql(qr/^GRANT SELECT ON outbox_stats/m);
$node->safe_psql($_, $grants) for qw(postgres billing);
is( $node->safe_psql(
		'postgres', q{
	SELECT string_agg(c.relname, ' ' ORDER BY c.relname)
	  FROM pg_class c
	 WHERE c.relname ~ '^outbox_' AND c.relkind IN ('r', 'v')
	   AND has_table_privilege('prometheus', c.oid, 'SELECT')}),
	'outbox_health outbox_publish_stats outbox_stats outbox_topic_settings',
	'the monitoring role may read the statistics, the health and the topics\' settings, and no table of events');

# --- the exporter, on a free port, leaving nothing behind
my $port = PostgreSQL::Test::Cluster::get_free_port();
my $url = "http://127.0.0.1:$port/metrics";
my $dsn = 'host=' . $node->host . ' port=' . $node->port . ' dbname=postgres user=prometheus sslmode=disable';
my $exporter_log = $node->basedir . '/exporter.log';
my $exporter;
{
	local $ENV{DATA_SOURCE_NAME} = $dsn;
	$exporter = IPC::Run::start(
		[
			$exporter_bin, "--extend.query-path=$queries",
			"--web.listen-address=127.0.0.1:$port",
			'--auto-discover-databases', '--include-databases=billing'
		],
		'<', \undef, '>', $exporter_log, '2>&1');
}

END
{
	local $?;
	$exporter->kill_kill(grace => 2) if $exporter && $exporter->pumpable;
}

my $http = HTTP::Tiny->new(timeout => 10);

# One scrape: a list of samples { name, labels => {...}, value }.
sub scrape
{
	my $response = $http->get($url);
	return undef unless $response->{success};
	my @samples;
	for my $line (split /\n/, $response->{content})
	{
		next if $line =~ /^#/ || $line eq '';
		my ($name, $labels, $value) = $line =~ /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/
		  or die "unexpected line in the exposition: $line";
		my %labels = ($labels // '') =~ /(\w+)="((?:[^"\\]|\\.)*)"/g;
		push @samples, { name => $name, labels => \%labels, value => $value };
	}
	return \@samples;
}

# The samples $name whose labels include %want, from $samples.
sub matching
{
	my ($samples, $name, %want) = @_;
	return grep {
		my $s = $_;
		$s->{name} eq $name && !grep { ($s->{labels}{$_} // '') ne $want{$_} } keys %want
	} @$samples;
}

# The value of the sample $name whose labels include %want; undef if there
# is none, and a failure if there are several.
sub metric
{
	my @found = matching(@_);
	die "several samples of $_[1] match" if @found > 1;
	return @found ? $found[0]{value} : undef;
}

# Scrape until $check->($samples) is true (or time is up); returns the last
# scrape, and whether it passed.  (The exporter runs each query on its own,
# so that one scrape may see the worker's commit in one query and not in
# another: a check of another query's metric takes a scrape of its own.)
sub wait_for_metrics
{
	my ($check, $seconds) = @_;
	my $deadline = time + ($seconds // 60);
	my $samples;
	while (1)
	{
		$samples = scrape();
		return ($samples, 1) if $samples && $check->($samples);
		return ($samples, 0) if time > $deadline;
		usleep(250_000);
	}
}

my ($m, $ok) = wait_for_metrics(sub { defined metric($_[0], 'pg_up') });
ok($ok, 'the exporter serves metrics') or diag(slurp_file($exporter_log));
is(metric($m, 'pg_exporter_user_queries_load_error', filename => $queries),
	0, 'it loaded the queries file');
is(metric($m, 'pg_exporter_last_scrape_error'),
	0, 'and every query ran with the documented grants');

# --- a role with CREATE on the database makes a schema named like the
# exporter's role, first on its search path ("$user"), with look-alikes of
# what the queries read: the queries name their schemas, and never run them
$node->safe_psql('postgres', q{
	CREATE ROLE mallory;
	GRANT CREATE ON DATABASE postgres TO mallory;
	SET ROLE mallory;
	CREATE SCHEMA prometheus;
	CREATE VIEW prometheus.outbox_stats AS
		SELECT 'planted'::text AS topic, 1::bigint AS pending, 1::bigint AS failed,
			   1::bigint AS abandoned, interval '1 hour' AS oldest_due_age;
	CREATE VIEW prometheus.outbox_publish_stats AS
		SELECT 'planted'::text AS topic, 1::bigint AS published, 1::bigint AS failed,
			   1::bigint AS abandoned, 1::float8 AS latency_ms_sum,
			   '{1}'::bigint[] AS latency_histogram;
	CREATE FUNCTION prometheus.outbox_unread_topics(OUT topic text, OUT unread bigint,
			OUT oldest_created_at timestamptz)
		RETURNS SETOF record LANGUAGE sql AS $$ SELECT 'planted', 4242::bigint, now() $$;
	CREATE FUNCTION prometheus.outbox_worker_status(OUT database name, OUT state text,
			OUT brokers_up integer)
		RETURNS SETOF record LANGUAGE sql AS $$ SELECT current_database(), 'planted', 4242 $$;
	GRANT USAGE ON SCHEMA prometheus TO prometheus;
	GRANT SELECT ON prometheus.outbox_stats, prometheus.outbox_publish_stats TO prometheus;
	RESET ROLE});
is($node->safe_psql('postgres', q{
	SET ROLE prometheus;
	SELECT count(*) FROM outbox_stats WHERE topic = 'planted'}),
	'1', "unqualified, the exporter's role reads the look-alikes");
$m = scrape();
is(metric($m, 'pg_exporter_last_scrape_error'), 0, 'with them in place every query runs');
ok(!grep({ ($_->{labels}{topic} // '') eq 'planted' || ($_->{labels}{state} // '') eq 'planted' } @$m),
	'and reads what the extension has, not the look-alikes');
is(metric($m, 'outbox_unread_events', database => 'postgres'), 0, 'nor their unread count');

# --- counters and the histogram follow what was published
sub enqueue
{
	my ($db, $topic, $n) = @_;
	enqueue_events($node, $topic, 1, $n, keys => 7, dbname => $db);
}

sub published
{
	my ($db, $topic) = @_;
	return
	  sub { (metric($_[0], 'outbox_events_published_total', database => $db, topic => $topic) // -1) == $_[1] };
}

enqueue('postgres', 'orders', 300);
enqueue('billing', 'invoices', 40);
($m, $ok) = wait_for_metrics(
	sub {
		(metric($_[0], 'outbox_events_published_total', database => 'postgres', topic => 'orders') // 0) == 300
		  && (metric($_[0], 'outbox_events_published_total', database => 'billing', topic => 'invoices') // 0)
		  == 40;
	});
ok($ok, 'outbox_events_published_total counts the events of each database and topic');
is(metric($m, 'outbox_publish_latency_seconds_count', database => 'postgres', topic => 'orders'),
	300, 'the latency histogram counts each delivery');
is(metric($m, 'outbox_publish_latency_seconds_bucket', database => 'postgres', topic => 'orders', le => '+Inf'),
	300, 'its +Inf bucket holds them all');
my @bounds = map { $_->{labels}{le} }
  grep {
	     $_->{name} eq 'outbox_publish_latency_seconds_bucket'
	  && $_->{labels}{database} eq 'postgres'
	  && $_->{labels}{topic} eq 'orders'
  } @$m;
is("@bounds",
	'0.001 0.003 0.007 0.015 0.031 0.063 0.127 0.255 0.511 1.023 2.047 4.095 8.191 16.383 32.767 65.535 131.071 262.143 524.287 1048.575 +Inf',
	'its buckets are bounded at 2^n - 1 ms, in seconds');
my $sum = metric($m, 'outbox_publish_latency_seconds_sum', database => 'postgres', topic => 'orders');
my $sql_sum = $node->safe_psql('postgres',
	"SELECT sum(latency_ms_sum) / 1000 FROM outbox_publish_stats WHERE topic = 'orders'");
ok($sum > 0 && abs($sum - $sql_sum) < 1e-6 * $sql_sum,
	'its sum is the latencies in seconds');
is(metric($m, 'outbox_pending_events', database => 'postgres', topic => 'orders'),
	0, 'nothing is pending once published');
is(metric($m, 'outbox_worker_status', database => 'billing', state => 'idle')
	  + metric($m, 'outbox_worker_status', database => 'billing', state => 'publishing'),
	1, "the worker's state");
is( scalar(grep { $_->{name} eq 'outbox_worker_status' && $_->{value} == 1 } @$m),
	2, 'one state per database');
($m, $ok) = wait_for_metrics(
	sub { (metric($_[0], 'outbox_worker_brokers_up', database => 'postgres') // 0) >= 1 });
ok($ok, 'brokers up');

enqueue('postgres', 'orders', 200);
($m, $ok) = wait_for_metrics(sub { published('postgres', 'orders')->($_[0], 500) });
ok($ok, 'the counter grows with what is published next');

# Where each latency falls: statistics rows written by hand for a topic of
# their own, one folded (older than two hours) and one of now.  Bucket b
# holds latencies of 2^(b/4) - 1 up to 2^((b+1)/4) - 1 ms: 5 events under
# 1 ms (bucket 3), 7 just over it (bucket 4), 2 past every bound (127).
$node->safe_psql(
	'postgres', q{
	INSERT INTO outbox_publish_stats (topic, bucket, published, failed, abandoned, latency_ms_sum, latency_histogram)
	VALUES ('made-up', '-infinity', 12, 3, 1, 9.5,
			array_fill(0, ARRAY[3]) || 5::bigint || 7::bigint || array_fill(0::bigint, ARRAY[123])),
		   ('made-up', date_bin('10 seconds', now(), 'epoch'), 2, 1, 0, 4e9,
			array_fill(0::bigint, ARRAY[127]) || 2::bigint)});
($m, $ok) = wait_for_metrics(
	sub { defined metric($_[0], 'outbox_events_published_total', topic => 'made-up') });
my %bucket = map { $_->{labels}{le} => $_->{value} }
  grep { $_->{name} eq 'outbox_publish_latency_seconds_bucket' && $_->{labels}{topic} eq 'made-up' } @$m;
is_deeply(
	[ @bucket{qw(0.001 0.003 1048.575 +Inf)} ],
	[ 5, 12, 12, 14 ],
	'a bucket counts the latencies below its bound, all rows of the topic summed');
is(metric($m, 'outbox_events_published_total', topic => 'made-up'), 14, 'published, summed');
is(metric($m, 'outbox_delivery_failures_total', topic => 'made-up'), 4, 'failed attempts, summed');
is(metric($m, 'outbox_events_abandoned_total', topic => 'made-up'), 1, 'abandoned, summed');
ok(abs(metric($m, 'outbox_publish_latency_seconds_sum', topic => 'made-up') - 4000000.0095) < 1e-6,
	'latencies, in seconds');

# --- a broker outage: pending grows, brokers up 0, the worker says why
$broker->command('down -1');
enqueue('postgres', 'orders', 400);
($m, $ok) = wait_for_metrics(
	sub {
		(metric($_[0], 'outbox_worker_status', database => 'postgres', state => 'broker unreachable') // 0)
		  == 1
		  && (metric($_[0], 'outbox_worker_brokers_up', database => 'postgres') // -1) == 0;
	});
ok($ok, 'during the outage the worker is "broker unreachable", with no broker up');
($m, $ok) = wait_for_metrics(
	sub { (metric($_[0], 'outbox_health_status', database => 'postgres', signal => 'brokers') // 0) == 2 });
ok($ok, 'outbox_health_status of the brokers is 2, critical');
is(metric($m, 'outbox_worker_status', database => 'postgres', state => 'idle'),
	0, 'and no longer idle');
is(metric($m, 'outbox_pending_events', database => 'postgres', topic => 'orders'),
	400, 'the events wait as pending');
is(metric($m, 'outbox_events_published_total', database => 'postgres', topic => 'orders'),
	500, 'the counter holds still');
my $age = metric($m, 'outbox_oldest_due_event_age_seconds', database => 'postgres', topic => 'orders');
enqueue('postgres', 'orders', 100);
sleep 1;
$m = scrape();
is(metric($m, 'outbox_pending_events', database => 'postgres', topic => 'orders'),
	500, 'pending grows with what is enqueued');
ok(metric($m, 'outbox_oldest_due_event_age_seconds', database => 'postgres', topic => 'orders') > $age,
	'the oldest due event ages');

$broker->command('up -1');
($m, $ok) = wait_for_metrics(sub { published('postgres', 'orders')->($_[0], 1000) });
ok($ok, 'after the outage every event is published and counted');
$m = scrape();
is(metric($m, 'outbox_pending_events', database => 'postgres', topic => 'orders'),
	0, 'nothing pending');
is(metric($m, 'outbox_unread_events', database => 'postgres'), 0, 'nothing unread');
is(metric($m, 'outbox_oldest_due_event_age_seconds', database => 'postgres', topic => 'orders'),
	0, 'nothing due');
($m, $ok) = wait_for_metrics(
	sub {
		(metric($_[0], 'outbox_worker_brokers_up', database => 'postgres') // 0) >= 1
		  && metric($_[0], 'outbox_worker_status', database => 'postgres', state => 'broker unreachable')
		  == 0;
	});
ok($ok, 'brokers up again, and the worker no longer unreachable');
($m, $ok) = wait_for_metrics(
	sub {
		!grep { $_->{name} eq 'outbox_health_status' && $_->{value} != 0 } @{ $_[0] };
	});
ok($ok, 'outbox_health_status is 0, ok, for every signal of every database again');
is(scalar(matching($m, 'outbox_health_status', database => 'postgres')),
	10, 'a series per signal');

# --- a second cluster down beside the first: the worker goes on, idle;
# the cluster's series say that it does not answer while its events wait,
# and the alert rules, given what the exporter gives, fire for it alone
my $far = start_broker(1);
$node->safe_psql('postgres', "SELECT outbox_set_topic('far.*', '$far->{bootstrap}')");
enqueue('postgres', 'far.orders', 5);
($m, $ok) = wait_for_metrics(sub { published('postgres', 'far.orders')->($_[0], 5) });
ok($ok, 'the events of a second cluster are published');
$far->command('down -1');
enqueue('postgres', 'far.orders', 20);
enqueue('postgres', 'near', 10);
my %far = (database => 'postgres', brokers => $far->{bootstrap});
($m, $ok) = wait_for_metrics(
	sub {
		(metric($_[0], 'outbox_cluster_up', %far) // 1) == 0
		  && (metric($_[0], 'outbox_cluster_events_waiting', %far) // 0) == 20
		  && published('postgres', 'near')->($_[0], 10);
	});
ok($ok, 'outbox_cluster_up of the cluster that is down is 0, with its 20 events waiting, while the other publishes');
is(metric($m, 'outbox_cluster_up', database => 'postgres', brokers => $broker->{bootstrap}),
	1, 'outbox_cluster_up of the other is 1');
is(metric($m, 'outbox_cluster_events_waiting', database => 'postgres', brokers => $broker->{bootstrap}),
	0, 'with nothing waiting');
ok(metric($m, 'outbox_cluster_oldest_waiting_age_seconds', %far) > 0,
	'the oldest event waiting for the cluster that is down has an age');
is(metric($m, 'outbox_cluster_brokers_up', %far), 0, 'and no broker of it is up');
is(metric($m, 'outbox_worker_status', database => 'postgres', state => 'broker unreachable'),
	0, 'the worker is not "broker unreachable": another cluster answers');
is(metric($m, 'outbox_health_status', database => 'postgres', signal => 'brokers'),
	2, 'outbox_health_status of the brokers is 2, critical');
SKIP:
{
	skip 'promtool is not installed', 1 unless -x $promtool;
	# the samples of the scrape, as series that hold still, given to the
	# rules: OutboxClusterUnreachable fires for the cluster down only
	my @series = grep { $_->{name} =~ /^outbox_cluster_(up|events_waiting)$/ } @$m;
	my $labels = sub {
		my ($s) = @_;
		return join(',', map { "$_=\"$s->{labels}{$_}\"" } sort grep { $s->{labels}{$_} ne '' } keys %{ $s->{labels} });
	};
	my $tests_file = PostgreSQL::Test::Utils::tempdir() . '/scraped.test.yml';
	my $server = (matching($m, 'outbox_cluster_up', %far))[0]{labels}{server} // '';
	PostgreSQL::Test::Utils::append_to_file($tests_file,
		"rule_files: ['$rules']\nevaluation_interval: 1m\ntests:\n  - interval: 1m\n    input_series:\n"
		  . join('', map { "      - series: '$_->{name}\{" . $labels->($_) . "}'\n        values: '"
			  . join(' ', ($_->{value}) x 4) . "'\n" } @series)
		  . "    alert_rule_test:\n      - eval_time: 2m\n        alertname: OutboxClusterUnreachable\n"
		  . "        exp_alerts:\n          - exp_labels: {severity: critical, "
		  . join(', ', map { "$_: \"$far{$_}\"" } sort keys %far)
		  . ($server ne '' ? ", server: \"$server\"" : '') . "}\n"
		  . "            exp_annotations: {summary: \"Kafka cluster $far->{bootstrap} does not answer: "
		  . "events of postgres on $server wait\"}\n");
	my ($stdout, $stderr);
	ok(IPC::Run::run([ $promtool, 'test', 'rules', $tests_file ], '>', \$stdout, '2>', \$stderr),
		'on the scraped series, OutboxClusterUnreachable fires within 2 minutes for the cluster down, not the other')
	  or diag("$stdout$stderr" . slurp_file($tests_file));
}
$far->command('up -1');
($m, $ok) = wait_for_metrics(sub { published('postgres', 'far.orders')->($_[0], 25) });
ok($ok, 'once it answers its events are published');
($m, $ok) = wait_for_metrics(
	sub { (metric($_[0], 'outbox_health_status', database => 'postgres', signal => 'brokers') // 2) == 0 });
ok($ok, 'and outbox_health_status of the brokers is 0 again');
$node->safe_psql('postgres', "SELECT outbox_reset_topic('far.*')");

# --- a bulk enqueue in progress, which the worker reads past: its rows are
# not counted while it runs (nor looked at: they would cost the scrape),
# and are published once it commits
my $bulk = $node->background_psql('postgres');
$bulk->query_safe('BEGIN');
$bulk->query_safe(
	"SELECT count(outbox_enqueue('bulk', jsonb_build_object('n', i))) FROM generate_series(1, 30000) i");
my $bulk_xid = $bulk->query_safe('SELECT pg_current_xact_id()');
enqueue('postgres', 'orders', 10);
($m, $ok) = wait_for_metrics(sub { published('postgres', 'orders')->($_[0], 1010) });
ok($ok, 'events committed after a bulk enqueue in progress are published');
$m = scrape();
is($node->safe_psql('postgres', "SELECT '$bulk_xid'::xid8 = ANY (running) FROM outbox_reader"),
	't', 'the worker read past the bulk transaction, which it keeps as running');
is(metric($m, 'outbox_unread_events', database => 'postgres'),
	0, 'the events of a transaction in progress are not counted');
$bulk->query_safe('COMMIT');
$bulk->quit;
($m, $ok) = wait_for_metrics(sub { published('postgres', 'bulk')->($_[0], 30000) });
ok($ok, 'once it commits, its events are published and counted');
$m = scrape();
is(metric($m, 'outbox_unread_events', database => 'postgres'), 0, 'nothing unread');

# --- the worker off for a database: its events wait unread, counted
$node->safe_psql('postgres', 'ALTER DATABASE billing SET outbox.enabled = off');
($m, $ok) = wait_for_metrics(
	sub { (metric($_[0], 'outbox_worker_status', database => 'billing', state => 'disabled') // 0) == 1 });
ok($ok, 'the worker of a database where outbox.enabled is off is "disabled"');
enqueue('billing', 'invoices', 25);
$m = scrape();
is(metric($m, 'outbox_unread_events', database => 'billing'), 25, 'its unread events are counted');
is(metric($m, 'outbox_pending_events', database => 'billing', topic => 'invoices'),
	25, 'and pending');
ok(metric($m, 'outbox_oldest_due_event_age_seconds', database => 'billing', topic => 'invoices') > 0,
	'and the oldest of them has an age');
is(metric($m, 'outbox_worker_brokers_up', database => 'billing'),
	'NaN', 'brokers up is NaN without a producer');

# past 10,000 unread events: a total bounded from above (here exact, the
# ids being consecutive), and per topic only the first 10,000
enqueue('billing', 'invoices', 25000);
$m = scrape();
is(metric($m, 'outbox_unread_events', database => 'billing'),
	25025, 'past 10,000 unread events the total is bounded by their ids');
is(metric($m, 'outbox_pending_events', database => 'billing', topic => 'invoices'),
	10000, 'and a topic counts its events among the first 10,000');

# a transaction of 25,000 events in progress ahead of 20 committed ones:
# the scrape looks at 20,000 index entries at most, and gives an upper bound
$node->safe_psql('postgres', 'CREATE DATABASE bounds');
$node->safe_psql('postgres', 'ALTER DATABASE bounds SET outbox.enabled = off');
$node->safe_psql('bounds', 'CREATE EXTENSION outbox');
my $ahead = $node->background_psql('bounds');
$ahead->query_safe('BEGIN');
$ahead->query_safe(
	"SELECT count(outbox_enqueue('ahead', jsonb_build_object('n', i))) FROM generate_series(1, 25000) i");
enqueue('bounds', 'behind', 20);
my $unread_sql =
  "SELECT sum(unread), count(*) FILTER (WHERE topic IS NULL) FROM outbox_unread_topics()";
my ($total, $estimated) = split /\|/, $node->safe_psql('bounds', $unread_sql);
ok($total >= 20 && $total <= 25020 && $estimated == 1,
	"behind a transaction in progress, the count is an upper bound ($total)");
$ahead->query_safe('ROLLBACK');
$ahead->quit;
($total, $estimated) = split /\|/, $node->safe_psql('bounds', $unread_sql);
ok($total >= 20 && $total <= 25020,
	"behind a rolled back one too ($total)");

# --- each grant is needed: without it the scrape fails and says so
for my $case (
	[
		'SELECT on outbox_publish_stats',
		'REVOKE SELECT ON outbox_publish_stats FROM prometheus',
		'outbox_events_published_total'
	],
	[
		'EXECUTE on outbox_unread_topics()',
		'REVOKE EXECUTE ON FUNCTION outbox_unread_topics() FROM prometheus',
		'outbox_unread_events'
	],
	[
		'EXECUTE on outbox_worker_status()',
		'REVOKE EXECUTE ON FUNCTION outbox_worker_status() FROM prometheus',
		'outbox_worker_brokers_up'
	],
	[
		'SELECT on outbox_topic_settings',
		'REVOKE SELECT ON outbox_topic_settings FROM prometheus',
		'outbox_cluster_up'
	],
	[
		'EXECUTE on outbox_topic(text)',
		'REVOKE EXECUTE ON FUNCTION outbox_topic(text) FROM prometheus',
		'outbox_cluster_up'
	])
{
	my ($what, $revoke, $lost) = @$case;
	$node->safe_psql('billing', $revoke);
	$m = scrape();
	is(metric($m, 'pg_exporter_last_scrape_error'), 1, "without $what the scrape fails");
	ok(!matching($m, $lost, database => 'billing') && matching($m, $lost, database => 'postgres'),
		"and $lost of that database is missing");
	$node->safe_psql('billing', $grants);
}
$m = scrape();
is(metric($m, 'pg_exporter_last_scrape_error'), 0, 'with the grants again it succeeds');

$exporter->signal('TERM');
$exporter->finish;
$node->stop;
$broker->stop;
done_testing();
