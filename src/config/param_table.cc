// The definitions of every environment variable (see params.h). Keep sorted by topic;
// docs/environment.md lists the same table.
#include "src/config/params.h"

namespace braid {
namespace param {

const StringParam kDebug("NCCL_DEBUG", "",
    "Log level: VERSION, WARN, INFO or TRACE (empty: silent).");
const StringParam kDebugSubsys("NCCL_DEBUG_SUBSYS", "INIT,ENV",
    "Comma list of subsystems logged at INFO: INIT, COLL, P2P, SHM, NET, GRAPH, TUNING, "
    "ENV, ALLOC, CALL, PROXY, BOOTSTRAP, REG, PLAN, EXEC or ALL; a leading ^ excludes.");
const StringParam kDebugFile("NCCL_DEBUG_FILE", "",
    "Write the log to this file instead of stdout; %h expands to the host name, %p to the pid.");

const StringParam kAlgo("NCCL_ALGO", "",
    "Algorithms allowed, e.g. 'Ring' or '^Ring' or 'allreduce:ring;broadcast:chain' "
    "(case-insensitive). Empty: the tuner chooses.");
const StringParam kProto("NCCL_PROTO", "",
    "Protocols allowed: Simple (whole FIFO slots), LL128 (64 KiB pieces), LL (8 KiB "
    "pieces); same syntax as NCCL_ALGO. Empty: the tuner chooses.");
const StringParam kTunerModel("BRAID_TUNER_MODEL", "",
    "File of cost-model parameters (key=value lines: intra_alpha_us, intra_gbps, "
    "inter_alpha_us, inter_gbps, nic_gbps, reduce_gbps, step_us), e.g. written by "
    "perf/calibrate.py from perf-suite results. Empty: defaults from the topology. Rank "
    "0's model applies to the whole communicator.");
const StringParam kTopoFile("NCCL_TOPO_FILE", "",
    "Load the node topology from this XML file instead of detecting it with hwloc.");
const StringParam kTopoDumpFile("NCCL_TOPO_DUMP_FILE", "",
    "Write the node topology (detected or loaded) to this XML file at the first "
    "communicator's init.");
const IntParam kMinNChannels("NCCL_MIN_NCHANNELS", 1,
    "Minimum number of channels (independent connection sets) per collective.");
const IntParam kMaxNChannels("NCCL_MAX_NCHANNELS", 2,
    "Maximum number of channels per collective. The tuner goes above NCCL_MIN_NCHANNELS "
    "only where an algorithm gains from it (the double binary tree: one per tree).");

const IntParam kDeviceNChannels("BRAID_DEVICE_NCHANNELS", 16,
    "Maximum channels (CUDA blocks, each with its own connections) per collective on "
    "device buffers; large messages use one per 128 KiB up to this (1..32). Must be the "
    "same on every rank.");

const BoolParam kDeviceDirect("BRAID_DEVICE_DIRECT", true,
    "Collectives on device buffers between ranks that are threads of one process on one "
    "GPU read and write each other's buffers directly (the direct-access plans: one pass "
    "over the data, no FIFO staging) instead of streaming through FIFOs. Rank 0's value "
    "applies.");

const IntParam kSmallMsgBytes("BRAID_SMALL_MSG_BYTES", 32768,
    "Messages up to this many bytes (the larger of the send and receive buffers) use the "
    "direct one-shot algorithms; 0 disables them. Rank 0's value applies to the whole "
    "communicator.");

const BoolParam kBoard("BRAID_BOARD", true,
    "Collectives of communicators whose ranks all run on one host use a shared flag "
    "board for small and medium messages (one phase through inline areas, or single "
    "copy between the ranks' buffers) instead of plans through the FIFOs, and every "
    "collective's call is compared there before data moves (BRAID_CHECK). Rank 0's value "
    "applies. Where NCCL_ALGO, NCCL_PROTO or BRAID_TRANSPORT is set, the board moves no "
    "data but still compares the calls; 0: no board at all.");
const IntParam kBoardInlineBytes("BRAID_BOARD_INLINE_BYTES", 4096,
    "Largest part per rank (bytes) exchanged through the flag board's inline areas in "
    "one phase. Rank 0's value applies.");
const IntParam kBoardCopyMaxBytes("BRAID_BOARD_COPY_MAX_BYTES", 4 << 20,
    "Largest message (bytes of the larger buffer) moved by single copy over the flag "
    "board (memcpy between threads, process_vm_readv between processes); 0 turns single "
    "copy off. Rank 0's value applies.");
const IntParam kBoardCmaMaxBytes("BRAID_BOARD_CMA_MAX_BYTES", 1 << 20,
    "As BRAID_BOARD_COPY_MAX_BYTES where ranks are processes (process_vm_readv): the "
    "lower of the two applies; reduce to a root never takes single copy between "
    "processes (the FIFO plans measured faster). Rank 0's value applies.");

const BoolParam kShmDisable("NCCL_SHM_DISABLE", false,
    "Disable the shared-memory transport: ranks on one host use sockets.");
const BoolParam kP2pDisable("NCCL_P2P_DISABLE", false,
    "Disable peer-to-peer (same-process and CUDA IPC) transports: use shm instead.");
const StringParam kSocketIfname("NCCL_SOCKET_IFNAME", "",
    "Network interfaces for bootstrap and socket traffic: prefix list, '^' excludes, "
    "'=' exact match (e.g. 'eth0', '^docker,lo', '=veth0'). Empty: any non-loopback "
    "interface, else loopback.");
const StringParam kCommId("NCCL_COMM_ID", "",
    "ip:port of the bootstrap root: every process derives the same unique id from it "
    "and rank 0 listens there.");
const StringParam kHostId("NCCL_HOSTID", "",
    "Override the host identity (default: hostname and boot id). Ranks with different "
    "host ids never use shared memory.");
const IntParam kBuffSize("NCCL_BUFFSIZE", 4 << 20,
    "Bytes of FIFO per connection (per channel and direction).");
const StringParam kTransport("BRAID_TRANSPORT", "auto",
    "Force one transport for every peer: local, shm, net, or auto. 'socket' is net with "
    "the Socket network unless NCCL_NET names another.");
const StringParam kNet("NCCL_NET", "",
    "Network for traffic between hosts, by name (case-insensitive): IB, Socket, UCX, or an "
    "external plugin's name. Empty: the external plugin if one loads, else IB where a "
    "device has an active port, else Socket. A name no network answers to fails init.");
const StringParam kNetPlugin("NCCL_NET_PLUGIN", "",
    "External network plugins to try, comma-separated: a name x (libnccl-net-x.so), a "
    "library name or a path. 'none': no external plugin. Empty: libnccl-net.so if it "
    "can be loaded. Tables ncclNetPlugin_v11 down to v8 are looked up.");
const BoolParam kIbDisable("NCCL_IB_DISABLE", false,
    "Do not use the IB verbs network (RDMA: InfiniBand, RoCE).");
const StringParam kIbHca("NCCL_IB_HCA", "",
    "RDMA devices to use: prefix list of device[:port], '^' excludes, '=' exact names "
    "(e.g. 'mlx5_0:1,mlx5_1', '^mlx5_3', '=rxe0'). Empty: every device with an active "
    "port.");
const IntParam kIbGidIndex("NCCL_IB_GID_INDEX", -1,
    "RoCE GID index; -1 picks one automatically (RoCE v2 over IPv4 first, then IPv6, "
    "then v1).");
const IntParam kIbRoceVersion("NCCL_IB_ROCE_VERSION_NUM", 2,
    "RoCE version the automatic GID choice prefers (1 or 2).");
const IntParam kIbTimeout("NCCL_IB_TIMEOUT", 20,
    "IB verbs QP timeout exponent (4.096 us x 2^value per retry).");
const IntParam kIbRetryCnt("NCCL_IB_RETRY_CNT", 7,
    "IB verbs QP retry count.");
const IntParam kIbQpsPerConn("NCCL_IB_QPS_PER_CONNECTION", 1,
    "Queue pairs per IB connection; messages are split across them (1..16).");
const IntParam kIbTc("NCCL_IB_TC", 0,
    "IB traffic class (RoCE: DSCP << 2).");
const IntParam kIbSl("NCCL_IB_SL", 0,
    "IB service level.");
const BoolParam kIbRegCache("BRAID_IB_REG_CACHE", true,
    "Cache IB memory registrations by address range (a buffer registered again reuses "
    "its region).");
const StringParam kUcxTls("BRAID_UCX_TLS", "",
    "UCX transports for the UCX network (sets UCX_TLS for Braid's UCP context when "
    "UCX_TLS itself is unset). Empty: UCX's own choice.");
const IntParam kNetMaxInflight("BRAID_NET_INFLIGHT", 4,
    "Network requests the proxy keeps posted per connection and direction (1..32; at "
    "most the FIFO's slot count).");
const IntParam kFifoSlots("BRAID_FIFO_SLOTS", 8,
    "Slots per connection FIFO (NCCL_BUFFSIZE is split among them).");
const BoolParam kShmCma("BRAID_SHM_CMA", false,
    "Let processes on one host read large pieces straight from each other's buffers "
    "(process_vm_readv: one copy instead of two through the FIFO), where a test read at "
    "connection time succeeds (ptrace permission). Off by default: with streaming stores "
    "into the FIFO it measured slower here (docs/performance.md).");
const IntParam kCmaMinBytes("BRAID_CMA_MIN_BYTES", 65536,
    "Smallest piece sent as a single-copy (process_vm_readv) entry; smaller ones are "
    "copied through the FIFO.");
const BoolParam kStreamStores("BRAID_STREAM_STORES", true,
    "Write data for another rank into FIFO slots with non-temporal stores, so its core "
    "reads it from memory instead of pulling dirty lines out of ours: up to 5x faster "
    "where cores share no cache, slower at medium sizes where they do (docs/performance.md;"
    " measure with perf's handoff probe). 0: plain stores.");
const IntParam kStreamOutputBytes("BRAID_STREAM_OUTPUT_BYTES", 0,
    "A collective writing at least this many bytes of results stores them with "
    "non-temporal stores (they would not stay in cache anyway); 0 (default: no gain "
    "measured here) never does.");
const StringParam kSwitch("BRAID_SWITCH", "",
    "HOST:PORT of the braid-switch (software aggregation switch) this process's node "
    "heads use for in-network reductions (the BraidSwitch collnet). Empty: that collnet "
    "has no device.");
const IntParam kSwitchTimeoutMs("BRAID_SWITCH_TIMEOUT_MS", 60000,
    "How long a BraidSwitch collnet connect waits for the switch to report the whole "
    "group present (or to refuse it).");
const BoolParam kCollNetEnable("NCCL_COLLNET_ENABLE", false,
    "Use in-network reduction (CollNet): an external plugin's ncclCollNetPlugin_v11 from "
    "the net plugin's library, else braid-switch (BRAID_SWITCH). Setup failures fall back "
    "to point-to-point algorithms with a warning.");
const IntParam kCollNetNodeThreshold("NCCL_COLLNET_NODE_THRESHOLD", 2,
    "Fewest nodes for which a communicator sets up CollNet.");
const IntParam kCollNetInflight("BRAID_COLLNET_INFLIGHT", 4,
    "Switch messages (collnet collectives) each rank keeps posted at once per channel "
    "(2 to 8).");

const IntParam kTimeoutMs("BRAID_TIMEOUT_MS", 300000,
    "A collective waiting this long without progress fails with ncclSystemError naming "
    "the rank it waits on (0: never).");
const IntParam kBootstrapTimeoutMs("BRAID_BOOTSTRAP_TIMEOUT_MS", 120000,
    "Time limit for bootstrap and connection setup steps.");
const IntParam kPeerCheckMs("BRAID_PEER_CHECK_MS", 200,
    "After this long without progress, check whether the peers waited on are alive.");
const IntParam kFlightRecorder("BRAID_FLIGHT_RECORDER", 256,
    "Operations each communicator keeps in its flight recorder (the last N issued, with "
    "state, algorithm, times and the rank a stalled one waits on); 0 turns it off.");
const StringParam kFlightRecorderDir("BRAID_FLIGHT_RECORDER_DIR", "",
    "Directory of the flight-record JSON files (one per communicator and rank) written on "
    "a timeout, a dead peer, a fatal error, a mismatch, ncclCommAbort with work "
    "outstanding, SIGUSR1 or braidCommDumpFlightRecord; braid-doctor reads them. Unset: "
    "/tmp/braid-flight-recorder-<uid>, the user's own (mode 0700; refused if another user "
    "owns it).");
const BoolParam kFlightRecorderSignal("BRAID_FLIGHT_RECORDER_SIGNAL", true,
    "Dump every communicator's flight record on SIGUSR1 (braid-info --dump PID), unless "
    "the program handles SIGUSR1 itself.");
const StringParam kCheck("BRAID_CHECK", "",
    "Collective mismatch detection. Unset: the free check: every call's tag (call, count, "
    "type, op, root, collective number) travels with its data (FIFO slots, flag board "
    "phases) and is compared before the data is used; a mismatch fails the call with "
    "ncclInvalidUsage naming both calls. 1: also, before each group's collectives run, "
    "the ranks all-gather and compare their fingerprints (catches mismatches that move "
    "no data; one small all-gather per group). 0: neither. Rank 0's value applies to the "
    "communicator.");
const IntParam kSpinUs("BRAID_SPIN_US", 1000,
    "Microseconds a waiting rank busy-polls before it gives up the CPU (it yields, then "
    "naps or sleeps: see BRAID_SLEEP). Unset: this default when "
    "the host's ranks fit on its CPUs, 0 (give the CPU up at once) when they outnumber "
    "them.");
const IntParam kSleep("BRAID_SLEEP", 1,
    "Whether a waiting rank sleeps in the kernel (futex) until a rank of its host "
    "publishes what it waits for. 1: where the host's ranks outnumber its cores (no "
    "spin), after 1000 yields and 16 naps of 20 us; where they fit, it naps on (a futex "
    "wake tends to queue the woken rank behind its spinning waker). 2: always, right "
    "after the spin. 0: never (yield, then nap 20 us at a time). Sleeping needs a flag "
    "board and local or shm connections; ranks waiting on a network or CollNet nap.");

const StringParam kSimd("BRAID_SIMD", "auto",
    "Instruction set of the host reduction kernels: auto (the best this CPU has), avx512, "
    "avx2 or portable. A level the CPU lacks warns and uses the best available.");

}  // namespace param
}  // namespace braid
