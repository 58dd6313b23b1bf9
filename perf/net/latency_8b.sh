#!/usr/bin/env bash
# 8 B latency of 2 processes per transport/network: sendrecv_perf time (us) and, with
# ALLREDUCE=1, all_reduce_perf time, one line per variant, so runs of two builds (or
# two transports) can be set side by side in one session.
#
#   perf/net/latency_8b.sh BIN_DIR [VARIANT ...]
#
# A variant is shm, socket (the Socket net), socket-old (BRAID_TRANSPORT=socket, for
# builds before the net transport), ucx-tcp, ucx-shm, ib or ib-spin (IB with
# BRAID_SPIN_US=1000). Default: shm socket ucx-tcp. ITERS (2000) iterations. In the
# soft-RoCE guest:
#   scripts/rdma-guest.sh --smp 2 -- bash perf/net/latency_8b.sh build/bin shm ib ib-spin socket
# (NCCL_SOCKET_IFNAME=dummy0 there: the address rxe0 is bound to; ITERS=200).
set -u
[ $# -ge 1 ] || { echo "usage: $0 BIN_DIR [VARIANT ...]" >&2; exit 2; }
bin=$1
shift
[ $# -gt 0 ] || set -- shm socket ucx-tcp
iters=${ITERS:-2000}
time8() {  # time8 PROGRAM ENV...: the out-of-place time of the 8 B row
  local prog=$1
  shift
  env "$@" NCCL_NET_PLUGIN=none "$bin/braidrun" -n 2 -- "$bin/$prog" -b 8 -e 8 -n "$iters" \
    -w $((iters / 20 + 1)) 2>&1 | awk '!/^#/ && $1 == 8 { print $6; exit }'
}
for v in "$@"; do
  case $v in
    shm) e=(BRAID_TRANSPORT=shm) ;;
    socket) e=(BRAID_TRANSPORT=net NCCL_NET=Socket) ;;
    socket-old) e=(BRAID_TRANSPORT=socket) ;;
    ucx-tcp) e=(BRAID_TRANSPORT=net NCCL_NET=UCX UCX_TLS=tcp) ;;
    ucx-shm) e=(BRAID_TRANSPORT=net NCCL_NET=UCX UCX_TLS=shm) ;;
    ib) e=(BRAID_TRANSPORT=net NCCL_NET=IB) ;;
    ib-spin) e=(BRAID_TRANSPORT=net NCCL_NET=IB BRAID_SPIN_US=1000) ;;
    *) echo "unknown variant '$v'" >&2; exit 2 ;;
  esac
  line="$(printf '%-11s sendrecv %8s us' "$v" "$(time8 sendrecv_perf "${e[@]}")")"
  [ "${ALLREDUCE:-0}" = 1 ] && line+="$(printf '   all_reduce %8s us' "$(time8 all_reduce_perf "${e[@]}")")"
  echo "$line"
done
