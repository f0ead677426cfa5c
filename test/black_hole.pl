#!/usr/bin/perl
#
# black_hole.pl
#	A TCP listener for the tests: a Kafka cluster that accepts connections
#	and answers nothing (a black hole), until it is told to forward them to
#	a real broker (test/mock_broker).
#
# It listens on a loopback port; the first line printed on stdout is its
# address, HOST:PORT, for outbox.brokers or outbox_set_topic().  Then each
# line read on stdin is a command, answered by one line, "ok" or
# "error: ...":
#
#	forward HOST:PORT	close the connections held, and forward every new one
#						to HOST:PORT, both ways
#
# End of input leaves it running; SIGTERM or SIGINT stops it.
#
# Usage: black_hole.pl [PORT [HOST:PORT]]	(PORT 0 or none: a free port;
# with HOST:PORT it forwards from the start: a cluster that starts
# listening at PORT)

use strict;
use warnings;

use IO::Select;
use IO::Socket::INET;

my ($port, $target) = @ARGV;
my $listener = IO::Socket::INET->new(
	LocalAddr => '127.0.0.1',
	LocalPort => $port // 0,
	Listen => 64,
	ReuseAddr => 1) or die "black_hole.pl: cannot listen: $!\n";
$SIG{PIPE} = 'IGNORE';
$| = 1;
print '127.0.0.1:' . $listener->sockport . "\n";

my $select = IO::Select->new($listener, \*STDIN);
my @held;		# connections accepted and never read
my %peer;		# fileno => the socket the other end of a forward
my $input = '';

# Forward a new connection to the target, or hold it unread.
sub accept_one
{
	my $client = $listener->accept or return;
	if (!defined $target)
	{
		push @held, $client;
		return;
	}
	my $server = IO::Socket::INET->new(PeerAddr => $target, Proto => 'tcp');
	if (!$server)
	{
		close $client;
		return;
	}
	$peer{ fileno $client } = $server;
	$peer{ fileno $server } = $client;
	$select->add($client, $server);
	return;
}

# Copy what came on $from to its peer; close both at the end of either.
sub pass_on
{
	my ($from) = @_;
	my $to = $peer{ fileno $from };
	my $n = sysread($from, my $buf, 65536);
	if (!$n)
	{
		for my $s ($from, $to)
		{
			delete $peer{ fileno $s };
			$select->remove($s);
			close $s;
		}
		return;
	}
	for (my $off = 0; $off < $n;)
	{
		my $w = syswrite($to, $buf, $n - $off, $off);
		last unless defined $w;
		$off += $w;
	}
	return;
}

# Run one command line; returns the reply.
sub command
{
	my ($line) = @_;
	if ($line =~ /^forward (\S+:\d+)$/)
	{
		$target = $1;
		close $_ for @held;
		@held = ();
		return 'ok';
	}
	return $line =~ /\S/ ? 'error: unknown command' : 'error: empty command';
}

while (1)
{
	for my $fh ($select->can_read)
	{
		if ($fh == $listener)
		{
			accept_one();
		}
		elsif (fileno $fh == fileno STDIN)
		{
			my $n = sysread(STDIN, my $buf, 4096);
			if (!$n)
			{
				$select->remove(\*STDIN);
				next;
			}
			$input .= $buf;
			print command($1), "\n" while $input =~ s/^([^\n]*)\n//;
		}
		elsif (exists $peer{ fileno $fh })
		{
			pass_on($fh);
		}
	}
}
