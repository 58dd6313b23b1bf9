# shellcheck shell=bash
# Sourced by scripts/rdma-guest.sh (bash, set -euo pipefail): installs host packages and
# builds the cached guest kernel + initramfs. Functions print progress on stderr and
# return 77 (after printing why) when the guest cannot be made here.
#
# Cache layout ($RG_CACHE, one folder per kernel version, e.g. 6.1.0-56-amd64):
#   <kver>/vmlinux               the uncompressed kernel (qemu boots it via its PVH note)
#   <kver>/lib/modules/<kver>/   the modules the guest needs, tree layout, + modules.dep
#   <kver>/modules.order         those modules in load order (paths under the above)
#   <kver>/initramfs-<hash>.cpio busybox + modules + init.sh (<hash>: of init.sh and list)
#   <kver>/.complete             written last; a folder without it is rebuilt

# Modules the guest loads (their dependencies are added from modules.dep).
RG_MODULES=(virtio_pci virtio_console 9pnet_virtio 9p dummy crc32_generic crc32_pclmul
  overlay rdma_rxe ib_uverbs rdma_ucm)

rg_note() { echo "rdma-guest: $*" >&2; }

# rg_install PKG...: apt-get install the given packages (root only), apt-get update and
# retry once when the first try fails.
rg_install() {
  [ $# -gt 0 ] || return 0
  if [ "$(id -u)" != 0 ]; then
    rg_note "missing packages ($*), not root so cannot install them"
    return 1
  fi
  rg_note "installing: $*"
  local apt=(env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends)
  "${apt[@]}" "$@" > /dev/null 2>&1 && return 0
  apt-get update -qq > /dev/null 2>&1 || true
  "${apt[@]}" "$@" > /dev/null
}

# rg_host_packages: the host tools (qemu, busybox, kmod) and the guest's userland (the
# guest runs the host's root filesystem, so its tools are installed here).
rg_host_packages() {
  local missing=() pair pkg test
  for pair in \
    "qemu-system-x86:command -v qemu-system-x86_64" \
    "busybox-static:dpkg -s busybox-static" \
    "kmod:command -v depmod" \
    "xz-utils:command -v xz" \
    "cpio:command -v cpio" \
    "iproute2:command -v rdma" \
    "ibverbs-providers:ls /usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav*.so" \
    "ibverbs-utils:command -v ibv_devinfo" \
    "perftest:command -v ib_write_bw" \
    "ucx-utils:command -v ucx_info"; do
    pkg=${pair%%:*} test=${pair#*:}
    PATH=$PATH:/usr/sbin:/sbin eval "$test" > /dev/null 2>&1 || missing+=("$pkg")
  done
  rg_install "${missing[@]}" || true
  for test in "command -v qemu-system-x86_64" "dpkg -s busybox-static" \
    "PATH=$PATH:/usr/sbin:/sbin command -v depmod" "command -v xz" "command -v cpio"; do
    if ! eval "$test" > /dev/null 2>&1; then
      echo "rdma-guest: SKIP: host tools missing and not installable (${test##* })"
      return 77
    fi
  done
  for pkg in ibv_devinfo ib_write_bw rdma ucx_info; do
    command -v "$pkg" > /dev/null || rg_note "warning: $pkg missing on the host (and in the guest)"
  done
}

# rg_pick_kernel: print the kernel version to use: $BRAID_GUEST_KERNEL if set, else the
# newest already cached, else the newest linux-image-6.1.0-*-amd64 in the archive.
rg_pick_kernel() {
  if [ -n "${BRAID_GUEST_KERNEL:-}" ]; then echo "$BRAID_GUEST_KERNEL"; return; fi
  local k
  k=$(find "$RG_CACHE" -mindepth 2 -maxdepth 2 -path '*/6.1.0-*-amd64/.complete' 2>/dev/null \
    | sed 's|.*/\(6\.1\.0-[0-9]*-amd64\)/.*|\1|' | sort -V | tail -n1)
  if [ -z "$k" ]; then
    k=$(apt-cache pkgnames linux-image-6.1.0- 2>/dev/null | grep -E '^linux-image-6\.1\.0-[0-9]+-amd64$' | sort -V | tail -n1)
    if [ -z "$k" ] && [ "$(id -u)" = 0 ]; then
      apt-get update -qq > /dev/null 2>&1 || true
      k=$(apt-cache pkgnames linux-image-6.1.0- 2>/dev/null | grep -E '^linux-image-6\.1\.0-[0-9]+-amd64$' | sort -V | tail -n1)
    fi
    k=${k#linux-image-}
  fi
  echo "$k"
}

# rg_build_kernel KVER: fill $RG_CACHE/KVER (vmlinux, modules) unless it is complete.
rg_build_kernel() {
  local kv=$1 dir=$RG_CACHE/$1 tmp deb vmlinuz off m
  [ -f "$dir/.complete" ] && return 0
  rg_note "preparing guest kernel $kv in $dir (one time)"
  rm -rf "$dir"; mkdir -p "$dir"
  tmp=$(mktemp -d "$RG_CACHE/.build.XXXXXX")
  if ! (cd "$tmp" && apt-get download "linux-image-$kv" > /dev/null 2>&1); then
    [ "$(id -u)" = 0 ] && apt-get update -qq > /dev/null 2>&1 || true
    if ! (cd "$tmp" && apt-get download "linux-image-$kv" > /dev/null 2>&1); then
      rm -rf "$tmp" "$dir"
      echo "rdma-guest: SKIP: cannot download linux-image-$kv from the Debian archive"
      return 77
    fi
  fi
  deb=$(ls "$tmp"/linux-image-*.deb)
  rg_note "downloaded $(basename "$deb") ($(du -m "$deb" | cut -f1) MB), extracting"
  dpkg-deb -x "$deb" "$tmp/root"
  rm -f "$deb"
  # The vmlinuz is a bzImage whose payload is xz: find the xz stream and decompress it.
  vmlinuz=$tmp/root/boot/vmlinuz-$kv
  off=$(LC_ALL=C grep -aboP '\xfd7zXZ\x00' "$vmlinuz" | head -n1 | cut -d: -f1)
  [ -n "$off" ] || { rg_note "no xz stream in $vmlinuz"; return 1; }
  tail -c +$((off + 1)) "$vmlinuz" | xz -dc --single-stream > "$dir/vmlinux" 2>/dev/null || true
  if [ "$(head -c 4 "$dir/vmlinux" | od -An -tx1 | tr -d ' ')" != 7f454c46 ]; then
    rg_note "could not extract an ELF vmlinux from $vmlinuz"; return 1
  fi
  # Resolve the module closure with the tree's own modules.dep, in load order.
  PATH=$PATH:/usr/sbin:/sbin depmod -b "$tmp/root" "$kv"
  local mroot=$tmp/root/lib/modules/$kv
  for m in "${RG_MODULES[@]}"; do
    PATH=$PATH:/usr/sbin:/sbin modprobe -C /dev/null -d "$tmp/root" -S "$kv" --show-depends "$m" \
      | awk '$1 == "insmod" { print $2 }'
  done | awk '!seen[$0]++' | sed "s|^$mroot/||" > "$dir/modules.order"
  while read -r m; do
    mkdir -p "$dir/lib/modules/$kv/$(dirname "$m")"
    cp "$mroot/$m" "$dir/lib/modules/$kv/$m"
  done < "$dir/modules.order"
  cp "$mroot"/modules.builtin "$mroot"/modules.builtin.modinfo "$dir/lib/modules/$kv/"
  cp "$dir/modules.order" "$dir/lib/modules/$kv/modules.order"
  PATH=$PATH:/usr/sbin:/sbin depmod -b "$dir" "$kv"
  rm -rf "$tmp"
  rg_note "kernel $kv ready: vmlinux $(du -m "$dir/vmlinux" | cut -f1) MB, $(wc -l < "$dir/modules.order") modules"
  touch "$dir/.complete"
}

# rg_build_initramfs KVER INIT: print the path of the cached initramfs, building it when
# the cached one was made from another init script or module list.
rg_build_initramfs() {
  local kv=$1 init=$2 dir=$RG_CACHE/$1 hash out st a
  hash=$(cat "$init" "$dir/modules.order" /bin/busybox | sha1sum | cut -c1-12)
  out=$dir/initramfs-$hash.cpio
  if [ ! -f "$out" ]; then
    rg_note "building initramfs $out"
    st=$(mktemp -d "$RG_CACHE/.initramfs.XXXXXX")
    mkdir -p "$st"/{bin,sbin,etc,proc,sys,dev,host,tmp,lib/modules}
    cp /bin/busybox "$st/bin/busybox"
    for a in $(/bin/busybox --list); do
      [ -e "$st/bin/$a" ] || ln -s busybox "$st/bin/$a"
    done
    ln -s ../bin/busybox "$st/sbin/modprobe"
    cp -a "$dir/lib/modules/$kv" "$st/lib/modules/$kv"
    sed "s|^|$kv/|" "$dir/modules.order" > "$st/etc/modules-load"
    install -m 755 "$init" "$st/init"
    (cd "$st" && find . | LC_ALL=C sort | cpio -o -H newc --quiet -R 0:0) > "$out.tmp"
    mv "$out.tmp" "$out"
    rm -rf "$st"
    find "$dir" -maxdepth 1 -name 'initramfs-*.cpio' ! -path "$out" -delete
  fi
  echo "$out"
}
