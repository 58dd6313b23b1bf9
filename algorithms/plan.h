// Plan: the data form of an algorithm (see docs/architecture.md).
//
// A Plan is what one rank executes for one collective: a set of Programs that run
// concurrently, each an ordered list of Steps. A Step moves or combines a Region of
// the user's buffers (named by buffer id and element offset, never by pointer) over
// a connection to a peer. Steps are streamed: the executor moves a step's bytes in
// slices as FIFO space and data allow, so chained steps on different ranks pipeline.
//
// Contract between plan builders and executors:
//  * Two programs of one plan never use the same (peer, channel, direction).
//  * Every byte a step sends is consumed, in order, by exactly one step of the peer's
//    plan on the same channel (streams are byte streams, slicing need not match).
//  * The dst of a Recv or RecvCopySend step holds final data: no later step of the
//    plan writes it (the executor may forward it from there as a zero-copy entry).
//    Buf::kScratch is the exception: the plan's own working memory, which steps may
//    write again after sending it (the executor never sends it as a zero-copy entry).
//  * A step moving data around a cycle of ranks moves at most PlanParams::chunkBytes,
//    which the executor guarantees is at most half a connection's FIFO capacity, so
//    ring algorithms cannot deadlock. The simulator checks this for every builder.
//  * Every step takes at least one FIFO slot, so a run of small steps is limited by
//    slots, not bytes: steps that alternate around a cycle must be split identically
//    on both ends (algorithms/patterns/exchange.h does that for pairwise rounds).
//
// Direct access (StepKind::kSignal .. kPeerPut) needs no connection: the ranks of one
// call read and write each other's buffers and signal each other, through an executor
// that has peer access (the flag board on the host: memcpy within a process,
// process_vm_readv/writev between processes; peer pointers on GPUs). Its contract:
//  * Signals belong to a program: program i of a rank signals to and waits for program
//    i of the others, and every rank's plan has as many programs with direct-access
//    steps (each one sequence of signals: several let an executor spread one call over
//    several threads or CUDA blocks). A program's first signal of a run also announces
//    the rank's buffers; signals count from 1 in every run. A wait by rank q for rank p
//    (or for every rank) returns once p's program has posted as many signals as q's
//    has: a signal then a wait for every rank is a barrier.
//  * A step accesses bytes of its own rank's buffers (src read, dst written) and, by
//    direct access, of its peers': kPeerCopy and kPeerReduce read the peers' src,
//    kPeerReduce and kPeerPut with a sendPeer write the peers' dst. Two accesses of the
//    same bytes by different ranks, at least one a write, are ordered: the later one's
//    program has waited for a signal the earlier one's program (the same index) posted
//    after it. Accesses of one rank's bytes by two of its programs, at least one a
//    write, never overlap (the programs are not ordered). A rank ends its run only once
//    its program has seen a signal posted after every peer's access of its bytes. (A
//    rank never waits for more than one thing, so these are the only orders there are.)
//    The simulator checks all of this for every builder.
//  * A rank's first wait is for every rank (executors compare the ranks' calls there,
//    before anything is read or written), and it posts at most kMaxSignalsAhead signals
//    after its last wait for every rank (the flag board keeps that many phases' tags).
//  * Peers' bytes are read from their send and recv buffers and written only into their
//    recv buffers (scratch is private; a peer's input is never written).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace braid {

/// Which user buffer a Region lives in.
enum class Buf : uint8_t {
  kSend = 0,
  kRecv = 1,
  kNone = 2,
  kScratch = 3,  ///< executor-owned working memory of Plan::scratchElems elements
};

/// Elements [offset, offset+count) of one buffer, in units of the op's datatype.
struct Region {
  Buf buf = Buf::kNone;
  uint64_t offset = 0;
  uint64_t count = 0;
};

/// The primitive vocabulary (as NCCL's device primitives).
enum class StepKind : uint8_t {
  kSend,                // send(src) -> sendPeer
  kRecv,                // dst <- recv(recvPeer)
  kRecvReduceSend,      // send(recv(recvPeer) op src) -> sendPeer
  kRecvReduceCopy,      // dst <- recv(recvPeer) op src
  kRecvReduceCopySend,  // dst <- recv(recvPeer) op src; send(dst) -> sendPeer
  kRecvCopySend,        // dst <- recv(recvPeer); send(same) -> sendPeer
  kCopy,                // dst <- src (local)
  // Direct access (see the contract above; no channel, no connection):
  kSignal,              // post this rank's next signal (the first announces its buffers)
  kWait,                // until recvPeer (kAllPeers: every rank) posted as many signals
  kPeerCopy,            // dst <- src of recvPeer's buffers
  kPeerReduce,          // dst <- src of every rank, reduced in rank order (own src locally);
                        // sendPeer kAllPeers: dst at every rank, this one's included
  kPeerPut,             // dst at sendPeer (kAllPeers: every rank, this one's included,
                        // except where that dst is the src itself) <- own src
};

