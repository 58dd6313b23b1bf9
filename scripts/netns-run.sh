#!/usr/bin/env bash
# Launch one program as the ranks of a job spread over the nodes of a namespace cluster
# (made by scripts/netns-cluster.sh up N --prefix P).
#
#   netns-run.sh --nodes N --ranks-per-node M [--prefix P] [--placement block|cyclic]
#                [--timeout S] [--grace S] [--keep-going] [--pids FILE] -- prog args...
#
# Starts N*M processes. Rank r runs on node r / M (block, the default) or r % N (cyclic),
# through `ip netns exec <P><node>` with
#   RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE NODE_RANK  (torchrun style)
#   NCCL_HOSTID=<namespace>      so ranks of one node share memory and others do not
#   NCCL_COMM_ID=10.77.0.1:PORT  the bootstrap root on node 0 (rank 0 is always there)
#   NCCL_SOCKET_IFNAME==veth0    the node's link to the others (exact match)
#   MASTER_ADDR MASTER_PORT      the same address, for torchrun-style programs
# and the rest of this environment (NCCL_ALGO, NCCL_DEBUG, ... pass through).
# The simulated nodes share this machine's CPUs; the library sees that (it counts the
# ranks and proxy threads per physical machine, whatever NCCL_HOSTID says) and waits
# by yielding when they outnumber the CPUs.
# Every output line is prefixed with "[rank] " (stderr lines go to stderr); programs run
# under `stdbuf -oL -eL` (when present) so their lines come out as they are printed, not
# when a pipe buffer fills (--no-stdbuf: run them as they are).
#
# Each rank leads its own process group (setsid) and signals go to the group, so helpers
# a rank starts stop with it. When a rank fails, the others get SIGTERM, then SIGKILL
# after --grace seconds (default 3); with --keep-going they are left to finish or fail on
# their own (fault tests). After --timeout seconds (default 600, 0 = none) every rank
# still running is killed. The exit status is 0 when every rank exited 0, else the first
# failure's status (128+signal for a signal), 124 on timeout; each failed rank is named
# on stderr with its status or signal.
# --pids FILE writes "rank pid namespace" lines once all ranks are started.
set -u

prog=netns-run.sh
prefix=braidnode
nodes=""
per=""
placement=block
timeout=600
grace=3
keep_going=0
pidfile=""
ifname=veth0
stdbuf=(stdbuf -oL -eL)
setsid=(setsid)

die() {
  echo "$prog: $*" >&2
  exit 2
}

while [ $# -gt 0 ]; do
  case "$1" in
    --nodes) nodes=${2:-}; shift 2 ;;
    --ranks-per-node) per=${2:-}; shift 2 ;;
    --prefix) prefix=${2:-}; shift 2 ;;
    --placement) placement=${2:-}; shift 2 ;;
    --timeout) timeout=${2:-}; shift 2 ;;
    --grace) grace=${2:-}; shift 2 ;;
    --keep-going) keep_going=1; shift ;;
    --pids) pidfile=${2:-}; shift 2 ;;
    --no-stdbuf) stdbuf=(); shift ;;
    -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    --) shift; break ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
[ $# -gt 0 ] || die "no program given (... -- prog args)"
[[ "$nodes" =~ ^[1-9][0-9]*$ ]] || die "--nodes needs a positive number"
[[ "$per" =~ ^[1-9][0-9]*$ ]] || die "--ranks-per-node needs a positive number"
[[ "$prefix" =~ ^[A-Za-z]([A-Za-z0-9_]*[A-Za-z_])?$ ]] || die "bad prefix '$prefix'"
[[ "$timeout" =~ ^[0-9]+$ ]] || die "--timeout needs seconds (0 = none)"
[[ "$grace" =~ ^[0-9]+$ ]] || die "--grace needs whole seconds"
case "$placement" in block | cyclic) ;; *) die "--placement is block or cyclic" ;; esac
for ((n = 0; n < nodes; n++)); do
  ip netns exec "${prefix}${n}" true 2>/dev/null ||
    die "namespace ${prefix}${n} missing: run scripts/netns-cluster.sh up $nodes --prefix $prefix"
done

