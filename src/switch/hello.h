// Hello: the first frame on every connection to a switch (wire::kHello): who is
// joining which group, and the group's layout (which switch each rank uses). Built by
// the collnet client and by a leaf switch joining its parent; checked by the switch.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "src/switch/wire.h"

namespace braid {

struct Hello {
  wire::HelloMsg msg{};
  std::vector<uint16_t> leafOf;  ///< per rank: the index of the switch it uses

  /// The whole frame (header + payload), ready to send.
  std::string encode() const;
  /// Parses and checks a kHello payload (magic, version, ranges, a canonical layout:
  /// leaves numbered in order of their lowest rank). On failure says why.
  static bool parse(const std::string& payload, Hello* out, std::string* why);
  /// Ranks that use switch `leaf`, ascending.
  std::vector<uint32_t> ranksOfLeaf(uint32_t leaf) const;
};

/// Mixes 64-bit values into a group id (splitmix64 steps).
uint64_t mixGroupId(uint64_t a, uint64_t b);

/// A frame with a small payload as bytes (header + payload).
std::string encodeFrame(uint32_t kind, uint64_t seq, const void* payload, size_t len);

}  // namespace braid
