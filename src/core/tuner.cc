#include "src/core/tuner.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <string>

#include "algorithms/registry.h"
#include "src/config/params.h"
#include "src/core/comm.h"
#include "src/core/error.h"

namespace braid {
namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), ::tolower);
  return s;
}

std::string collKey(Coll c) {
  std::string s = lower(collName(c));
  s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
  return s;
}

/// Whether `name` or `alias` is in the comma list (with leading ^ meaning "all but").
bool listAllows(const std::string& list, const std::string& name, const std::string& alias) {
  bool negate = !list.empty() && list[0] == '^';
  std::string body = negate ? list.substr(1) : list;
  bool found = false;
  size_t pos = 0;
  while (pos <= body.size()) {
    size_t comma = body.find(',', pos);
    std::string tok = body.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (tok == name || (!alias.empty() && tok == alias)) found = true;
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return negate ? !found : found;
}

/// The size the small-message threshold compares: the larger of the op's send and
/// receive buffers, in bytes (nccl-tests' "size").
/// Largest communicator the tuner gives a one-shot algorithm (NCCL_ALGO still can).
constexpr int kDirectMaxRanks = 8;

uint64_t messageBytes(const PlanArgs& a) {
  const uint64_t b = a.count * a.typeSize, n = uint64_t(a.nranks);
  switch (a.coll) {
    case Coll::kAllGather: case Coll::kReduceScatter: case Coll::kAllToAll:
    case Coll::kGather: case Coll::kScatter:
      return b * n;
    default:
      return b;
  }
}

}  // namespace

bool algoAllowed(const std::string& specIn, Coll coll, const char* name, const char* ncclName) {
  std::string spec = lower(specIn);
  spec.erase(std::remove(spec.begin(), spec.end(), ' '), spec.end());
  if (spec.empty()) return true;
  const std::string me = lower(name);
  const std::string alias = ncclName ? lower(ncclName) : std::string();
  const std::string cname = collKey(coll);
  std::string generic;
  bool haveGeneric = false;
  size_t pos = 0;
  while (pos <= spec.size()) {
    size_t semi = spec.find(';', pos);
    std::string part = spec.substr(pos, semi == std::string::npos ? std::string::npos : semi - pos);
    size_t colon = part.find(':');
    if (colon == std::string::npos) {
      generic = part;
      haveGeneric = !part.empty();
    } else {
      std::string c = part.substr(0, colon);
      c.erase(std::remove(c.begin(), c.end(), '_'), c.end());
      if (c == cname) return listAllows(part.substr(colon + 1), me, alias);
    }
    if (semi == std::string::npos) break;
    pos = semi + 1;
  }
  return haveGeneric ? listAllows(generic, me, alias) : true;
}

ncclResult_t makePlan(Comm* comm, const PlanArgs& args, std::shared_ptr<const Plan>* out) {
  PlanParams params;
  uint64_t half = comm->settings.geometry.capacity() / 2;
  params.chunkBytes = std::max<uint64_t>(64, half & ~uint64_t(63));
  params.nChannels = comm->settings.nChannels;

  const bool cacheable = args.coll != Coll::kSendRecv;
  const Comm::PlanKey key{args.count, uint32_t(args.typeSize), int32_t(args.root),
                          uint8_t(args.coll), args.inPlace};
  if (cacheable) {
    auto it = comm->planCache.find(key);
    if (it != comm->planCache.end()) {
      *out = it->second;
      return ncclSuccess;
    }
  }

  const std::string spec = param::kAlgo.get();
  // One shot costs a connection per peer and n-1 copies per op: small groups only.
  const bool small = messageBytes(args) <= comm->settings.smallMsgBytes &&
                     args.nranks <= kDirectMaxRanks;
  // Pass 0: a small message takes a small-message algorithm NCCL_ALGO allows. Pass 1:
  // the others NCCL_ALGO allows, in registry order (small-message ones too, at any
  // size, when NCCL_ALGO names them). Passes 2 and 3: NCCL_ALGO allowed nothing (e.g.
  // "Tree"): the same choice without it.
  for (int pass = 0; pass < 4; ++pass) {
    const bool any = pass >= 2, smallPass = pass % 2 == 0;
    for (const Algorithm& a : allAlgorithms()) {
      if (a.coll != args.coll) continue;
      if (!any && !algoAllowed(spec, args.coll, a.name, a.ncclName)) continue;
      if (smallPass && !(small && a.small)) continue;
      if (!smallPass && a.small && (any || spec.empty())) continue;
      auto plan = std::make_shared<Plan>();
      if (!a.build(args, params, plan.get())) continue;
      plan->algorithm = a.name;
      for (const Program& prog : plan->programs)
        for (const Step& st : prog.steps)
          if (st.dst.buf != Buf::kNone) plan->outputElems += st.dst.count;
      if (any)
        BRAID_WARN("NCCL_ALGO='%s' allows no algorithm for %s; using %s", spec.c_str(),
                   collName(args.coll), a.name);
      BRAID_INFO(kLogTuning, "%s count %llu: algorithm %s, %zu steps, chunk %llu B",
                 collName(args.coll), static_cast<unsigned long long>(args.count), a.name,
                 plan->stepCount(), static_cast<unsigned long long>(params.chunkBytes));
      if (cacheable) {
        if (comm->planCache.size() > 4096) comm->planCache.clear();
        comm->planCache[key] = plan;
      }
      *out = std::move(plan);
      return ncclSuccess;
    }
  }
  return setError(ncclInternalError, comm, "no algorithm can run %s with %d ranks",
                  collName(args.coll), args.nranks);
}

}  // namespace braid
