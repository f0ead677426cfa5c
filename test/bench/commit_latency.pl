#!/usr/bin/perl
#
# Reads test_decoding's output (include-timestamp, timestamps in UTC) on
# stdin, as pg_recvlogical writes it, and prints for each transaction the
# milliseconds from its commit to the moment its COMMIT line is read here.
use strict;
use warnings;
use Time::HiRes qw(time);
use Time::Local qw(timegm);

$| = 1;
while (my $line = <STDIN>)
{
	my $now = time;
	next
	  unless $line =~
	  /^COMMIT \d+ \(at (\d+)-(\d+)-(\d+) (\d+):(\d+):(\d+)(\.\d+)?\+00\)/;
	my $at = timegm($6, $5, $4, $3, $2 - 1, $1) + ($7 // 0);
	printf "%.3f\n", 1000 * ($now - $at);
}
