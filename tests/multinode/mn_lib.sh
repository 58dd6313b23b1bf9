# shellcheck shell=bash
# Shared helpers of the multinode tests (sourced by mn_*.sh; see tests/multinode.cmake).
# Needs: SCRIPTS (the repository's scripts/ folder), PREFIX (namespace prefix of this test).

MN_SKIP=77  # ctest SKIP_RETURN_CODE of every multinode test

mn_log() { echo "[$(date +%H:%M:%S)] $*"; }
mn_fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# Skip (exit 77) with the reason when namespaces cannot be made here; BRAID_SKIP_NETNS=1
# skips on purpose (e.g. a CI runner without CAP_NET_ADMIN that still succeeds the check).
mn_require_netns() {
  if [ "${BRAID_SKIP_NETNS:-0}" = 1 ]; then
    echo "SKIP: BRAID_SKIP_NETNS=1 is set"
    exit "$MN_SKIP"
  fi
  local why rc
  why=$(bash "$SCRIPTS/netns-cluster.sh" check --prefix "$PREFIX" 2>&1)
  rc=$?
  if [ "$rc" -eq 2 ]; then
    echo "SKIP: network namespaces are not available here: $why"
    exit "$MN_SKIP"
  elif [ "$rc" -ne 0 ]; then
    mn_fail "netns-cluster.sh check failed (rc $rc): $why"
  fi
  echo "$why"
}

# mn_up NODES [shaping args...]: make the cluster; it is removed when the test exits,
# whatever the outcome (an EXIT trap; INT/TERM from ctest's timeout also end there).
mn_up() {
  trap 'bash "$SCRIPTS/netns-cluster.sh" down --prefix "$PREFIX" >/dev/null 2>&1' EXIT
  trap 'exit 143' TERM
  trap 'exit 130' INT
  bash "$SCRIPTS/netns-cluster.sh" up "$@" --prefix "$PREFIX" ||
    mn_fail "netns-cluster.sh up $* --prefix $PREFIX failed"
}

# mn_algorithms BRAID_INFO COLLKEY [plain|switch|all]: the NCCL_ALGO names of one
# collective, from the algorithm table of `braid-info --brief` ("  AllReduce      ring
# (Ring)"). COLLKEY is the perf program's name without underscores (allreduce, alltoall,
# sendrecv, ...). Algorithms marked " [switch]" (in-network: they need a braid-switch,
# without one a forced run only falls back) are left out unless asked for: "switch" lists
# only those, "all" every one; "plain" (the default) the others.
mn_algorithms() {
  "$1" --brief | awk -v want="$2" -v which="${3:-plain}" '
    /^Algorithms/ { on = 1; next }
    on && /^  [A-Za-z]/ {
      c = tolower($1); gsub(/_/, "", c)
      if (c != want) next
      sw = $NF == "[switch]"
      if (which == "all" || (which == "switch" && sw) || (which == "plain" && !sw)) print $2
    }'
}

# mn_judge LOG: the perf program's verdict from its (rank-prefixed) output: result rows,
# no row with wrong elements, the "0 OK" summary. Prints why and returns 1 if not.
mn_judge() {
  local log=$1 rows bad
  # Result rows (rank 0 prints them): "[0]  size count type redop root t algbw busbw #wrong ..."
  rows=$(awk '$1 == "[0]" && NF == 14 && $2 ~ /^[0-9]+$/' "$log" | wc -l)
  bad=$(awk '$1 == "[0]" && NF == 14 && $2 ~ /^[0-9]+$/ &&
             (($10 != "N/A" && $10 + 0 > 0) || ($14 != "N/A" && $14 + 0 > 0))' "$log" | wc -l)
  [ "$rows" -gt 0 ] || { echo "no result rows"; return 1; }
  [ "$bad" -eq 0 ] || { echo "$bad rows with wrong elements"; return 1; }
  grep -q '^\[0\] # Out of bounds values : 0 OK' "$log" || { echo "no '0 OK' summary"; return 1; }
  echo "$rows rows, 0 wrong"
}

# mn_transports LOG NODES PER PLACEMENT: every "rank R ...: channel C from rank P via T"
# line (NCCL_DEBUG_SUBSYS=INIT) must say shm for two ranks of one node and net for
# ranks of two nodes; at least one of each must be seen where the layout has such pairs.
mn_transports() {
  awk -v nodes="$2" -v per="$3" -v placement="$4" '
    function node(r) { return placement == "block" ? int(r / per) : r % nodes }
    / of [0-9]+, comm .*: channel [0-9]+ from rank [0-9]+ via / {
      for (i = 1; i <= NF; i++) {
        if ($i == "rank" && $(i + 2) == "of") me = $(i + 1)
        if ($i == "from" && $(i + 1) == "rank") peer = $(i + 2)
        if ($i == "via") how = $(i + 1)
      }
      seen++
      want = me == peer ? "local" : (node(me) == node(peer) ? "shm" : "net")
      count[how]++
      if (how != want) {
        bad++
        if (bad <= 5) printf "rank %d <- rank %d via %s, expected %s\n", me, peer, how, want
      }
    }
    END {
      if (seen == 0) { print "no transport lines in the log (NCCL_DEBUG_SUBSYS=INIT)"; exit 1 }
      if (bad > 0) { printf "%d connections on the wrong transport\n", bad; exit 1 }
      if (per > 1 && count["shm"] == 0) { print "no shm connection inside a node"; exit 1 }
      if (nodes > 1 && count["net"] == 0) { print "no net connection across nodes"; exit 1 }
      printf "transports ok: %d shm, %d net, %d local\n", count["shm"], count["net"], count["local"]
    }' "$1"
}

# mn_algorithms_used LOG COLLKEY: the algorithms the ranks' TUNING lines report for that
# collective, space separated. Informational only (the format is the tuner's): both
# "AllReduce count 1024: algorithm ring, ..." and "AllReduce 4 KiB (...): ring/Simple ..."
# are understood; an unknown format gives "?".
mn_algorithms_used() {
  awk -v want="$2" '
    / NCCL INFO / {
      for (i = 1; i < NF; i++) if ($i == "INFO") break
      c = tolower($(i + 1)); gsub(/_/, "", c)
      if (c != want) next
      a = ""
      if (match($0, /: algorithm [A-Za-z0-9_]+/)) {
        a = substr($0, RSTART + 12, RLENGTH - 12)
      } else if (match($0, /\): [A-Za-z0-9_]+\/[A-Za-z0-9_]+ channels/)) {
        a = substr($0, RSTART + 3, RLENGTH - 3); sub(/ channels$/, "", a)
      }
      if (a != "") n[a]++
    }
    END { for (a in n) printf "%s ", a }' "$1"
}

