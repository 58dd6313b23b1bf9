#include "src/switch/op_shape.h"

#include <algorithm>
#include <cstdio>

#include "nccl.h"
#include "src/reduce/reducer.h"

namespace braid {

namespace {

const char* collName(uint32_t c) {
  switch (c) {
    case wire::kAllReduce: return "allreduce";
    case wire::kAllGather: return "allgather";
    case wire::kReduceScatter: return "reducescatter";
    default: return "unknown collective";
  }
}

bool validTypeOp(uint32_t type, uint32_t op) {
  if (type >= uint32_t(ncclNumTypes)) return false;
  return op == ncclSum || op == ncclProd || op == ncclMax || op == ncclMin;
}

}  // namespace

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
                    collName(d.coll), d.dtype, d.redop);
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
                  collName(d.coll), static_cast<unsigned long long>(d.windowOffset),
                  static_cast<unsigned long long>(d.windowBytes), nranks,
                  static_cast<unsigned long long>(bpr));
    *why = buf;
    return false;
  }
  if (ts > 1 && (bpr % ts || d.windowOffset % ts || d.windowBytes % ts)) {
    std::snprintf(buf, sizeof buf, "%s: sizes are not multiples of the %zu-byte element",
                  collName(d.coll), ts);
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

std::string describeOp(const wire::OpDesc& d) {
  char buf[200];
  if (d.coll == wire::kAllReduce) {
    std::snprintf(buf, sizeof buf, "allreduce of %llu %s (%s)",
                  static_cast<unsigned long long>(d.count),
                  d.dtype < uint32_t(ncclNumTypes) ? dataTypeName(ncclDataType_t(d.dtype)) : "?",
                  d.redop < uint32_t(ncclNumOps) ? redOpName(ncclRedOp_t(d.redop)) : "?");
  } else {
    std::snprintf(buf, sizeof buf, "%s of window [%llu, +%llu) of %llu bytes per rank",
                  collName(d.coll), static_cast<unsigned long long>(d.windowOffset),
                  static_cast<unsigned long long>(d.windowBytes),
                  static_cast<unsigned long long>(d.bytesPerRank));
  }
  return buf;
}

}  // namespace braid
