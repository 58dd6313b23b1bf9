#!/usr/bin/env bash
# Braid over IB verbs against perftest on the same RDMA device, in the same run:
# large-message bandwidth (ib_write_bw vs sendrecv_perf busbw, 4 MiB) and small-message
# latency (ib_send_lat typical vs sendrecv_perf time, 8 B), each pair run ROUNDS times,
# alternating, then a table with the ratios Braid/perftest.
#
# Meant for the soft-RoCE guest (emulated: only ratios from one run mean anything):
#   scripts/rdma-guest.sh --smp 2 -- bash perf/net/ib_vs_perftest.sh build [ROUNDS]
# Both sides run server and client (two processes) on the one device; rxe loops its own
# address back. Environment: IB_DEV (rxe0), IB_GID (1: RoCE v2 IPv4), IB_ADDR (10.0.0.1),
# IB_IFNAME (dummy0: the interface holding IB_ADDR), BW_ITERS (20), LAT_ITERS (200),
# SERVER_WAIT (6 s: a perftest server takes seconds to listen under emulation).
#
# Notes on what is compared: sendrecv_perf with 2 ranks is a ring, so each rank sends and
# receives 4 MiB per iteration (the device carries both directions at once) while
# ib_write_bw is one direction; Braid's figure is busbw = algbw = bytes / time per
# direction, in MB/s (10^6 B/s) like perftest's MiB/s converted. For latency,
# sendrecv's time is one exchange (send to the next rank, receive from the previous),
# ib_send_lat's t_typical is half a ping-pong round trip.
set -u
[ $# -ge 1 ] || { echo "usage: $0 BUILD_DIR [ROUNDS]" >&2; exit 2; }
bin=$(cd "$1" && pwd)/bin || exit 2
rounds=${2:-2}
dev=${IB_DEV:-rxe0} gid=${IB_GID:-1} addr=${IB_ADDR:-10.0.0.1} ifname=${IB_IFNAME:-dummy0}
bw_iters=${BW_ITERS:-20} lat_iters=${LAT_ITERS:-200} wait_s=${SERVER_WAIT:-6}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rows=()

# perftest PROGRAM ARGS...: server in the background, client after wait_s; client output.
perftest() {
  timeout 180 "$@" >"$tmp/server" 2>&1 &
  local server=$!
  sleep "$wait_s"
  timeout 180 "$@" "$addr" >"$tmp/client" 2>&1
  local rc=$?
  wait "$server"
  cat "$tmp/client" >&2
  return $rc
}

# braid ARGS...: sendrecv_perf over IB between 2 processes; prints its output on stderr.
braid() {
  timeout 300 env BRAID_TRANSPORT=net NCCL_NET=IB NCCL_SOCKET_IFNAME="$ifname" \
    NCCL_NET_PLUGIN=none "$bin/braidrun" -n 2 -- "$bin/sendrecv_perf" "$@" >"$tmp/braid" 2>&1
  local rc=$?
  cat "$tmp/braid" >&2
  return $rc
}

# Field N of the result row whose first field is SIZE, in FILE.
field() { awk -v s="$2" -v n="$3" '$1 == s && NF >= n { v = $n } END { print v }' "$1"; }

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a > 0 && b > 0) printf "%.3f", a / b; else print "n/a" }'; }

for r in $(seq "$rounds"); do
  echo "== round $r: bandwidth, 4 MiB" >&2
  perftest ib_write_bw -d "$dev" -x "$gid" -s 4194304 -n "$bw_iters" -F
  pt_mib=$(field "$tmp/client" 4194304 4)  # #bytes #iterations BW-peak BW-average[MiB/s]
  pt_bw=$(awk -v m="${pt_mib:-0}" 'BEGIN { printf "%.2f", m * 1.048576 }')  # MB/s
  braid -b 4M -e 4M -n 20 -w 5
  # busbw from the time column: the GB/s columns have 2 decimals. bytes/us = MB/s.
  br_us=$(field "$tmp/braid" 4194304 6)
  br_bw=$(awk -v t="${br_us:-0}" 'BEGIN { if (t > 0) printf "%.2f", 4194304 / t; else print 0 }')
  rows+=("$(printf '%-5s %-14s %12s %12s %10s' "$r" "bw MB/s" "$pt_bw" "$br_bw" \
    "$(ratio "$br_bw" "$pt_bw")")")

  echo "== round $r: latency, 8 B" >&2
  perftest ib_send_lat -d "$dev" -x "$gid" -s 8 -n 1000 -F
  pt_lat=$(field "$tmp/client" 8 5)  # #bytes #iterations t_min t_max t_typical ...
  braid -b 8 -e 8 -n "$lat_iters" -w 20
  br_lat=$(field "$tmp/braid" 8 6)  # out-of-place time, us
  rows+=("$(printf '%-5s %-14s %12s %12s %10s' "$r" "lat 8B us" "${pt_lat:-n/a}" \
    "${br_lat:-n/a}" "$(ratio "${br_lat:-0}" "${pt_lat:-0}")")")
done

echo
echo "# Braid (sendrecv_perf, NCCL_NET=IB, 2 processes) vs perftest on $dev, $(nproc) CPUs"
printf '%-5s %-14s %12s %12s %10s\n' round metric perftest braid braid/pt
printf '%s\n' "${rows[@]}"
