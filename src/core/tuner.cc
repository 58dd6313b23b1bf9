#include "src/core/tuner.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>

#include "algorithms/cost.h"
#include "algorithms/registry.h"
#include "src/config/params.h"
#include "src/core/comm.h"
#include "src/config/error.h"
#include "src/config/log.h"
#include "src/device/dev_launch.h"

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

namespace {

/// The list of `spec` that applies to `coll` (lower case, no spaces): its prefixed
/// list, else the unprefixed one, else "" (everything allowed).
std::string listFor(const std::string& specIn, Coll coll) {
  std::string spec = lower(specIn);
  spec.erase(std::remove(spec.begin(), spec.end(), ' '), spec.end());
  const std::string cname = collKey(coll);
  std::string generic;
  size_t pos = 0;
  while (pos <= spec.size()) {
    size_t semi = spec.find(';', pos);
    std::string part = spec.substr(pos, semi == std::string::npos ? std::string::npos : semi - pos);
    size_t colon = part.find(':');
    if (colon == std::string::npos) {
      generic = part;
    } else {
      std::string c = part.substr(0, colon);
      c.erase(std::remove(c.begin(), c.end(), '_'), c.end());
      if (c == cname) return part.substr(colon + 1);
    }
    if (semi == std::string::npos) break;
    pos = semi + 1;
  }
  return generic;
}

}  // namespace

bool algoAllowed(const std::string& spec, Coll coll, const char* name, const char* ncclName) {
  const std::string list = listFor(spec, coll);
  return list.empty() ||
         listAllows(list, lower(name), ncclName ? lower(ncclName) : std::string());
}

bool algoNamed(const std::string& spec, Coll coll, const char* name, const char* ncclName) {
  const std::string list = listFor(spec, coll);
  return !list.empty() && list[0] != '^' && algoAllowed(spec, coll, name, ncclName);
}

const std::vector<Protocol>& protocols() {
  static const std::vector<Protocol> table = {
      {"Simple", 0}, {"LL128", 64 << 10}, {"LL", 8 << 10}};
  return table;
}

bool protoAllowed(const std::string& spec, Coll coll, const char* name) {
  return algoAllowed(spec, coll, name, nullptr);
}

namespace {

/// Channels an algorithm wants (the double binary tree: one per tree).
int preferredChannels(const Algorithm& a) { return std::string(a.name) == "tree" ? 2 : 1; }

struct Candidate {
  const Algorithm* algo;
  const Protocol* proto;
  PlanParams params;
  uint64_t slice;
  double us;  ///< predicted; +inf when the model has no formula
};

std::string fmtBytes(uint64_t b) {
  char buf[32];
  if (b >= (1u << 20) && b % (1u << 20) == 0)
    snprintf(buf, sizeof(buf), "%lluM", static_cast<unsigned long long>(b >> 20));
  else if (b >= 1024 && b % 1024 == 0)
    snprintf(buf, sizeof(buf), "%lluK", static_cast<unsigned long long>(b >> 10));
  else
    snprintf(buf, sizeof(buf), "%llu", static_cast<unsigned long long>(b));
  return buf;
}

}  // namespace

