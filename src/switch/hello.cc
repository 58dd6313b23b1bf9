#include "src/switch/hello.h"

#include <cstdio>
#include <cstring>

namespace braid {

namespace {

uint64_t splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

uint64_t mixGroupId(uint64_t a, uint64_t b) { return splitmix(splitmix(a) ^ b); }

std::string encodeFrame(uint32_t kind, uint64_t seq, const void* payload, size_t len) {
  wire::FrameHeader h{kind, uint32_t(len), seq};
  std::string s(sizeof h + len, '\0');
  std::memcpy(&s[0], &h, sizeof h);
  if (len) std::memcpy(&s[sizeof h], payload, len);
  return s;
}

std::string Hello::encode() const {
  std::string payload(sizeof msg + leafOf.size() * sizeof(uint16_t), '\0');
  std::memcpy(&payload[0], &msg, sizeof msg);
  if (!leafOf.empty())
    std::memcpy(&payload[sizeof msg], leafOf.data(), leafOf.size() * sizeof(uint16_t));
  return encodeFrame(wire::kHello, 0, payload.data(), payload.size());
}

bool Hello::parse(const std::string& payload, Hello* out, std::string* why) {
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

std::vector<uint32_t> Hello::ranksOfLeaf(uint32_t leaf) const {
  std::vector<uint32_t> v;
  for (uint32_t r = 0; r < leafOf.size(); ++r)
    if (leafOf[r] == leaf) v.push_back(r);
  return v;
}

}  // namespace braid
