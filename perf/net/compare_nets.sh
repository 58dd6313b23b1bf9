#!/usr/bin/env bash
# The networks on one host, 2 processes forced over the net transport: Socket against
# UCX (UCX_TLS=tcp, and shm), and optionally another build's Socket path (OLD_BIN, e.g.
# a build of an earlier commit), alternating rounds so load shifts hit all alike.
#   perf/net/compare_nets.sh BUILD_BIN_DIR [ROUNDS] [OLD_BIN_DIR]
# Prints, per round and network, sendrecv_perf busbw (GB/s) at 64 KiB, 1 MiB, 16 MiB and
# all_reduce_perf time (us) at 8 B and busbw at 16 MiB.
set -u
bin=$1 rounds=${2:-3} old=${3:-}
sr() { "$1/braidrun" -n 2 -- "$1/sendrecv_perf" -b 64K -e 16M -f 16 -n 20 -w 5 2>/dev/null; }
ar() { "$1/braidrun" -n 2 -- "$1/all_reduce_perf" -b 8 -e 16M -f 2097152 -n 50 -w 10 2>/dev/null; }
col() {  # col SIZE FIELD: the out-of-place field of the row for SIZE
  awk -v s="$1" -v f="$2" '!/^#/ && $1 == s { print $f; exit }'
}
row() {  # row NAME BIN ENV...
  local name=$1 b=$2
  shift 2
  local s a
  s=$(env "$@" bash -c "$(declare -f sr); sr $b")
  a=$(env "$@" bash -c "$(declare -f ar); ar $b")
  printf '%-14s sendrecv busbw 64K %6s  1M %6s  16M %6s | all_reduce 8B %7s us  16M %6s\n' \
    "$name" "$(echo "$s" | col 65536 8)" "$(echo "$s" | col 1048576 8)" \
    "$(echo "$s" | col 16777216 8)" "$(echo "$a" | col 8 6)" "$(echo "$a" | col 16777216 8)"
}
for r in $(seq 1 "$rounds"); do
  echo "-- round $r"
  row socket "$bin" BRAID_TRANSPORT=net NCCL_NET=Socket
  row ucx-tcp "$bin" BRAID_TRANSPORT=net NCCL_NET=UCX UCX_TLS=tcp
  row ucx-shm "$bin" BRAID_TRANSPORT=net NCCL_NET=UCX UCX_TLS=shm
  [ -n "$old" ] && row old-socket "$old" BRAID_TRANSPORT=socket
done
