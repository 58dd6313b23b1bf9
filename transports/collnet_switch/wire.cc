// The braid-switch wire protocol's shared code (wire.h): encoding hellos and frames,
// group ids, and the geometry of an operation, for the client and the switch alike.
#include "transports/collnet_switch/wire.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "nccl.h"
#include "src/reduce/reducer.h"

namespace braid {

namespace {

uint64_t splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

bool validTypeOp(uint32_t type, uint32_t op) {
  if (type >= uint32_t(ncclNumTypes)) return false;
  return op == ncclSum || op == ncclProd || op == ncclMax || op == ncclMin;
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

namespace wire {

const char* collName(uint32_t c) {
  switch (c) {
    case kAllReduce: return "allreduce";
    case kAllGather: return "allgather";
    case kReduceScatter: return "reducescatter";
    default: return "unknown collective";
  }
}

}  // namespace wire

bool OpShape::validate(const wire::OpDesc& d, uint32_t nranks, std::string* why) {
  char buf[200];
  if (d.coll != wire::kAllReduce && d.coll != wire::kAllGather &&
      d.coll != wire::kReduceScatter) {
    std::snprintf(buf, sizeof buf, "unknown collective %u", d.coll);
    *why = buf;
    return false;
  }
  size_t ts = 1;
  if (d.coll != wire::kAllGather) {
    if (!validTypeOp(d.dtype, d.redop)) {
      std::snprintf(buf, sizeof buf, "%s: datatype %u / op %u not reduced by the switch",
                    wire::collName(d.coll), d.dtype, d.redop);
      *why = buf;
      return false;
    }
    ts = dataTypeSize(ncclDataType_t(d.dtype));
  }
  if (d.coll == wire::kAllReduce) {
    if (d.count > wire::kMaxOpBytes / ts) {
      std::snprintf(buf, sizeof buf, "allreduce of %llu elements is too large",
                    static_cast<unsigned long long>(d.count));
      *why = buf;
      return false;
    }
    return true;
  }
  // Window collectives: the global buffer is nranks * bytesPerRank bytes.
  const uint64_t bpr = d.bytesPerRank;
  if (nranks == 0 || bpr > wire::kMaxOpBytes || bpr * nranks > (wire::kMaxOpBytes << 8) ||
      d.windowBytes > wire::kMaxOpBytes || d.windowOffset > bpr * nranks ||
      d.windowBytes > bpr * nranks - d.windowOffset) {
    std::snprintf(buf, sizeof buf,
                  "%s: window [%llu, +%llu) does not fit %u ranks x %llu bytes (or is too large)",
                  wire::collName(d.coll), static_cast<unsigned long long>(d.windowOffset),
                  static_cast<unsigned long long>(d.windowBytes), nranks,
                  static_cast<unsigned long long>(bpr));
    *why = buf;
    return false;
  }
  if (ts > 1 && (bpr % ts || d.windowOffset % ts || d.windowBytes % ts)) {
    std::snprintf(buf, sizeof buf, "%s: sizes are not multiples of the %zu-byte element",
                  wire::collName(d.coll), ts);
    *why = buf;
    return false;
  }
  return true;
}

uint64_t OpShape::resultBytes() const {
  if (d_.coll == wire::kAllReduce) return d_.count * dataTypeSize(ncclDataType_t(d_.dtype));
  return d_.windowBytes;
}

Span OpShape::windowPart(uint32_t r) const {
  const uint64_t blockStart = uint64_t(r) * d_.bytesPerRank;
  const uint64_t begin = std::max(d_.windowOffset, blockStart);
  const uint64_t end = std::min(d_.windowOffset + d_.windowBytes, blockStart + d_.bytesPerRank);
  if (end <= begin) return Span{};
  return Span{begin - d_.windowOffset, end - begin};
}

Span OpShape::input(uint32_t r) const {
  switch (d_.coll) {
    case wire::kAllGather: {
      Span s = windowPart(r);
      if (s.len == 0) return Span{};
      // Window-relative -> relative to the rank's own block.
      s.off = s.off + d_.windowOffset - uint64_t(r) * d_.bytesPerRank;
      return s;
    }
    default:
      return Span{0, resultBytes()};
  }
}

Span OpShape::output(uint32_t r) const {
  if (d_.coll == wire::kReduceScatter) return windowPart(r);
  return Span{0, resultBytes()};
}

}  // namespace braid
