#!/usr/bin/env bash
# Checks each tool's man page against the tool itself:
#   check-man.sh MAN_DIR BIN_DIR
# - groff renders the page with no warning (-ww);
# - every long option the tool's --help names is in its page, and every
#   one its page names is in --help (neither can drift from the other);
# - --version prints "TOOL (rivet) VERSION", the version in the page's
#   title line.
set -uo pipefail
man_dir=$1 bin_dir=$2
SKIP=77
command -v groff >/dev/null || { echo "check-man.sh: no groff; skipped"; exit $SKIP; }
fail=0
bad() { echo "check-man.sh: $*" >&2; fail=1; }
for page in "$man_dir"/*.1; do
  tool=$(basename "$page" .1)
  [ -x "$bin_dir/$tool" ] || { bad "$tool: no such program in $bin_dir"; continue; }
  warn=$(groff -man -ww -z "$page" 2>&1)
  [ -z "$warn" ] || bad "$page: groff warns: $warn"
  help_opts=$("$bin_dir/$tool" --help 2>&1 | grep -oE -- '--[a-z][a-z-]*' | sort -u)
  page_opts=$(grep -oE -- '\\-\\-[a-z][a-z\\-]*' "$page" | sed 's/\\-/-/g' | sort -u)
  for o in $help_opts; do
    grep -qx -- "$o" <<<"$page_opts" || bad "$tool: $o is in --help, not in $page"
  done
  for o in $page_opts; do
    grep -qx -- "$o" <<<"$help_opts" || bad "$tool: $o is in $page, not in --help"
  done
  version=$("$bin_dir/$tool" --version 2>&1)
  want=$(sed -n 's/^\.TH .*"rivet \([0-9.]*\)".*/\1/p' "$page")
  [ "$version" = "$tool (rivet) $want" ] ||
    bad "$tool --version says '$version'; its page is of rivet $want"
done
[ $fail -eq 0 ] && echo "check-man.sh: $(ls "$man_dir"/*.1 | wc -l) pages agree with their tools"
exit $fail
