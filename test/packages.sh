#!/bin/bash
#
# The package lists that install what the build needs: each library the
# Makefile takes from pkg-config, or links with -l, comes from a Debian
# package (found with dpkg -S: the package that holds the module's .pc
# file, or the library's libNAME.so), and that package must be named by
# every list a user or a build installs from:
#
#	README.md		each `apt-get install` command (not of a .deb file)
#	.ci/run			each `apt-get install` command
#	test/setup.sh		PACKAGES
#	debian/control, debian/control.in	Build-Depends
#
# Prints "not ok - ..." for each package a list lacks; the exit status is 0
# only if none does.  Needs the build's packages installed (dpkg -S finds
# only installed files).
#
# Usage: test/packages.sh [repository]	(default: this one)

cd "${1:-$(dirname "$0")/..}" || exit 1

bad=0
fail() {
	echo "not ok - $*"
	bad=1
}

# "package what" for each library of the Makefile: its pkg-config modules
# and the -l flags they give or the Makefile writes itself; "? what" for
# one that no installed package holds
needed() {
	local modules module pc flag so
	modules=$(grep -oE 'pkg-config --(cflags|libs)( [a-z0-9_.+-]+)+' Makefile |
		cut -d' ' -f3- | tr ' ' '\n' | sort -u)
	for module in $modules; do
		pc=$(pkg-config --path "$module") &&
			echo "$(dpkg -S "$pc" | cut -d: -f1) pkg-config module $module" ||
			echo "? pkg-config module $module"
	done
	# shellcheck disable=SC2086
	for flag in $(pkg-config --libs-only-l $modules) \
		$(grep -v '^\s*#' Makefile | grep -oE '(^|\s)-l[a-zA-Z0-9_+-]+' | tr -d ' \t'); do
		# the dev symlink's own path, not its target's (the runtime package)
		so=$(realpath -s "$(${CC:-gcc} -print-file-name="lib${flag#-l}.so")")
		[ -e "$so" ] && echo "$(dpkg -S "$so" | cut -d: -f1) $flag" || echo "? $flag"
	done
}

# "where: the packages" for each list, one line each
lists() {
	local file
	for file in README.md .ci/run; do
		# a command's lines joined where they end in a backslash
		sed -e ':a' -e '/\\$/N; s/\\\n//; ta' "$file" |
			grep -E '^\s*(sudo |[A-Z_]+=[^ ]* )*apt-get install ' |
			grep -vE 'apt-get install +(-[^ ]+ +)*[./]' |
			sed -E "s|.*apt-get install +(-[^ ]+ +)*(([^ ]+ +){2})(.*)|$file, apt-get install \2...: \2\4|"
	done
	echo "test/setup.sh, PACKAGES: $(sed -n '/^PACKAGES="/,/"$/p' test/setup.sh |
		sed -E 's/^PACKAGES="//; s/"$//' | tr '\n\t' '  ')"
	for file in debian/control debian/control.in; do
		echo "$file, Build-Depends: $(sed -n '/^Build-Depends:/,/^[A-Z]/p' "$file" |
			sed -e '$d' -e 's/^Build-Depends://' | tr '\n,' '  ')"
	done
}

for file in README.md .ci/run; do
	lists | grep -q "^$file," || fail "$file: no apt-get install command found"
done
# "package what, what" for each package
need=$(needed | sort -u | awk '{ p = $1; sub(/^[^ ]* /, ""); if (p in w) w[p] = w[p] ", " $0; else w[p] = $0 }
	END { for (p in w) print p, w[p] }' | sort)
[ -n "$need" ] || fail "no library found in the Makefile"
while read -r package what; do
	[ "$package" = "?" ] && fail "$what of the Makefile: no installed package has it"
done <<<"$need"
need=$(grep -v '^? ' <<<"$need")
packages=$(cut -d' ' -f1 <<<"$need" | sort -u | tr '\n' ' ')
while IFS= read -r list; do
	where=${list%%: *}
	# names only: no version constraint, no option
	names=" $(echo "${list#*: }" | tr '\t' ' ' | sed -E 's/\([^)]*\)//g; s/(^| )-[^ ]*//g' | tr -s ' ') "
	missing=0
	while read -r package what; do
		[ -z "$package" ] && continue
		if [[ $names != *" $package "* ]]; then
			fail "$where: lacks $package (for $what)"
			missing=1
		fi
	done <<<"$need"
	[ $missing = 0 ] && echo "ok - $where: $packages"
done < <(lists)

exit $bad
