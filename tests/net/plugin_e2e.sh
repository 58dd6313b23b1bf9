#!/usr/bin/env bash
# External net plugins end to end: processes run collectives over the net transport with
# a plugin of our own (tests/net/plugins/xnet.c) loaded by NCCL_NET_PLUGIN, and Braid
# falls back (with a WARN saying why) when a plugin is missing or broken.
#   plugin_e2e.sh BRAIDRUN ALL_REDUCE_PERF PLUGIN_DIR RUN_PERF_SH
set -u
br=$1 perf=$2 plugdir=$3 runperf=$4
fail() {
  echo "plugin_e2e.sh: FAIL: $*" >&2
  exit 1
}
small=(-b 8 -e 1M -f 8 -n 2 -w 1 -c 1)
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# run NAME ENV... : all_reduce_perf on 2 processes over the net transport, data checked.
run() {
  local name=$1
  shift
  echo "== $name"
  env BRAID_TRANSPORT=net NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET \
    LD_LIBRARY_PATH="$plugdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$@" \
    bash "$runperf" pass -- "$br" -n 2 -- "$perf" "${small[@]}" >"$log" 2>&1
  local rc=$?
  grep -E "NET|WARN|run_perf" "$log" | grep -v "^#" | head -20
  [ $rc -eq 0 ] || { tail -40 "$log"; fail "$name: collectives failed (rc $rc)"; }
}

# 1. The v11 plugin by its short name: Braid uses it, bytes go through it.
run "plugin x (v11)" NCCL_NET_PLUGIN=x
grep -q "NET: using X from .*libnccl-net-x.so" "$log" || fail "x: NET log does not name plugin X"
grep -q "X net plugin: init (version 11)" "$log" || fail "x: the plugin's init line is missing"
grep -Eq "X net plugin: comm closed, [1-9][0-9]* bytes sent" "$log" ||
  fail "x: no bytes went through the plugin"
# Teardown's goodbyes complete the receives Braid keeps posted: no comm closes with any.
! grep -q "requests still posted" "$log" || fail "x: a comm was closed with receives posted"

# 2. The same net exported as ncclNetPlugin_v8, by path: adapted to v11.
run "plugin x8 (v8) by path" NCCL_NET_PLUGIN="$plugdir/libnccl-net-x8.so"
grep -q "NET: using X8 from .*libnccl-net-x8.so (v8)" "$log" || fail "x8: not used as a v8 plugin"
grep -Eq "X net plugin: comm closed, [1-9][0-9]* bytes sent" "$log" || fail "x8: no bytes"

# 3. Unknown, table-less and failing plugins: a WARN each, then the Socket net.
run "missing plugin" NCCL_NET_PLUGIN=nosuchplugin
grep -q "NCCL_NET_PLUGIN item 'nosuchplugin' is not used: not found" "$log" || fail "missing: no WARN"
grep -q "NET: using Socket" "$log" || fail "missing: no fallback to Socket"
run "plugin without a table" NCCL_NET_PLUGIN=broken
grep -q "'broken' is not used: loaded, but it exports no ncclNetPlugin_v11" "$log" ||
  fail "broken: no WARN naming the missing table"
grep -q "NET: using Socket" "$log" || fail "broken: no fallback"
run "plugin whose init fails, then x" NCCL_NET_PLUGIN=failinit,x
grep -q "'failinit' is not used: plugin .*init() failed" "$log" || fail "failinit: no WARN"
grep -q "NET: using X from" "$log" || fail "failinit,x: the second plugin was not used"

# 4. NCCL_NET names the net: Socket although a plugin loads; a name nobody has fails.
run "NCCL_NET=Socket with plugin x loaded" NCCL_NET_PLUGIN=x NCCL_NET=socket
grep -q "NET: using Socket" "$log" || fail "NCCL_NET=socket did not pick Socket"
echo "== NCCL_NET=Nope"
env BRAID_TRANSPORT=net NCCL_NET=Nope NCCL_NET_PLUGIN=none "$br" -n 2 -- "$perf" -b 8 -e 8 -n 1 -w 0 \
  >"$log" 2>&1 && fail "NCCL_NET=Nope: the run succeeded"
grep -q "NCCL_NET / netName 'Nope' cannot be used (no network has that name); available: Socket" \
  "$log" || { cat "$log"; fail "NCCL_NET=Nope: no clear error"; }
echo "plugin_e2e.sh: all cases passed"
