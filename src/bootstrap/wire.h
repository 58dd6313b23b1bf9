// Wire formats of the bootstrap: the ncclUniqueId layout, the rank <-> root handshake
// and the header of every rank-to-rank message. Native byte order: every process of a
// job is assumed to share one (all supported hosts are little-endian).
#pragma once
#include <cstdint>

namespace braid {
namespace wire {

constexpr int kAddrLen = 64;  ///< "ip:port" text, NUL-terminated

/// The first bytes of an ncclUniqueId (the rest is zero).
struct IdLayout {
  uint32_t magic;
  uint16_t version;
  uint8_t flags;  ///< kIdFromEnv
  uint8_t reserved;
  uint64_t secret;
  char rootAddr[kAddrLen];
};
constexpr uint32_t kIdMagic = 0x44495242u;  // "BRID"
constexpr uint16_t kIdVersion = 1;
constexpr uint8_t kIdFromEnv = 1;

/// Rank -> root: who I am and where I listen.
struct RootHello {
  uint32_t magic;
  uint32_t version;
  uint64_t secret;
  int32_t rank;
  int32_t nranks;
  char addr[kAddrLen];
};
constexpr uint32_t kHelloMagic = 0x4F4C4548u;  // "HELO"

/// Root -> rank: a status; then `msgLen` bytes of message text (status != kOk) or
/// nranks * kAddrLen bytes of listen addresses (status == kOk).
struct RootReply {
  uint32_t magic;
  int32_t status;
  uint32_t msgLen;
  uint32_t reserved;
};
constexpr uint32_t kReplyMagic = 0x4C504552u;  // "REPL"

enum RootStatus : int32_t {
  kOk = 0,
  kSecretMismatch = 1,  ///< the id belongs to another job
  kBadNranks = 2,       ///< nranks differs from the first rank's
  kDuplicateRank = 3,   ///< this rank number already joined
  kBadRank = 4,         ///< rank outside [0, nranks)
  kGaveUp = 5,          ///< the root timed out or a rank left before all joined
};

/// Header of every rank-to-rank message, followed by `bytes` of payload.
struct MsgHeader {
  uint64_t secret;
  int32_t from;
  uint32_t tag;
  uint64_t bytes;
};

constexpr uint64_t kMaxMessageBytes = uint64_t(1) << 36;  // sanity bound

}  // namespace wire
}  // namespace braid
