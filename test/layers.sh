#!/bin/bash
#
# The layers of src/ (docs/design.md, "Modules"): a file includes the
# headers of its own folder and of the folders below it only, and no
# files (a .c with its .h) include each other, two or more in a loop;
# and the library takes one of the ten relcache callback slots a backend
# has (the core's and every library's): base/catalog.c's, which the
# caches above share through outbox_on_relation_change().
#
#	base <- kafka <- format <- launcher <- queue <- capture <- worker <- outbox.c
#
# Prints "not ok - ..." for each include that breaks a rule; the exit
# status is 0 only if none does.
#
# Usage: test/layers.sh [src directory]	(default: the repository's src/)

cd "${1:-$(dirname "$0")/../src}" || exit 1

# the floor of a folder; src/ itself (outbox.c) is the top
floor() {
	case $1 in
		base) echo 0 ;;
		kafka) echo 1 ;;
		format) echo 2 ;;
		launcher) echo 3 ;;
		queue) echo 4 ;;
		capture) echo 5 ;;
		worker) echo 6 ;;
		.) echo 7 ;;
		*) echo -1 ;;
	esac
}

bad=0
# "folder/file folder/header" for each include of a header of src/, a file
# and its header taken as one
edges=$(grep -H '^#include "[a-z_]*/[a-z_]*\.h"' *.c */*.[ch] |
	sed -E 's|^(\./)?([a-z_/]*)\.[ch]:#include "([a-z_/]*)\.h".*|\2 \3|' |
	while read -r from to; do
		[ -d "${to%/*}" ] && [ "$from" != "$to" ] && echo "$from $to"
	done | sort -u)

while read -r from to; do
	[ -z "$from" ] && continue
	dir=.
	[[ $from == */* ]] && dir=${from%/*}
	if [ "$(floor "$dir")" -lt 0 ]; then
		echo "not ok - src/$dir/ has no floor in test/layers.sh"
		bad=1
	elif [ "$dir" != "${to%/*}" ] && [ "$(floor "${to%/*}")" -ge "$(floor "$dir")" ]; then
		echo "not ok - src/$from includes $to.h, which is not below it"
		bad=1
	fi
	if [[ $from < $to ]] && grep -qx "$to $from" <<<"$edges"; then
		echo "not ok - src/$from and src/$to include each other"
		bad=1
	fi
done <<<"$edges"

# a loop of three files or more (two are said above), as tsort finds them
loops=$(tsort <<<"$edges" 2>&1 >/dev/null |
	awk '/input contains a loop/ { if (n > 2) print list; list = ""; n = 0; next }
		 /^tsort: / { list = list (n ? ", " : "") "src/" $2; n++ }
		 END { if (n > 2) print list }')
while read -r loop; do
	[ -z "$loop" ] && continue
	echo "not ok - $loop include each other in a loop"
	bad=1
done <<<"$loops"

taken=$(grep -rl --include='*.c' 'CacheRegisterRelcacheCallback(' . | grep -vx './base/catalog.c')
for file in $taken; do
	echo "not ok - src/${file#./} takes a relcache callback slot of its own"
	bad=1
done

[ $bad = 0 ] && echo "ok - the layers of src/"
exit $bad