std::vector<TuneChoice> rankChoices(const TuneInput& in, bool ignoreSpecs) {
  const uint64_t bytes = messageBytes(in.args);
  const bool small = bytes <= in.smallMsgBytes && in.args.nranks <= kDirectMaxRanks;
  std::vector<Candidate> cands;
  // (NCCL_ALGO set: the user's choice stands, whatever it stages.)
  bool directOnly = in.directOnly && in.args.peerAccess && in.algoSpec.empty();
  if (directOnly) {
    const Algorithm* d = peerAccessAlgorithm(in.args.coll);
    directOnly = d != nullptr;
  }
  // Pass 0: what NCCL_ALGO / NCCL_PROTO allow. Pass 1 (only if pass 0 found nothing,
  // e.g. NCCL_ALGO=CollNet): everything, with a warning from the caller.
  for (int pass = ignoreSpecs ? 1 : 0; pass < 2 && cands.empty(); ++pass) {
    const bool any = pass == 1;
    for (const Algorithm& a : allAlgorithms()) {
      if (a.coll != in.args.coll) continue;
      if (a.needsSwitch && !in.args.collnet) continue;  // no switch serves this call
      if (a.needsPeerAccess && !in.args.peerAccess) continue;  // no direct access here
      if (directOnly && !a.needsPeerAccess && !any) continue;  // staging only adds traffic
      if (!any && !algoAllowed(in.algoSpec, a.coll, a.name, a.ncclName)) continue;
      // One-shot algorithms cost a connection per peer and n-1 copies: only for small
      // messages on small groups, unless NCCL_ALGO names them.
      if (a.small && !small && !(!any && algoNamed(in.algoSpec, a.coll, a.name, a.ncclName)))
        continue;
      for (const Protocol& pr : protocols()) {
        if (!any && !protoAllowed(in.protoSpec, a.coll, pr.name)) continue;
        Candidate c{&a, &pr, {}, 0, 0};
        c.slice = pr.sliceBytes == 0 || pr.sliceBytes > in.geometry.slotBytes
                      ? in.geometry.slotBytes : pr.sliceBytes;
        if (pr.sliceBytes != 0 && c.slice == in.geometry.slotBytes)
          continue;  // slots this small: the protocol is Simple
        const uint64_t cap = uint64_t(in.geometry.nslots) * c.slice / 2;
        c.params.chunkBytes = std::max<uint64_t>(64, cap & ~uint64_t(63));
        c.params.nChannels =
            std::max(in.minChannels, std::min(preferredChannels(a), in.maxChannels));
        if (a.needsSwitch)  // one switch connection per channel, at most this many
          c.params.nChannels = std::min(c.params.nChannels,
                                        std::min(kMaxSwitchChannels, std::max(1, in.maxChannels)));
        CostQuery q;
        q.coll = in.args.coll;
        q.nranks = in.args.nranks;
        q.bytes = bytes;
        q.layout = &layoutOf(in.args);
        q.nChannels = c.params.nChannels;
        q.chunkBytes = c.params.chunkBytes;
        q.sliceBytes = c.slice;
        q.model = &in.model;
        const double us = a.cost ? a.cost(q) : -1;
        c.us = us < 0 ? std::numeric_limits<double>::infinity() : us;
        cands.push_back(c);
      }
    }
  }
  // Cheapest first; ties keep registry and protocol order (every rank decides alike).
  // (Equal predictions: a one-shot algorithm first, it has the fewest steps.)
  std::stable_sort(cands.begin(), cands.end(), [](const Candidate& a, const Candidate& b) {
    if (a.us != b.us) return a.us < b.us;
    return a.algo->small && !b.algo->small;
  });
  std::vector<TuneChoice> out;
  for (const Candidate& c : cands)
    out.push_back({c.algo, c.proto->name, c.params, c.slice, c.us});
  return out;
}

