#include "src/diag/fingerprint.h"

#include <cinttypes>
#include <cstdio>
#include <algorithm>
#include <cstring>

#include "src/reduce/reducer.h"

namespace braid {
namespace {

bool reduces(Coll c) {
  return c == Coll::kAllReduce || c == Coll::kReduce || c == Coll::kReduceScatter;
}
bool rooted(Coll c) {
  return c == Coll::kBroadcast || c == Coll::kReduce || c == Coll::kGather ||
         c == Coll::kScatter;
}

const char* apiName(Coll c) {
  switch (c) {
    case Coll::kAllReduce: return "ncclAllReduce";
    case Coll::kBroadcast: return "ncclBroadcast";
    case Coll::kReduce: return "ncclReduce";
    case Coll::kAllGather: return "ncclAllGather";
    case Coll::kReduceScatter: return "ncclReduceScatter";
    case Coll::kAllToAll: return "ncclAlltoAll";
    case Coll::kGather: return "ncclGather";
    case Coll::kScatter: return "ncclScatter";
    default: return "ncclSend/ncclRecv";
  }
}

uint64_t mix(uint64_t h, const void* p, size_t n) {
  const auto* b = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 0x100000001b3ull;
  return h;
}

bool sameCall(const CollFingerprint::Call& a, const CollFingerprint::Call& b) {
  return a.coll == b.coll && a.type == b.type && a.op == b.op && a.root == b.root &&
         a.count == b.count;
}

bool same(const CollFingerprint& a, const CollFingerprint& b) {
  if (a.magic != b.magic || a.nColl != b.nColl || a.collSeq != b.collSeq || a.hash != b.hash)
    return false;
  for (uint32_t i = 0; i < a.nColl && i < uint32_t(CollFingerprint::kShown); ++i)
    if (!sameCall(a.calls[i], b.calls[i])) return false;
  return true;
}


std::string listCalls(const CollFingerprint& f) {
  std::string out;
  for (uint32_t i = 0; i < f.nColl && i < uint32_t(CollFingerprint::kShown); ++i)
    out += (i ? ", " : "") + describeCall(f.calls[i]);
  if (f.nColl > uint32_t(CollFingerprint::kShown)) out += ", ...";
  return out;
}

/// How `b` differs from `a`, naming both calls.
std::string difference(const CollFingerprint& a, const std::string& aRanks,
                       const CollFingerprint& b, const std::string& bRanks) {
  char buf[160];
  if (a.magic != b.magic)
    return bRanks + " sent no valid fingerprint (a different Braid version?)";
  const uint32_t shown = std::min(std::min(a.nColl, b.nColl), uint32_t(CollFingerprint::kShown));
  for (uint32_t i = 0; i < shown; ++i) {
    if (sameCall(a.calls[i], b.calls[i])) continue;
    snprintf(buf, sizeof(buf), "at collective #%" PRId64 ": ", a.collSeq + int64_t(i));
    return buf + aRanks + " called " + describeCall(a.calls[i]) + " but " + bRanks +
           " called " + describeCall(b.calls[i]);
  }
  if (a.nColl != b.nColl)
    return aRanks + " called " + std::to_string(a.nColl) + " collective(s) in the group (" +
           listCalls(a) + ") but " + bRanks + " called " + std::to_string(b.nColl) + " (" +
           listCalls(b) + ")";
  if (a.collSeq != b.collSeq) {
    snprintf(buf, sizeof(buf), " is at collective #%" PRId64 " but ", a.collSeq);
    std::string out = aRanks + buf + bRanks;
    snprintf(buf, sizeof(buf), " at #%" PRId64 " (", b.collSeq);
    return out + buf + listCalls(a) + ")";
  }
  snprintf(buf, sizeof(buf), "at collective #%" PRId64 ": ", a.collSeq);
  return buf + aRanks + " and " + bRanks + " differ in the group's collectives after the " +
         std::to_string(CollFingerprint::kShown) + "th (group of " + std::to_string(a.nColl) +
         ": " + listCalls(a) + ")";
}

}  // namespace

std::string rankList(const std::vector<int>& ranks) {
  std::string out = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (i) out += ",";
    out += std::to_string(ranks[i]);
    if (j > i) out += (j == i + 1 ? "," : "-") + std::to_string(ranks[j]);
    i = j + 1;
  }
  return out;
}

CollFingerprint::Call callOf(const OpRecord& op) {
  CollFingerprint::Call c;
  c.coll = uint8_t(op.coll);
  c.type = uint8_t(op.type);
  if (reduces(op.coll))
    c.op = int(op.op) >= int(ncclNumOps) ? CollFingerprint::kPreMulSum : uint8_t(op.op);
  if (rooted(op.coll)) c.root = op.root;
  c.count = op.count;
  return c;
}

CollFingerprint fingerprintOfCalls(int64_t collSeq, const CollFingerprint::Call* calls,
                                   size_t n) {
  CollFingerprint f;
  f.nColl = uint32_t(n);
  f.collSeq = n == 0 ? -1 : collSeq;
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; ++i) {
    h = mix(h, &calls[i], sizeof(calls[i]));
    if (i < size_t(CollFingerprint::kShown)) f.calls[i] = calls[i];
  }
  f.hash = h;
  return f;
}

CollFingerprint makeFingerprint(const std::vector<const OpRecord*>& ops) {
  std::vector<CollFingerprint::Call> calls;
  calls.reserve(ops.size());
  for (const OpRecord* op : ops) calls.push_back(callOf(*op));
  return fingerprintOfCalls(ops.empty() ? -1 : ops.front()->collSeq, calls.data(), calls.size());
}

std::string describeCall(const CollFingerprint::Call& c) {
  const Coll coll = Coll(c.coll);
  std::string out = std::string(apiName(coll)) + "(count " + std::to_string(c.count) + ", " +
                    dataTypeName(ncclDataType_t(c.type));
  if (reduces(coll))
    out += std::string(", ") +
           (c.op == CollFingerprint::kPreMulSum ? "premulsum" : redOpName(ncclRedOp_t(c.op)));
  if (rooted(coll)) out += ", root " + std::to_string(c.root);
  return out + ")";
}

std::string compareFingerprints(const std::vector<CollFingerprint>& all, const char* what) {
  // Classes of ranks with equal fingerprints, in order of their first rank.
  std::vector<std::vector<int>> classes;
  for (int r = 0; r < int(all.size()); ++r) {
    bool placed = false;
    for (auto& cl : classes)
      if (same(all[size_t(cl.front())], all[size_t(r)])) {
        cl.push_back(r);
        placed = true;
        break;
      }
    if (!placed) classes.push_back({r});
  }
  if (classes.size() <= 1) return "";
  // The largest class (rank 0's on a tie) is what the others are compared with.
  size_t ref = 0;
  for (size_t i = 1; i < classes.size(); ++i)
    if (classes[i].size() > classes[ref].size()) ref = i;
  const CollFingerprint& a = all[size_t(classes[ref].front())];
  const std::string aRanks = rankList(classes[ref]);
  std::string out = std::string(what) + ": ";
  bool firstDiff = true;
  for (size_t i = 0; i < classes.size(); ++i) {
    if (i == ref) continue;
    if (!firstDiff) out += "; ";
    firstDiff = false;
    out += difference(a, aRanks, all[size_t(classes[i].front())], rankList(classes[i]));
  }
  return out;
}

}  // namespace braid
