// CallTag encoding (see call_tag.h). desc's bits, low to high:
//   0-23   the collective number, low 24 bits (0xffffff: none: an internal exchange)
//   24-28  Coll
//   29-34  ncclDataType_t (0 for send/receive: their bytes are compared)
//   35-42  the reduction op (CollFingerprint::Call::op: kPreMulSum for a user op)
//   43-61  the root, low 19 bits
//   62     0 (spare)
//   63     1: tagged
#include "src/exec/call_tag.h"

#include <cstdio>
#include <vector>

#include "src/exec/op.h"
#include "src/diag/fingerprint.h"
#include "src/reduce/reducer.h"

namespace braid {
namespace {

constexpr uint64_t kSeqMask = (uint64_t(1) << 24) - 1;
constexpr uint64_t kRootMask = (uint64_t(1) << 19) - 1;
constexpr uint64_t kTagged = uint64_t(1) << 63;

CollFingerprint::Call toCall(const CallTag& t) {
  CollFingerprint::Call c;
  c.coll = uint8_t((t.desc >> 24) & 0x1f);
  c.type = uint8_t((t.desc >> 29) & 0x3f);
  c.op = uint8_t((t.desc >> 35) & 0xff);
  c.root = int32_t((t.desc >> 43) & kRootMask);
  c.count = t.count;
  return c;
}

}  // namespace

CollFingerprint fingerprintOfTag(const CallTag& t) {
  const CollFingerprint::Call c = toCall(t);
  const uint64_t seq = t.desc & kSeqMask;
  return fingerprintOfCalls(seq == kSeqMask ? -1 : int64_t(seq), &c, 1);
}

CallTag makeCallTag(const OpRecord& op) {
  CallTag t;
  if (op.coll == Coll::kSendRecv) {
    t.count = uint64_t(op.count) * dataTypeSize(op.type);
    t.desc = kTagged | (uint64_t(Coll::kSendRecv) << 24);
    return t;
  }
  // The same fields BRAID_CHECK's fingerprint compares, so both name a call alike.
  const CollFingerprint::Call c = callOf(op);
  t.count = c.count;
  t.desc = kTagged | (uint64_t(uint32_t(c.root)) & kRootMask) << 43 |
           uint64_t(c.op) << 35 | (uint64_t(c.type) & 0x3f) << 29 |
           (uint64_t(c.coll) & 0x1f) << 24 | (uint64_t(op.collSeq) & kSeqMask);
  return t;
}

std::string describeCallTag(const CallTag& t) {
  if (!t.tagged()) return "an untagged call";
  const CollFingerprint::Call c = toCall(t);
  if (Coll(c.coll) == Coll::kSendRecv)
    return "ncclSend/ncclRecv of " + std::to_string(t.count) + " bytes";
  const uint64_t seq = t.desc & kSeqMask;
  std::string out = seq == kSeqMask ? std::string() : "collective #" + std::to_string(seq) + " ";
  return out + describeCall(c);
}

std::string tagMismatchMessage(const CallTag& mine, int peer, const CallTag& theirs) {
  return "collective mismatch: rank " + std::to_string(peer) + " sent data of " +
         describeCallTag(theirs) + " but this rank called " + describeCallTag(mine);
}

std::string compareCallTags(const CallTag* all, int nranks) {
  bool same = true;
  for (int r = 1; r < nranks && same; ++r) same = all[r] == all[0];
  if (same) return "";
  std::vector<CollFingerprint> fps;
  fps.reserve(static_cast<size_t>(nranks));
  for (int r = 0; r < nranks; ++r) fps.push_back(fingerprintOfTag(all[r]));
  return compareFingerprints(fps, "collective mismatch");
}

}  // namespace braid