/// The step reads the others' buffers or signals them, instead of using a connection.
inline bool isDirectAccess(StepKind k) { return k >= StepKind::kSignal; }
/// The step sends over / receives from a connection.
inline bool stepSends(StepKind k) {
  return k == StepKind::kSend || k == StepKind::kRecvReduceSend ||
         k == StepKind::kRecvReduceCopySend || k == StepKind::kRecvCopySend;
}
inline bool stepRecvs(StepKind k) {
  return k == StepKind::kRecv || k == StepKind::kRecvReduceSend ||
         k == StepKind::kRecvReduceCopy || k == StepKind::kRecvReduceCopySend ||
         k == StepKind::kRecvCopySend;
}
/// recvPeer of a kWait step that waits for every rank; sendPeer of a kPeerReduce or
/// kPeerPut step that writes every rank's dst.
constexpr int32_t kAllPeers = -3;
/// Whether a direct-access step writes dst at rank `p` (the step runs on rank `self`).
inline bool directWritesAt(StepKind k, int32_t sendPeer, int self, int p) {
  if (k == StepKind::kPeerPut) return sendPeer == kAllPeers || sendPeer == p;
  if (k == StepKind::kPeerReduce && sendPeer == kAllPeers) return true;
  return p == self && (k == StepKind::kPeerCopy || k == StepKind::kPeerReduce);
}
/// Signals a rank may post after its last wait for every rank (see the contract above).
constexpr int kMaxSignalsAhead = 7;

const char* stepKindName(StepKind k);

/// The aggregation switch (in-network reduction, CollNet) as the peer of a step: a
/// rank sends its data to the switch and receives the switch's result back over the
/// connection (kSwitchPeer, channel). Every step that sends to the switch is one
/// message; ranks with the same local index on every node (RankLayout::localRank) form
/// one switch group (members ordered by node) and send the same sequence of messages.
/// What comes back is Plan::switchOp applied over the group, in message order:
///   kAllReduce      the same bytes as sent, reduced over the group (the op's pre-step
///                   is the sender's: kPreOp on the step that puts own data in; Avg's
///                   division is applied by the connection: results are final);
///   kAllGather      group-size times the bytes sent: every member's message in order;
///   kReduceScatter  the sent bytes divided by group size: the member's part, reduced.
constexpr int32_t kSwitchPeer = -2;
/// Channels a plan may talk to the switch on (a collComm per channel and local rank).
constexpr int kMaxSwitchChannels = 4;
enum class SwitchOp : uint8_t { kNone = 0, kAllReduce, kAllGather, kReduceScatter };
const char* switchOpName(SwitchOp op);

/// Step flags.
enum StepFlags : uint8_t {
  kPreOp = 1,   ///< src is this rank's own contribution: apply the op's pre-scaling
                ///< (PreMulSum scalar) to it. Must be set exactly once per element
                ///< per rank in a reduction.
  kPostOp = 2,  ///< the value produced is final: apply the op's post-step (Avg: /n).
};

struct Step {
  StepKind kind = StepKind::kCopy;
  uint8_t flags = 0;
  uint16_t channel = 0;  ///< connection set index (0 .. PlanParams::nChannels-1)
  int32_t sendPeer = -1;
  int32_t recvPeer = -1;
  Region src;  ///< local operand (kSend, kRecvReduce*, kCopy)
  Region dst;  ///< local result (kRecv, kRecvReduceCopy*, kRecvCopySend, kCopy)

  /// Elements this step moves (all regions of a step have the same count; 0 for
  /// kSignal and kWait).
  uint64_t count() const { return dst.buf != Buf::kNone ? dst.count : src.count; }
};

/// An ordered list of steps; the programs of a plan run concurrently.
struct Program {
  std::vector<Step> steps;
};

