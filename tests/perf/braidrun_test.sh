#!/usr/bin/env bash
# Behaviour of braidrun without the library: environment, exit status, failure handling,
# its command line.
#   braidrun_test.sh BRAIDRUN
set -u
br=$1
fail() {
  echo "braidrun_test.sh: FAIL: $*" >&2
  exit 1
}
# 1. Every rank sees its own environment and one shared NCCL_COMM_ID.
out=$("$br" -n 3 -- sh -c 'echo "R=$RANK W=$WORLD_SIZE L=$LOCAL_RANK LW=$LOCAL_WORLD_SIZE \
A=$MASTER_ADDR P=$MASTER_PORT C=$NCCL_COMM_ID"') || fail "env run exited $?"
echo "$out"
[ "$(echo "$out" | wc -l)" -eq 3 ] || fail "expected 3 lines"
for r in 0 1 2; do
  echo "$out" | grep -q "^R=$r W=3 L=$r LW=3 A=127.0.0.1 P=[0-9]" || fail "rank $r env"
done
[ "$(echo "$out" | sed 's/.* C=//' | sort -u | wc -l)" -eq 1 ] || fail "NCCL_COMM_ID differs"
echo "$out" | grep -q "C=127.0.0.1:[0-9][0-9]*$" || fail "NCCL_COMM_ID format"
# 2. A failing rank stops the others quickly and its status is braidrun's status.
start=$(date +%s)
"$br" -n 3 --grace 1 -- sh -c 'if [ "$RANK" = 1 ]; then exit 7; fi; sleep 60'
rc=$?
[ "$rc" -eq 7 ] || fail "exit status $rc, expected 7"
[ $(($(date +%s) - start)) -lt 20 ] || fail "other ranks were not stopped"
# 3. A rank that ignores SIGTERM is killed after the grace period.
start=$(date +%s)
"$br" -n 2 --grace 1 -- sh -c 'trap "" TERM; if [ "$RANK" = 0 ]; then exit 3; fi; sleep 60'
rc=$?
[ "$rc" -eq 3 ] || fail "exit status $rc, expected 3"
[ $(($(date +%s) - start)) -lt 20 ] || fail "SIGKILL after grace did not happen"
# 4. A rank killed by a signal gives 128+signal.
"$br" -n 2 -- sh -c 'if [ "$RANK" = 1 ]; then kill -9 $$; fi; sleep 60'
rc=$?
[ "$rc" -eq 137 ] || fail "exit status $rc, expected 137"
# 5. --tag prefixes lines of stdout and stderr.
out=$("$br" -n 2 --tag -- sh -c 'echo hello; echo oops >&2; printf tail' 2>&1) || fail "tag run"
echo "$out"
for r in 0 1; do
  echo "$out" | grep -q "^\[$r\] hello$" || fail "tagged stdout of rank $r"
  echo "$out" | grep -q "^\[$r\] oops$" || fail "tagged stderr of rank $r"
  echo "$out" | grep -q "^\[$r\] tail$" || fail "unterminated last line of rank $r"
done
# 6. All succeed -> 0; a missing program -> nonzero; bad usage -> 2.
"$br" -n 2 -- true || fail "true exited $?"
"$br" -n 1 -- /nonexistent/program 2>/dev/null && fail "missing program succeeded"
"$br" -n 0 -- true 2>/dev/null
[ $? -eq 2 ] || fail "bad usage status"
# 7. The command line (CLI11): everything from the program on reaches it untouched, with
#    or without "--"; -np N and --nproc=N are -n N; errors name the option, status 2.
out=$("$br" -n 1 -- sh -c 'printf "%s|" "$@"' sh -n 3 --tag -- --grace x -np 2) ||
  fail "pass-through run exited $?"
[ "$out" = "-n|3|--tag|--|--grace|x|-np|2|" ] || fail "program arguments changed: '$out'"
out=$("$br" --tag --grace 1 -n 1 printf '%s|' -n 5 --help) || fail "run without -- exited $?"
[ "$out" = "[0] -n|5|--help|" ] || fail "program arguments without --: '$out'"
[ "$("$br" -np 2 -- sh -c 'echo $WORLD_SIZE' | sort -u)" = 2 ] || fail "-np 2"
[ "$("$br" --nproc=3 sh -c 'echo $WORLD_SIZE' | wc -l)" -eq 3 ] || fail "--nproc=3"
[ "$("$br" -n2 -- sh -c 'echo $WORLD_SIZE' | wc -l)" -eq 2 ] || fail "-n2"
for bad in "--bogus -n 2 -- true:--bogus" "-n x -- true:--nproc" "-n 2 --grace -1 true:--grace" \
           "-- true:--nproc" "-n 2:program" "-n 2 --:program"; do
  # shellcheck disable=SC2086
  err=$("$br" ${bad%:*} 2>&1 >/dev/null)
  rc=$?
  [ "$rc" -eq 2 ] || fail "'${bad%:*}' exited $rc, expected 2"
  case $err in *"${bad##*:}"*) ;; *) fail "'${bad%:*}': '$err' does not name ${bad##*:}" ;; esac
done
"$br" --help | grep -q "^usage: braidrun" || fail "--help"
# 8. SIGTERM to braidrun reaches the ranks.
"$br" -n 2 -- sleep 60 &
pid=$!
sleep 1
kill -TERM $pid
wait $pid
rc=$?
[ "$rc" -ne 0 ] || fail "terminated run exited 0"
echo "braidrun_test.sh: ok"