ncclResult_t makePlan(Comm* comm, const PlanArgs& argsIn, std::shared_ptr<const Plan>* out,
                      bool device) {
  const bool cacheable = argsIn.coll != Coll::kSendRecv;
  // Device buffers never go through the switch (its ports are host FIFOs).
  const bool collnet = argsIn.collnet && !device;
  const PlanCache::Key key{argsIn.count, uint32_t(argsIn.typeSize), int32_t(argsIn.root),
                           uint8_t(argsIn.coll), argsIn.inPlace, device, collnet,
                           argsIn.peerAccess};
  if (cacheable) {
    if (std::shared_ptr<const Plan> hit = comm->planCache.find(key)) {
      *out = std::move(hit);
      return ncclSuccess;
    }
  }
  PlanArgs args = argsIn;
  args.collnet = collnet;
  if (!args.layout) args.layout = comm->layout;

  TuneInput in{args, comm->settings.algoSpec, comm->settings.protoSpec, comm->model,
               comm->settings.geometry, comm->settings.smallMsgBytes,
               comm->settings.nChannels, comm->settings.maxChannels};
  if (device) {
    // A channel is a CUDA block: bandwidth on the GPU grows with them, so large device
    // ops use up to BRAID_DEVICE_NCHANNELS (one per 128 KiB of the message).
    const uint64_t perChannel = 128 << 10;
    const uint64_t want = std::max<uint64_t>(1, messageBytes(args) / perChannel);
    uint64_t cap = uint64_t(std::max(1, comm->settings.deviceChannels));
    // A group's send/recv ops run side by side, one block range per peer and direction:
    // keep a full exchange with every rank within one launch's blocks. (A function of
    // nranks only: both ends of a connection must choose the same channels.)
    if (args.coll == Coll::kSendRecv)
      cap = std::min<uint64_t>(cap, std::max(1, DevLaunch::kMaxBlocks / (2 * args.nranks)));
    in.minChannels = in.maxChannels = int(std::min<uint64_t>(want, cap));
    in.directOnly = args.peerAccess;
  }
  std::vector<TuneChoice> choices = rankChoices(in);
  const size_t allowed = choices.size();
  const bool restricted = !in.algoSpec.empty() || !in.protoSpec.empty();
  for (size_t i = 0; i < choices.size(); ++i) {
    const TuneChoice& ch = choices[i];
    auto plan = std::make_shared<Plan>();
    if (!ch.algo->build(args, ch.params, plan.get())) {
      // Every allowed builder declined (e.g. NCCL_ALGO=hier on uneven nodes): fall back
      // to the others (a builder's decision depends on the layout, never on the rank).
      if (i + 1 == allowed && restricted)
        for (const TuneChoice& other : rankChoices(in, true)) choices.push_back(other);
      continue;
    }
    plan->algorithm = ch.algo->name;
    plan->sliceBytes = ch.sliceBytes;
    plan->predictedUs = std::isfinite(ch.us) ? ch.us : 0;
    for (const Program& prog : plan->programs)
      for (const Step& st : prog.steps)
        if (st.dst.buf != Buf::kNone) plan->outputElems += st.dst.count;
    if (restricted && (i >= allowed ||
                       !algoAllowed(in.algoSpec, args.coll, ch.algo->name, ch.algo->ncclName) ||
                       !protoAllowed(in.protoSpec, args.coll, ch.protocol)))
      BRAID_WARN("NCCL_ALGO='%s' NCCL_PROTO='%s' allow no algorithm that can run %s %s; "
                 "using %s/%s", in.algoSpec.c_str(), in.protoSpec.c_str(),
                 collName(args.coll), layoutOf(args).describe().c_str(), ch.algo->name,
                 ch.protocol);
    if (logEnabled(LogLevel::kInfo, kLogTuning)) {
      std::string others;
      for (const TuneChoice& o : choices) {
        if (&o == &ch || others.size() > 400) continue;
        char b[96];
        snprintf(b, sizeof(b), " %s/%s=%.1f", o.algo->name, o.protocol, o.us);
        others += b;
      }
      BRAID_INFO(kLogTuning,
                 "%s %s B (%s): %s/%s channels %d chunk %s predicted %.1f us; others:%s",
                 collName(args.coll), fmtBytes(messageBytes(args)).c_str(),
                 layoutOf(args).describe().c_str(), ch.algo->name, ch.protocol,
                 ch.params.nChannels, fmtBytes(ch.params.chunkBytes).c_str(), ch.us,
                 others.c_str());
    }
    // Bounded by entries and by bytes: a program that uses many distinct counts keeps
    // about 1 MiB of plans per communicator, the most recently used.
    if (cacheable) comm->planCache.insert(key, plan);
    *out = std::move(plan);
    return ncclSuccess;
  }
  return setError(ncclInternalError, comm, "no algorithm can run %s with %d ranks",
                  collName(args.coll), args.nranks);
}

void logBoardChoice(const PlanArgs& args, const char* path) {
  if (!logEnabled(LogLevel::kInfo, kLogTuning)) return;
  // Once per size and collective in a row (a perf loop repeats the same call).
  thread_local uint64_t last = ~uint64_t(0);
  const uint64_t key = (messageBytes(args) << 8) ^ uint64_t(args.coll) ^ (uint64_t(args.nranks) << 4);
  if (key == last) return;
  last = key;
  BRAID_INFO(kLogTuning, "%s %s B (%s): board/%s (the flag board; no plan)", collName(args.coll),
             fmtBytes(messageBytes(args)).c_str(), layoutOf(args).describe().c_str(), path);
}

}  // namespace braid
