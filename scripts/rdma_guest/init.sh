#!/bin/busybox sh
# /init of the rdma-guest initramfs (see scripts/rdma-guest.sh). Runs as PID 1 under
# busybox sh, in the initramfs root, which holds only busybox, the kernel modules and
# this file.
#
#  1. mounts /proc /sys /dev, loads the modules listed in /etc/modules-load (in order),
#  2. mounts the host's root filesystem (9p tag "hostroot", read-only) under a tmpfs
#     overlay on /host (writes allowed, discarded at the end), and the per-run job folder
#     (9p tag "job", writable) on /host/run/rdma-guest,
#  3. puts proc, sys, devtmpfs, devpts and tmpfs (/tmp, /dev/shm, /run, /var/tmp) into
#     /host, and every --rw folder (9p tags rw0, rw1, ...; paths in job/rw) writable,
#  4. brings up lo and dummy0 (10.0.0.1/24), creates rxe0 on dummy0 and waits for its
#     port to be ACTIVE,
#  5. chroots into /host and runs job/run.sh with bash; its stdout and stderr go to the
#     virtio-serial port "out" (a file the host prints), its status to job/status,
#  6. powers off.
# job/status holds the command's exit status, or "skip: <why>" when the RDMA device did
# not come up, or "error: <why>" when the guest could not set up its filesystems. Progress lines go to the serial console (a log file on the host).
export PATH=/bin:/sbin
J=/host/run/rdma-guest

log() { read -r up _ < /proc/uptime; echo "rdma-guest-init: [$up] $*" > /dev/console; }
finish() {
  sync
  poweroff -f
  sleep 5
  exit 1   # PID 1 exiting panics the kernel; with panic=-1 -no-reboot qemu stops
}
# fail skip|error WHY: report why the command cannot run (skip: no RDMA device; error:
# anything else) in job/status if that is mounted, else on the console only.
fail() {
  log "FAILED: $2"
  if [ -d "$J" ] && [ -w "$J" ]; then echo "$1: $2" > "$J/status"; fi
  finish
}

/bin/busybox mkdir -p /proc /sys /dev /host /tmp
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
exec < /dev/console > /dev/console 2>&1
echo /sbin/modprobe > /proc/sys/kernel/modprobe
log "userspace up, loading modules"

# Modules, in dependency order (computed on the host from the kernel's modules.dep).
while read -r mod; do
  [ -n "$mod" ] || continue
  insmod "/lib/modules/$mod" 2>/dev/null || log "insmod $mod failed"
done < /etc/modules-load

log "modules loaded, mounting the host root"
mountopt=trans=virtio,version=9p2000.L,msize=512000
# The host root is the read-only lower layer of an overlay whose upper layer is a tmpfs:
# the guest can write anywhere, and what it writes is dropped at power-off (--rw folders
# excepted). Without overlayfs, the host root is mounted read-only as it is.
mkdir -p /lower /rw
mount -t 9p -o "$mountopt,ro,cache=loose" hostroot /lower || fail error "cannot mount host root over 9p"
mount -t tmpfs -o mode=755 tmpfs /rw && mkdir -p /rw/upper /rw/work
if ! mount -t overlay -o lowerdir=/lower,upperdir=/rw/upper,workdir=/rw/work overlay /host; then
  log "overlayfs failed, the host root is read-only"
  mount --move /lower /host
fi
mount -t proc proc /host/proc
mount -t sysfs sysfs /host/sys
mount -t devtmpfs devtmpfs /host/dev
mkdir -p /host/dev/pts /host/dev/shm
mount -t devpts -o gid=5,mode=620,ptmxmode=666 devpts /host/dev/pts
mount -t tmpfs -o mode=1777 tmpfs /host/dev/shm
mount -t tmpfs -o mode=1777 tmpfs /host/tmp
[ -d /host/var/tmp ] && mount -t tmpfs -o mode=1777 tmpfs /host/var/tmp
mount -t tmpfs -o mode=755 tmpfs /host/run
mkdir -p "$J"
mount -t 9p -o "$mountopt,cache=none" job "$J" || fail error "cannot mount the job folder over 9p"

# Writable shares (--rw DIR): job/rw has one host path per line, tag rw<N> by line number.
n=0
if [ -f "$J/rw" ]; then
  while IFS= read -r dir; do
    [ -n "$dir" ] || continue
    mkdir -p "/host$dir"
    mount -t 9p -o "$mountopt,cache=none" "rw$n" "/host$dir" || fail error "cannot mount $dir writable"
    n=$((n + 1))
  done < "$J/rw"
fi

log "filesystems mounted, creating rxe0"
hostname rdma-guest
ip link set lo up
ip link set dummy0 up 2>/dev/null || { ip link add dummy0 type dummy && ip link set dummy0 up; } \
  || fail skip "no dummy0 network device"
ip addr add 10.0.0.1/24 dev dummy0
PATH=/usr/sbin:/usr/bin:/sbin:/bin chroot /host rdma link add rxe0 type rxe netdev dummy0 || fail skip "rdma link add rxe0 failed"

# Wait (up to 60 s of guest time) for the port to become ACTIVE and its IPv4 GID to appear.
state=/sys/class/infiniband/rxe0/ports/1/state
i=0
while [ $i -lt 600 ]; do
  case "$(cat $state 2>/dev/null)" in *ACTIVE*) break ;; esac
  sleep 0.1; i=$((i + 1))
done
case "$(cat $state 2>/dev/null)" in *ACTIVE*) ;; *) fail skip "rxe0 port not ACTIVE ($(cat $state 2>/dev/null))" ;; esac
i=0
while [ $i -lt 100 ]; do
  grep -q '0000:0000:0000:0000:0000:ffff' /sys/class/infiniband/rxe0/ports/1/gids/1 2>/dev/null && break
  sleep 0.1; i=$((i + 1))
done
log "rxe0 ACTIVE, running the command"

# The output port: /sys/class/virtio-ports/vportXpY/name is "out"; its node is in /dev.
out=/dev/console
for p in /sys/class/virtio-ports/*; do
  [ "$(cat "$p/name" 2>/dev/null)" = out ] && out=/dev/${p##*/}
done
chroot /host /bin/bash /run/rdma-guest/run.sh < /dev/null > "$out" 2>&1
rc=$?
echo "$rc" > "$J/status"
log "command exited with status $rc"
finish
