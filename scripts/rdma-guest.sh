#!/usr/bin/env bash
# Run one command inside a qemu guest that has an active soft-RoCE (rdma_rxe) device.
#
#   scripts/rdma-guest.sh [--smp N] [--mem MiB] [--timeout S] [--rw DIR]... [--verbose]
#                         -- CMD ARGS...
#
# CMD runs as root in the guest, in the same working directory as here, with this
# environment (less PWD, SHLVL, BASH_*), stdin /dev/null. Its stdout and stderr both come
# out on this script's stdout, as they are written. The exit status is CMD's.
#
# How: the guest boots Debian's linux-image-6.1.0-*-amd64 (uncompressed vmlinux, under
# TCG: `-accel tcg,thread=multi -cpu max`; KVM is not used, it does not run Debian
# kernels on these machines) with a small busybox initramfs (rdma_guest/init.sh) that
# mounts this machine's root filesystem read-only over virtio-9p under an overlay with a
# tmpfs upper layer (the guest may write anywhere; writes are dropped when it stops),
# with tmpfs on /tmp, /dev/shm, /run and /var/tmp, creates rxe0 on dummy0 (10.0.0.1/24;
# RoCE v2 IPv4 GID at index 1, active MTU 1024), waits for the port to be ACTIVE, and
# chroots into the host root to run CMD. So the guest has every program and library installed here: build on
# the host, run in the guest. Two processes in the guest can talk over rxe0 (rxe loops
# its own address back), e.g. `ib_write_bw -d rxe0 -x 1 & sleep 1; ib_write_bw -d rxe0
# -x 1 10.0.0.1`. Emulated hardware: check correctness, not speed.
#
# Options:
#   --smp N       guest vCPUs (default 2; each busy one keeps a host core busy). Two
#                 busy-polling processes (perftest, pingpong) on 2 vCPUs starve rxe's
#                 kernel work: latencies jump to ms; --smp 3 or 4 avoids that. Use
#                 --smp 1 when other suites run in parallel.
#   --mem MiB     guest memory (default 2048)
#   --timeout S   kill the guest after S seconds (default 1200): exit 124
#   --rw DIR      share DIR writable, so that what the guest writes there stays on the
#                 host (repeatable); e.g. ctest's Testing/ logs in a build tree. Without
#                 it, writes land in the guest's tmpfs overlay and are lost.
#   --verbose     print the guest's console log (kernel + init messages) on stderr
#
# Host packages (installed with apt-get when missing, root only): qemu-system-x86,
# busybox-static, kmod, xz-utils, cpio, iproute2, ibverbs-providers, ibverbs-utils,
# perftest. The kernel .deb comes from `apt-get download`.
# Cache: ${BRAID_GUEST_CACHE:-/var/cache/braid-rdma-guest} (falls back to
# ~/.cache/braid-rdma-guest if not writable), one folder per kernel version holding the
# vmlinux, the needed modules and the initramfs; the first run downloads the kernel
# (~70 MB) and builds them (30-60 s), later runs reach CMD in 5-15 s. Set
# BRAID_GUEST_KERNEL=6.1.0-N-amd64 to pin a kernel; delete the folder to rebuild.
# BRAID_GUEST_APPEND adds kernel arguments (e.g. "loglevel=7" with --verbose).
# BRAID_GUEST_ACCEL=kvm uses KVM (-cpu host) where the CPU has vmx/svm; default TCG.
#
# Exit status: CMD's; 77 with "rdma-guest: SKIP: <why>" when the guest cannot run here
# (no qemu and it cannot be installed, no kernel package, rxe did not come up); 124 on
# timeout; 125 when the guest died without reporting a status (console log printed); 2
# on bad usage.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
smp=2 mem=2048 timeout=1200 verbose=0
rw_dirs=()

usage() {
  sed -n '4,5p' "$0" | sed 's/^# *//' >&2
  exit 2
}

while [ $# -gt 0 ]; do
  case "$1" in
    --smp) smp=${2:?}; shift 2 ;;
    --mem) mem=${2:?}; shift 2 ;;
    --timeout) timeout=${2:?}; shift 2 ;;
    --rw) rw_dirs+=("$(cd "${2:?}" && pwd -P)"); shift 2 ;;
    --verbose|-v) verbose=1; shift ;;
    --) shift; break ;;
    -h|--help) usage ;;
    *) echo "rdma-guest: unknown option $1" >&2; usage ;;
  esac
