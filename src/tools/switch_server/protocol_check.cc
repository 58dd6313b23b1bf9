// What a switch checks and names of what its members send (protocol_check.h).
#include "src/tools/switch_server/protocol_check.h"

#include <cstdio>
#include <cstring>

#include "nccl.h"
#include "src/reduce/reducer.h"

namespace braid {

bool parseHello(const std::string& payload, Hello* out, std::string* why) {
  char buf[200];
  if (payload.size() < sizeof(wire::HelloMsg)) {
    std::snprintf(buf, sizeof buf, "short hello (%zu bytes)", payload.size());
    *why = buf;
    return false;
  }
  wire::HelloMsg m;
  std::memcpy(&m, payload.data(), sizeof m);
  if (m.magic != wire::kMagic) {
    *why = "not a braid-switch hello (wrong magic)";
    return false;
  }
  if (m.version != wire::kVersion) {
    std::snprintf(buf, sizeof buf, "protocol version %u, this switch speaks %u", m.version,
                  wire::kVersion);
    *why = buf;
    return false;
  }
  if (m.nranks == 0 || m.nranks > wire::kMaxRanks || m.nleaves == 0 || m.nleaves > m.nranks ||
      (m.flags & ~uint32_t(wire::kFromLeaf)) != 0) {
    std::snprintf(buf, sizeof buf, "bad hello: %u ranks, %u switches, flags 0x%x", m.nranks,
                  m.nleaves, m.flags);
    *why = buf;
    return false;
  }
  const bool fromLeaf = (m.flags & wire::kFromLeaf) != 0;
  if (m.rank >= (fromLeaf ? m.nleaves : m.nranks)) {
    std::snprintf(buf, sizeof buf, "bad hello: %s %u of %u", fromLeaf ? "leaf" : "rank",
                  m.rank, fromLeaf ? m.nleaves : m.nranks);
    *why = buf;
    return false;
  }
  if (payload.size() != sizeof m + size_t(m.nranks) * sizeof(uint16_t)) {
    std::snprintf(buf, sizeof buf, "bad hello: %zu bytes for %u ranks", payload.size(),
                  m.nranks);
    *why = buf;
    return false;
  }
  Hello h;
  h.msg = m;
  h.leafOf.resize(m.nranks);
  std::memcpy(h.leafOf.data(), payload.data() + sizeof m, size_t(m.nranks) * sizeof(uint16_t));
  // Canonical: each rank's leaf is one already seen or the next new one.
  uint32_t seen = 0;
  for (uint32_t r = 0; r < m.nranks; ++r) {
    if (h.leafOf[r] > seen || (h.leafOf[r] == seen && seen == m.nleaves)) {
      *why = "bad hello: the switch layout is not numbered in rank order";
      return false;
    }
    if (h.leafOf[r] == seen) ++seen;
  }
  if (seen != m.nleaves) {
    std::snprintf(buf, sizeof buf, "bad hello: layout names %u switches, hello says %u", seen,
                  m.nleaves);
    *why = buf;
    return false;
  }
  *out = std::move(h);
  return true;
}

std::vector<uint32_t> ranksOfLeaf(const Hello& h, uint32_t leaf) {
  std::vector<uint32_t> v;
  for (uint32_t r = 0; r < h.leafOf.size(); ++r)
    if (h.leafOf[r] == leaf) v.push_back(r);
  return v;
}

std::string describeOp(const wire::OpDesc& d) {
  char buf[200];
  if (d.coll == wire::kAllReduce) {
    std::snprintf(buf, sizeof buf, "allreduce of %llu %s (%s)",
                  static_cast<unsigned long long>(d.count),
                  d.dtype < uint32_t(ncclNumTypes) ? dataTypeName(ncclDataType_t(d.dtype)) : "?",
                  d.redop < uint32_t(ncclNumOps) ? redOpName(ncclRedOp_t(d.redop)) : "?");
  } else {
    std::snprintf(buf, sizeof buf, "%s of window [%llu, +%llu) of %llu bytes per rank",
                  wire::collName(d.coll), static_cast<unsigned long long>(d.windowOffset),
                  static_cast<unsigned long long>(d.windowBytes),
                  static_cast<unsigned long long>(d.bytesPerRank));
  }
  return buf;
}

}  // namespace braid