# mn_collnet LOG COLLKEY ALGO WORLD: the run went through the switch. Every one of WORLD
# ranks printed "CollNet BraidSwitch" (NCCL_DEBUG_SUBSYS=INIT) and none warned that the
# collnet is not used or failed to set up; with ALGO (not "tuner"), every TUNING line of
# the collective names ALGO and nothing warned that NCCL_ALGO allows no algorithm (a
# forced switch algorithm that silently fell back to a host one fails). Prints the
# algorithms used, or why not and returns 1.
mn_collnet() {
  local log=$1 key=$2 algo=$3 world=$4 ranks used a
  ranks=$(grep ' NCCL INFO .*CollNet BraidSwitch' "$log" | awk '{print $1}' | sort -u | wc -l)
  if [ "$ranks" -ne "$world" ]; then
    echo "$ranks of $world ranks printed 'CollNet BraidSwitch'"
    grep -m 5 'CollNet not used\|CollNet setup failed\|NCCL WARN' "$log"
    return 1
  fi
  if grep -q 'CollNet not used\|CollNet setup failed' "$log"; then
    grep -m 3 'CollNet not used\|CollNet setup failed' "$log"
    return 1
  fi
  used=$(mn_algorithms_used "$log" "$key")
  [ -n "$used" ] || { echo "no TUNING line for $key"; return 1; }
  if [ "$algo" != tuner ]; then
    for a in $used; do
      if [ "${a%%/*}" != "$algo" ]; then
        echo "ran $a although NCCL_ALGO forced $algo: used [${used% }]"
        return 1
      fi
    done
    if grep -q 'allows\{0,1\} no algorithm' "$log"; then
      grep -m 3 'allows\{0,1\} no algorithm' "$log"
      return 1
    fi
  fi
  echo "collnet on $world ranks, used [${used% }]"
}

# mn_expect_failed LOG RC TOOK BOUND WORLD VICTIM WHAT: the verdict of a fault test
# (run by netns-run --keep-going --pids): the run did not time out (RC 124) or succeed,
# ended within BOUND seconds of the kill (TOOK), and every rank but VICTIM (-1: none)
# exited with an error status and printed an error. WHAT names what was killed.
mn_expect_failed() {
  local log=$1 rc=$2 took=$3 bound=$4 world=$5 victim=$6 what=$7 r line
  [ "$rc" -ne 124 ] || mn_fail "the ranks hung: netns-run timed out"
  [ "$rc" -ne 0 ] || mn_fail "the job succeeded although $what was killed"
  awk -v t="$took" -v b="$bound" 'BEGIN { exit !(t <= b) }' ||
    mn_fail "the ranks took ${took}s to fail, more than the bound of ${bound}s"
  for ((r = 0; r < world; r++)); do
    [ "$r" -eq "$victim" ] && continue
    line=$(grep "^netns-run.sh: rank $r (" "$log")
    [ -n "$line" ] || mn_fail "rank $r exited 0 although $what died"
    case "$line" in
      *"exited with status"*) ;;
      *) mn_fail "rank $r did not fail with an error status: $line" ;;
    esac
    grep -q "^\[$r\] .*\(failed\|error\|Error\)" "$log" ||
      mn_fail "rank $r printed no error message"
  done
}

# mn_wait_started LOG RUN_PID: waits (60 s at most) until rank 0 of the background run
# RUN_PID printed its table header into LOG, i.e. the ranks are in their timed loop;
# fails the test if it never does.
mn_wait_started() {
  local log=$1 run=$2 t
  for ((t = 0; t < 600; t++)); do
    grep -q '#wrong' "$log" 2>/dev/null && break
    kill -0 "$run" 2>/dev/null || break
    sleep 0.1
  done
  grep -q '#wrong' "$log" || { cat "$log"; mn_fail "the job did not start"; }
}

# mn_rank_pid PIDS RANK LOG: prints "pid namespace" of RANK from netns-run's --pids
# file; fails the test if the rank is unknown or not running (LOG is shown then).
mn_rank_pid() {
  local pid ns
  read -r _ pid ns < <(awk -v r="$2" '$1 == r' "$1")
  [ -n "${pid:-}" ] || mn_fail "no pid for rank $2"
  kill -0 "$pid" 2>/dev/null || { cat "$3" >&2; mn_fail "rank $2 (pid $pid) is not running"; }
  echo "$pid $ns"
}
