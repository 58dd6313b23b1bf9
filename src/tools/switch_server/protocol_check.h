// What a switch checks and names of what its members send: a hello's payload parsed
// and checked, the ranks that use one leaf switch, an operation in words for messages.
// The client in the library only builds hellos and operations
// (transports/collnet_switch/wire.h); checking them is the daemon's job.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "transports/collnet_switch/wire.h"

namespace braid {

/// Parses and checks a kHello payload (magic, version, ranges, a canonical layout:
/// leaves numbered in order of their lowest rank). On failure says why.
bool parseHello(const std::string& payload, Hello* out, std::string* why);

/// Ranks of `h`'s group that use switch `leaf`, ascending.
std::vector<uint32_t> ranksOfLeaf(const Hello& h, uint32_t leaf);

/// Human-readable "allreduce of 1000 float32 (sum)" for messages.
std::string describeOp(const wire::OpDesc& d);

}  // namespace braid
