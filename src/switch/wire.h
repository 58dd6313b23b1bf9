// The braid-switch wire protocol: what node heads (the BraidSwitch collnet,
// transports/collnet_switch/) and leaf switches say to a switch over TCP.
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

}  // namespace wire
}  // namespace braid
