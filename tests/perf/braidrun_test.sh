#!/usr/bin/env bash
# Behaviour of braidrun without the library: environment, exit status, failure handling.
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
# 7. SIGTERM to braidrun reaches the ranks.
"$br" -n 2 -- sleep 60 &
pid=$!
sleep 1
kill -TERM $pid
wait $pid
rc=$?
[ "$rc" -ne 0 ] || fail "terminated run exited 0"
echo "braidrun_test.sh: ok"