world=$((nodes * per))
[ ${#stdbuf[@]} -gt 0 ] && ! command -v stdbuf >/dev/null 2>&1 && stdbuf=()
command -v setsid >/dev/null 2>&1 || setsid=()
root_addr=10.77.0.1
# A free port on node 0 (its namespace is private to this cluster).
port=$(ip netns exec "${prefix}0" python3 -c \
  'import socket; s = socket.socket(); s.bind(("10.77.0.1", 0)); print(s.getsockname()[1])' \
  2>/dev/null) || port=$((20000 + RANDOM % 30000))

node_of() { if [ "$placement" = block ]; then echo $(($1 / per)); else echo $(($1 % nodes)); fi; }
local_of() { if [ "$placement" = block ]; then echo $(($1 % per)); else echo $(($1 / nodes)); fi; }

signame() { kill -l "$1" 2>/dev/null || echo "$1"; }

# Each rank runs under a small wrapper subshell that waits for it and reports
# "rank status" on a FIFO; this loop reads the FIFO with a timeout, so it wakes at once
# when a rank ends and at least once a second for the deadlines.
work=$(mktemp -d "${TMPDIR:-/tmp}/netns-run.XXXXXX") || die "mktemp failed"
mkfifo "$work/events" || die "mkfifo failed"
exec 3<>"$work/events"

declare -a pid_of   # rank -> pid of the program (ip netns exec execs it: same pid)
declare -A running  # rank -> 1 while running
first_rc=0
stopping=0
failures=()

stop_all() {  # stop_all SIGNAL
  local r
  for r in "${!running[@]}"; do
    [ -n "${pid_of[$r]:-}" ] || continue
    # The rank's process group (setsid made it a leader): helpers it started go too.
    kill -"$1" -- "-${pid_of[$r]}" 2>/dev/null || kill -"$1" "${pid_of[$r]}" 2>/dev/null
  done
}
finish() {
  exec 3>&-
  rm -rf "$work"
}
on_signal() {  # on_signal NAME EXIT_CODE (no $(...) here: it breaks exit in a trap)
  echo "$prog: got SIG$1; stopping every rank" >&2
  stop_all TERM
  sleep 0.5
  stop_all KILL
  for r in "${!pid_of[@]}"; do kill -KILL -- "-${pid_of[$r]}" 2>/dev/null; done
  finish
  exit "$2"
}
trap 'on_signal INT 130' INT
trap 'on_signal TERM 143' TERM

for ((r = 0; r < world; r++)); do
  node=$(node_of "$r")
  ns="${prefix}${node}"
  (
    trap - INT TERM
    ip netns exec "$ns" "${setsid[@]}" env \
      RANK="$r" WORLD_SIZE="$world" LOCAL_RANK="$(local_of "$r")" LOCAL_WORLD_SIZE="$per" \
      NODE_RANK="$node" NCCL_HOSTID="$ns" NCCL_COMM_ID="$root_addr:$port" \
      NCCL_SOCKET_IFNAME="=$ifname" MASTER_ADDR="$root_addr" MASTER_PORT="$port" \
      "${stdbuf[@]}" "$@" 3>&- \
      > >(sed -u "s/^/[$r] /") 2> >(sed -u "s/^/[$r] /" >&2) &
    echo "$!" >"$work/pid.$r"
    wait "$!" 2>/dev/null  # (no "Killed" job notice: the failure is reported below)
    echo "$r $?" >&3
  ) &
  running[$r]=1
done
# The programs' pids (for signals and --pids).
for ((r = 0; r < world; r++)); do
  for ((t = 0; t < 500; t++)); do
    [ -s "$work/pid.$r" ] && break
    sleep 0.01
  done
  pid_of[r]=$(cat "$work/pid.$r" 2>/dev/null)
done
if [ -n "$pidfile" ]; then
  : >"$pidfile"
  for ((r = 0; r < world; r++)); do
    echo "$r ${pid_of[$r]} ${prefix}$(node_of "$r")" >>"$pidfile"
  done
fi

deadline=$((timeout > 0 ? SECONDS + timeout : 0))
kill_at=0
while [ "${#running[@]}" -gt 0 ]; do
  if [ "$deadline" -gt 0 ] && [ "$SECONDS" -ge "$deadline" ]; then
    deadline=0
    echo "$prog: timeout after ${timeout}s; ranks still running: ${!running[*]}; killing them" >&2
    [ "$first_rc" -eq 0 ] && first_rc=124
    stopping=1
    stop_all TERM
    kill_at=$((SECONDS + 1))
  fi
  if [ "$kill_at" -gt 0 ] && [ "$SECONDS" -ge "$kill_at" ]; then
    kill_at=0
    stop_all KILL
  fi
  line=""
  read -r -t 1 line <&3
  rc=$?
  if [ "$rc" -ne 0 ]; then
    [ "$rc" -gt 128 ] && continue  # a second without news
    echo "$prog: lost the event pipe (read status $rc); killing every rank" >&2
    stop_all KILL
    finish
    exit 1
  fi
  read -r r rc <<<"$line"
  [ -n "${running[$r]:-}" ] || continue
  unset "running[$r]"
  [ "$rc" -eq 0 ] && continue
  if [ "$rc" -gt 128 ]; then
    how="killed by signal $((rc - 128)) (SIG$(signame $((rc - 128))))"
  else
    how="exited with status $rc"
  fi
  if [ "$stopping" -eq 1 ]; then
    failures+=("rank $r (pid ${pid_of[$r]}, node ${prefix}$(node_of "$r")) $how (stopped by $prog)")
    continue
  fi
  failures+=("rank $r (pid ${pid_of[$r]}, node ${prefix}$(node_of "$r")) $how")
  [ "$first_rc" -eq 0 ] && first_rc=$rc
  if [ "$keep_going" -eq 0 ]; then
    echo "$prog: rank $r $how; stopping the other ranks" >&2
    stopping=1
    stop_all TERM
    kill_at=$((SECONDS + grace))
  fi
done
# After a stop: SIGKILL what is left of every rank's process group (a helper a rank
# forked while a SIGTERM was still pending for it, before setsid, escapes the first one).
if [ "$stopping" -eq 1 ]; then
  for ((r = 0; r < world; r++)); do
    [ -n "${pid_of[$r]:-}" ] && kill -KILL -- "-${pid_of[$r]}" 2>/dev/null
  done
fi
wait 2>/dev/null  # wrappers and output filters
finish
for f in "${failures[@]}"; do echo "$prog: $f" >&2; done
exit "$first_rc"
