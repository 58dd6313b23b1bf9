// The braid-switch wire protocol: what node heads (the BraidSwitch collnet,
// transports/collnet_switch/, in the library) and leaf switches say to a switch over
// TCP, and the geometry of an operation both ends compute from it. The one header the
// client and the braid-switch daemon (src/tools/switch_server/, outside the library)
// share; the checks only a switch makes are the daemon's (protocol_check.h there).
//
// Every message in both directions is a frame: a 16-byte FrameHeader {kind, len, seq}
// followed by `len` payload bytes. Plain structs, host byte order (little-endian
// machines only: checked below), no padding anywhere.
//
//   client -> switch                       switch -> client
//   kHello  HelloMsg + uint16 leafOf[n]    kWelcome (len 0): the whole group is there
//   kOp     OpDesc (seq: op number 0,1..)  kRefuse  reason text; the switch then closes
//   kData   input bytes of op `seq`        kData    output bytes of op `seq`, in order
//   kBye    clean close (len 0)            kDone    op `seq` is complete (ops in order)
//   kFail   reason text (leaf -> parent)   kFail    the group failed: reason text
//
// A leaf switch talks to its parent exactly as a client does (kHello with kFromLeaf,
// rank = its leaf index), standing for all the ranks of the group that use it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace braid {
namespace wire {

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the braid-switch protocol is defined for little-endian hosts"
#endif

constexpr uint64_t kMagic = 0x4843545753445242ull;  // "BRDSWTCH" in memory
constexpr uint32_t kVersion = 1;

enum Kind : uint32_t {
  kHello = 1,
  kWelcome = 2,
  kRefuse = 3,
  kOp = 4,
  kData = 5,
  kDone = 6,
  kBye = 7,
  kFail = 8,
};

struct FrameHeader {
  uint32_t kind;
  uint32_t len;  ///< payload bytes after this header
  uint64_t seq;  ///< op number for kOp/kData/kDone, 0 otherwise
};
static_assert(sizeof(FrameHeader) == 16, "FrameHeader must be 16 bytes");

enum HelloFlags : uint32_t {
  kFromLeaf = 1,  ///< sent by a leaf switch to its parent; rank is the leaf index
};

/// Payload of kHello; followed by `nranks` uint16 values: the leaf (switch) index of
/// each rank, leaves numbered in order of their lowest rank.
struct HelloMsg {
  uint64_t magic;
  uint32_t version;
  uint32_t flags;
  uint64_t groupId;
  uint64_t secret;   ///< the job secret; every member of a group shows the same
  uint32_t nranks;   ///< ranks in the whole group
  uint32_t rank;     ///< the sender's rank, or its leaf index with kFromLeaf
  uint32_t nleaves;  ///< switches the group's members use (1: no tree)
  uint32_t reserved;
};
static_assert(sizeof(HelloMsg) == 48, "HelloMsg layout");

enum Coll : uint32_t { kAllReduce = 1, kAllGather = 2, kReduceScatter = 3 };

/// Payload of kOp: one collective, the same on every member.
///   allreduce:     count elements of dtype; every member sends and gets count*size bytes
///   allgather:     the result is the members' blocks (bytesPerRank each) in rank order;
///                  the op moves window [windowOffset, +windowBytes) of it
///   reducescatter: each member's input is nranks*bytesPerRank bytes, of which it sends
///                  the window; each gets the reduced part of its own block in the window
struct OpDesc {
  uint32_t coll;
  uint32_t dtype;  ///< ncclDataType_t (reductions)
  uint32_t redop;  ///< ncclSum / ncclProd / ncclMax / ncclMin (reductions)
  uint32_t reserved;
  uint64_t count;
  uint64_t bytesPerRank;
  uint64_t windowOffset;
  uint64_t windowBytes;
};
static_assert(sizeof(OpDesc) == 48, "OpDesc layout");

/// Limits a switch enforces on what it is sent (larger: refused / the group fails).
constexpr uint32_t kMaxRanks = 65536;
constexpr uint32_t kMaxControlBytes = 1u << 20;   ///< hello, reasons
constexpr uint64_t kMaxOpBytes = uint64_t(1) << 32;  ///< one op's result or input
constexpr size_t kMaxReasonBytes = 1024;

/// "allreduce", "allgather", "reducescatter" ("unknown collective" otherwise).
const char* collName(uint32_t coll);

}  // namespace wire

// ---- the hello: the first frame on every connection to a switch (wire::kHello) --------

/// Who is joining which group, and the group's layout (which switch each rank uses).
/// Built by the collnet client and by a leaf switch joining its parent.
struct Hello {
  wire::HelloMsg msg{};
  std::vector<uint16_t> leafOf;  ///< per rank: the index of the switch it uses

  /// The whole frame (header + payload), ready to send.
  std::string encode() const;
};

/// Mixes 64-bit values into a group id (splitmix64 steps).
uint64_t mixGroupId(uint64_t a, uint64_t b);

/// A frame with a small payload as bytes (header + payload).
std::string encodeFrame(uint32_t kind, uint64_t seq, const void* payload, size_t len);

// ---- OpShape: the bytes of one operation (wire::OpDesc) --------------------------------
// Which bytes each rank sends and receives: the geometry the client (what to send,
// where results land) and the switch (how long each stream is, where each rank's result
// lies) must agree on. "The result" of an op is: allreduce: count elements; allgather
// and reducescatter: the window (windowBytes bytes) of the global buffer of
// nranks * bytesPerRank bytes.

struct Span {
  uint64_t off = 0;
  uint64_t len = 0;
};

class OpShape {
 public:
  /// Checks `d` for a group of nranks (known collective and, for reductions, a
  /// datatype/op pair the switch reduces; sizes in range and aligned to elements).
  /// On failure returns false and says why.
  static bool validate(const wire::OpDesc& d, uint32_t nranks, std::string* why);

  OpShape(const wire::OpDesc& d, uint32_t nranks) : d_(d), nranks_(nranks) {}

  bool reduces() const { return d_.coll != wire::kAllGather; }
  uint64_t resultBytes() const;
  /// The part of rank r's block inside the window, relative to the window's start
  /// (empty where they do not meet). Allgather and reducescatter only.
  Span windowPart(uint32_t r) const;
  /// The bytes rank r sends: allreduce: [0, n) of its buffer; allgather: the window
  /// part of its own block, relative to that block; reducescatter: the whole window.
  Span input(uint32_t r) const;
  /// Where rank r's output lies in the result: allreduce and allgather: all of it;
  /// reducescatter: the window part of its block.
  Span output(uint32_t r) const;
  const wire::OpDesc& desc() const { return d_; }

 private:
  wire::OpDesc d_;
  uint32_t nranks_;
};

}  // namespace braid