struct Plan {
  std::vector<Program> programs;
  std::string algorithm;  ///< builder name, for logs
  uint64_t outputElems = 0;  ///< elements the steps write to dst regions (set by the tuner)
  uint64_t scratchElems = 0; ///< size of Buf::kScratch (set by the builder; 0: none)
  /// Largest piece the executor moves through a FIFO slot at once (the protocol, set by
  /// the tuner); 0: a whole slot. Every step around a cycle must then fit in half of
  /// nslots * sliceBytes (the tuner chooses PlanParams::chunkBytes so).
  uint64_t sliceBytes = 0;
  double predictedUs = 0;    ///< the cost model's prediction (set by the tuner; 0: none)
  /// What the switch does with this plan's messages (kSwitchPeer steps); kNone: none.
  SwitchOp switchOp = SwitchOp::kNone;
  size_t stepCount() const;
  /// Human-readable dump (one line per step), for NCCL_DEBUG_SUBSYS=PLAN and tests.
  std::string toString() const;
};

/// The collectives a plan can implement.
enum class Coll : uint8_t {
  kAllReduce,
  kBroadcast,
  kReduce,
  kAllGather,
  kReduceScatter,
  kAllToAll,
  kGather,
  kScatter,
  kSendRecv,  ///< grouped point-to-point (see P2pOp)
  kCount
};
const char* collName(Coll c);

/// One point-to-point operation of a group, as seen by one rank.
struct P2pOp {
  bool isSend = false;
  int peer = -1;
  Buf buf = Buf::kSend;  ///< which op buffer slot holds its data (see PlanArgs)
  uint64_t offset = 0;   ///< element offset within that buffer
  uint64_t count = 0;
};

/// Where the ranks are, for topology-aware builders (computed once per communicator
/// from the host identities and the topology, identical on every rank).
struct RankLayout {
  int nNodes = 1;
  std::vector<int> nodeOf;                 ///< rank -> node (numbered by first rank)
  std::vector<int> localRank;              ///< rank -> index within its node's list
  std::vector<std::vector<int>> nodeRanks; ///< node -> its ranks, in intra-node ring order
  std::vector<int> ring;                   ///< ring position -> rank (node after node)
  /// All ranks on one node, ring 0..n-1.
  static RankLayout flat(int nranks);
  /// From rank -> node ids (any values; nodes are renumbered by first rank); each
  /// node's ranks keep ascending order unless `intraOrder` (rank -> sort key) is given.
  static RankLayout fromNodes(const std::vector<int>& nodeIds,
                              const std::vector<int>& intraOrder = {});
  /// Every node has the same number of ranks (what the hierarchical builders need).
  bool uniform() const;
  int ranksPerNode() const { return nodeRanks.empty() ? 0 : int(nodeRanks[0].size()); }
  /// Position of `rank` in `ring`.
  int ringPosition(int rank) const;
  /// "2 nodes x 2 ranks" / "3 nodes (2,2,1 ranks)" for logs.
  std::string describe() const;
};

/// Everything a builder may look at. Pure data: no pointers to user memory.
struct PlanArgs {
  Coll coll = Coll::kAllReduce;
  int nranks = 1;
  int rank = 0;
  uint64_t count = 0;     ///< elements, with NCCL's meaning for the collective:
                          ///< AllGather/Gather: per-rank send count;
                          ///< ReduceScatter/Scatter: per-rank recv count;
                          ///< AllToAll: per-peer count.
  size_t typeSize = 4;    ///< bytes per element
  int root = 0;
  bool inPlace = false;   ///< sendbuff and recvbuff are the same (with NCCL's offset rule)
  std::vector<P2pOp> p2p; ///< kSendRecv only
  /// Where the ranks are; nullptr means RankLayout::flat(nranks). Builders read it
  /// through layoutOf(args).
  std::shared_ptr<const RankLayout> layout;
  /// An aggregation switch serves this communicator (kSwitchPeer steps are possible:
  /// one switch group per local index, members ordered by node). CollNet builders
  /// decline without it.
  bool collnet = false;
  /// The executor gives every rank direct access to the others' buffers (direct-access
  /// steps are possible). Builders that need it decline without it.
  bool peerAccess = false;
};

/// args.layout, or a flat layout of args.nranks ranks.
const RankLayout& layoutOf(const PlanArgs& args);

/// Executor-chosen parameters the builder must honour.
struct PlanParams {
  uint64_t chunkBytes = 1 << 20;  ///< max bytes per step around a cycle
  int nChannels = 1;
};

}  // namespace braid
