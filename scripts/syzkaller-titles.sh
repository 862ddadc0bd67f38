#!/usr/bin/env bash
# Imports results/console's syzkaller-agreement corpus: a sample of
# syzkaller's own Linux report tests (pkg/report/testdata/linux/report/<N>),
# each kept as testdata/syzkaller/<N> with syzkaller's expected title in a
# SYZKALLER-TITLE header, so TestTitlesAgreeWithSyzkaller can count how
# often our titles name the function syzkaller's titling names.
#
#   scripts/syzkaller-titles.sh <syzkaller git dir> [commit]
#
# The sample (testdata/SOURCES.md says why): every report file whose
# number N is even, that has a TITLE and is not CORRUPTED, leaving out what
# is not a Linux kernel's console (syzkaller's own executor and Go
# programs: SYZFAIL, SYZFATAL, "go runtime error"; Trusty's TEE). The log
# is what syzkaller's report_test.go reads: everything after the header's
# blank line, up to a "REPORT:" line that follows a blank line.
set -euo pipefail
cd "$(dirname "$0")/.."

gitdir=${1:?usage: syzkaller-titles.sh <syzkaller git dir> [commit]}
commit=$(git --git-dir="$gitdir" rev-parse "${2:-HEAD}")
src=pkg/report/testdata/linux/report
out=results/console/testdata/syzkaller

rm -rf "$out"
mkdir -p "$out"
kept=0
for n in $(git --git-dir="$gitdir" ls-tree --name-only "$commit" "$src/" | sed 's|.*/||' | grep -E '^[0-9]+$' | sort -n); do
	((n % 2 == 0)) || continue
	file=$(mktemp)
	git --git-dir="$gitdir" show "$commit:$src/$n" >"$file"
	header=$(awk 'NF == 0 { exit } { print }' "$file")
	title=$(sed -n 's/^TITLE: //p' <<<"$header")
	if [[ -z $title ]] || grep -q '^CORRUPTED: Y' <<<"$header" ||
		grep -qE '^(SYZFAIL:|SYZFATAL:|go runtime error|trusty:)' <<<"$title"; then
		rm -f "$file"
		continue
	fi
	{
		printf 'SYZKALLER-TITLE: %s\n\n' "$title"
		awk 'body && prev == "" && $0 == "REPORT:" { exit }
			body { print; prev = $0; next }
			NF == 0 { body = 1; prev = "x" }' "$file"
	} >"$out/$n"
	rm -f "$file"
	kept=$((kept + 1))
done
echo "$kept files from google/syzkaller $src @ $commit into $out"