done
[ $# -gt 0 ] || usage
# The guest mounts fresh tmpfs on /tmp, /var/tmp, /run and /dev/shm, hiding the host's
# folders there: a working directory under one of them (a CI clone in /tmp) is shared
# writable at its own path, so the command finds it.
cwd=$(pwd -P)
case "$cwd/" in
  /tmp/*|/var/tmp/*|/run/*|/dev/shm/*)
    covered=0
    for d in ${rw_dirs[@]+"${rw_dirs[@]}"}; do
      case "$cwd/" in "$d"/*) covered=1 ;; esac
    done
    [ "$covered" -eq 1 ] || rw_dirs+=("$cwd")
    ;;
esac
for v in "$smp" "$mem" "$timeout"; do
  [[ $v =~ ^[0-9]+$ ]] || { echo "rdma-guest: not a number: $v" >&2; exit 2; }
done

RG_CACHE=${BRAID_GUEST_CACHE:-/var/cache/braid-rdma-guest}
if ! mkdir -p "$RG_CACHE" 2>/dev/null || [ ! -w "$RG_CACHE" ]; then
  RG_CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/braid-rdma-guest
  mkdir -p "$RG_CACHE"
fi
# shellcheck source-path=SCRIPTDIR
. "$here/rdma_guest/prepare.sh"

t0=$(date +%s.%N)
# Host tools, then kernel and initramfs, under a lock: parallel runs build once.
exec 9> "$RG_CACHE/.lock"
flock 9
rg_host_packages
kv=$(rg_pick_kernel)
if [ -z "$kv" ]; then
  echo "rdma-guest: SKIP: no linux-image-6.1.0-*-amd64 package in the Debian archive"
  exit 77
fi
rm -rf "$RG_CACHE"/.build.* "$RG_CACHE"/.initramfs.*
rg_build_kernel "$kv"
initrd=$(rg_build_initramfs "$kv" "$here/rdma_guest/init.sh")
flock -u 9
exec 9>&-

# The job folder (shared writable as tag "job", mounted at /run/rdma-guest in the guest):
# run.sh (environment, cwd, command), rw (writable shares), status (written by the guest).
job=$(mktemp -d "${TMPDIR:-/tmp}/rdma-guest.XXXXXX")
qpid=""
# shellcheck disable=SC2329  # run by the EXIT trap
cleanup() {
  [ -n "$qpid" ] && kill "$qpid" 2>/dev/null || true
  rm -rf "$job"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

{
  echo "# written by rdma-guest.sh"
  for v in $(compgen -e); do
    case "$v" in PWD|OLDPWD|SHLVL|_|BASH*|SHELLOPTS) continue ;; esac
    printf 'export %s=%q\n' "$v" "${!v}"
  done
  # shellcheck disable=SC2016  # expanded in the guest
  echo '[ -z "${TMPDIR:-}" ] || mkdir -p "$TMPDIR" 2>/dev/null || true'
  printf 'cd %q || exit 126\n' "$(pwd -P)"
  printf 'exec'; printf ' %q' "$@"; printf '\n'
} > "$job/run.sh"
: > "$job/out"
# TCG by default: /dev/kvm exists on these machines but cannot run a Debian kernel.
accel=tcg,thread=multi cpu=max
if [ "${BRAID_GUEST_ACCEL:-tcg}" = kvm ]; then
  if [ -r /dev/kvm ] && [ -w /dev/kvm ] && grep -qE '\b(vmx|svm)\b' /proc/cpuinfo; then
    accel=kvm cpu=host
  else
    echo "rdma-guest: BRAID_GUEST_ACCEL=kvm but KVM is unusable here (no vmx/svm); using TCG" >&2
  fi
fi
# shellcheck disable=SC2054  # commas are inside qemu option values
qemu=(qemu-system-x86_64 -nodefaults -no-user-config -no-reboot -display none -nic none
  -accel "$accel" -cpu "$cpu" -smp "$smp" -m "$mem"
  -kernel "$RG_CACHE/$kv/vmlinux" -initrd "$initrd"
  -append "console=ttyS0 quiet loglevel=4 panic=-1 mitigations=off rdinit=/init ${BRAID_GUEST_APPEND:-}"
  -serial "file:$job/console.log"
  -device virtio-serial-pci -chardev "file,id=out,path=$job/out"
  -device virtserialport,chardev=out,name=out
  -fsdev local,id=hostroot,path=/,security_model=none,readonly=on,multidevs=remap
  -device virtio-9p-pci,fsdev=hostroot,mount_tag=hostroot
  -fsdev "local,id=job,path=$job,security_model=none"
  -device virtio-9p-pci,fsdev=job,mount_tag=job)
i=0
for d in "${rw_dirs[@]}"; do
  printf '%s\n' "$d" >> "$job/rw"
  qemu+=(-fsdev "local,id=rw$i,path=$d,security_model=none,multidevs=remap"
    -device "virtio-9p-pci,fsdev=rw$i,mount_tag=rw$i")
  i=$((i + 1))
done

timeout -k 5 "$timeout" "${qemu[@]}" < /dev/null > "$job/qemu.log" 2>&1 &
qpid=$!
# Stream the command's output while the guest runs; tail stops when qemu has exited.
tail -n +1 -s 0.2 -f --pid="$qpid" "$job/out" 2>/dev/null &
tpid=$!
qrc=0
wait "$qpid" || qrc=$?
qpid=""
wait "$tpid" || true
t1=$(date +%s.%N)

[ "$verbose" = 0 ] || cat "$job/console.log" >&2
if [ "$qrc" = 124 ] || [ "$qrc" = 137 ]; then
  echo "rdma-guest: TIMEOUT: guest killed after ${timeout}s; console tail:" >&2
  tail -n 20 "$job/console.log" >&2
  exit 124
fi
status=$(cat "$job/status" 2>/dev/null || true)
case "$status" in
  skip:*)
    echo "rdma-guest: SKIP: ${status#skip: }"
    exit 77 ;;
  error:*)
    echo "rdma-guest: FAILED: ${status#error: }; console tail:" >&2
    tail -n 20 "$job/console.log" >&2
    exit 125 ;;
  [0-9]*)
    [ "$verbose" = 0 ] || awk -v a="$t0" -v b="$t1" -v s="$status" \
      'BEGIN { printf "rdma-guest: %.1f s in all, status %s\n", b - a, s }' >&2
    exit "$status" ;;
esac
echo "rdma-guest: FAILED: the guest stopped without a status (qemu exit $qrc); qemu and console tail:" >&2
tail -n 20 "$job/qemu.log" "$job/console.log" >&2
exit 125
