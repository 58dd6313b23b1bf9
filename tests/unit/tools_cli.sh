#!/usr/bin/env bash
# The command line of one Braid program, by src/tools/cli.h's rules: --help prints the
# usage on stdout and exits with 0; an unknown option, and the bad input given, each
# print one line on stderr that starts with the program's name and names the option,
# and exit with status 2.
#   tools_cli.sh PROGRAM NAMED -- BAD_ARGS...
# NAMED is what the line for BAD_ARGS must name ("": no bad-value case).
set -u
prog=$1 named=$2
shift 3
name=$(basename "$prog")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() {
  echo "tools_cli.sh: FAIL ($name): $*" >&2
  exit 1
}
"$prog" --help >"$tmp/out" 2>"$tmp/err" </dev/null
rc=$?
[ "$rc" -eq 0 ] || fail "--help exited with $rc: $(cat "$tmp/err")"
grep -q "^usage: $name" "$tmp/out" || fail "--help printed no usage line: $(head -n 3 "$tmp/out")"
# expect_error NAMED ARGS...: exit status 2 and one line "PROGRAM: ... NAMED: ..."
expect_error() {
  local want=$1
  shift
  "$prog" "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
  local rc=$?
  cat "$tmp/err"
  [ "$rc" -eq 2 ] || fail "'$*' exited with $rc, expected 2"
  [ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "'$*' printed not exactly one line on stderr"
  grep -q "^$name: " "$tmp/err" || fail "'$*': the line does not start with '$name: '"
  grep -qF -- "$want:" "$tmp/err" || fail "'$*': the line does not name '$want'"
}
expect_error --no-such-option --no-such-option
[ -z "$named" ] || expect_error "$named" "$@"
echo "tools_cli.sh: ok ($name)"
