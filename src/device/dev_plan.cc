// DevPlan::compile and DevPlanImage: a Plan flattened for the CUDA executor.
#include "src/device/dev_plan.h"

#include <cstring>
#include <map>
#include <new>
#include <tuple>

namespace braid {
namespace {

/// Most programs a plan may have: one CUDA block each, and every block of a launch must
/// be resident at once (blocks wait on each other through FIFOs and the grid barrier).
constexpr size_t kMaxPrograms = kDevMaxPrograms;
/// Connection indexes are 16-bit, kDevNoConn excluded.
constexpr size_t kMaxConns = kDevNoConn;

constexpr size_t align16(size_t n) { return (n + 15) & ~size_t(15); }

bool needsSrc(StepKind k) {
  return k == StepKind::kSend || k == StepKind::kRecvReduceSend ||
         k == StepKind::kRecvReduceCopy || k == StepKind::kRecvReduceCopySend ||
         k == StepKind::kCopy;
}
bool needsDst(StepKind k) { return k != StepKind::kSend && k != StepKind::kRecvReduceSend; }

/// Byte offset of a region, false on overflow.
bool toBytes(uint64_t elems, size_t ts, uint64_t* bytes) {
  if (elems > UINT64_MAX / ts) return false;
  *bytes = elems * ts;
  return true;
}

/// A direct-access step's rank field: a rank, kAllPeers or -1 (none).
bool directRank(int32_t r, bool allowAll, bool allowNone, uint16_t* out) {
  if (r == kAllPeers && allowAll) *out = kDevAllPeers;
  else if (r < 0 && r != kAllPeers && allowNone) *out = kDevNoConn;
  else if (r >= 0 && r < kDevMaxDirectRanks) *out = uint16_t(r);
  else return false;
  return true;
}

/// The direct-access form of step s (regions as for the others, ranks in the
/// connection fields); "" or what is wrong.
std::string compileDirect(const Step& s, size_t typeSize, DevStep* d) {
  const bool moves = s.kind != StepKind::kSignal && s.kind != StepKind::kWait;
  if (moves != (s.src.buf != Buf::kNone) || moves != (s.dst.buf != Buf::kNone))
    return "its regions do not match its kind";
  bool ok = true;
  switch (s.kind) {
    case StepKind::kSignal: break;
    case StepKind::kWait: ok = directRank(s.recvPeer, true, false, &d->recvConn); break;
    case StepKind::kPeerCopy: ok = directRank(s.recvPeer, false, false, &d->recvConn); break;
    case StepKind::kPeerReduce: ok = directRank(s.sendPeer, true, true, &d->sendConn); break;
    case StepKind::kPeerPut: ok = directRank(s.sendPeer, true, false, &d->sendConn); break;
    default: return "unknown step kind";
  }
  if (!ok)
    return "rank " + std::to_string(s.kind == StepKind::kWait || s.kind == StepKind::kPeerCopy
                                        ? s.recvPeer : s.sendPeer) +
           " out of what direct access on the GPU reaches (" +
           std::to_string(kDevMaxDirectRanks) + " ranks)";
  d->srcBuf = static_cast<uint8_t>(s.src.buf);
  d->dstBuf = static_cast<uint8_t>(s.dst.buf);
  if (!toBytes(s.count(), typeSize, &d->bytes) || !toBytes(s.src.offset, typeSize, &d->srcOff) ||
      !toBytes(s.dst.offset, typeSize, &d->dstOff))
    return "byte size overflows";
  return "";
}
bool sends(StepKind k) { return stepSends(k); }
bool recvs(StepKind k) { return stepRecvs(k); }

bool fail(std::string* why, const std::string& text) {
  if (why) *why = text;
  return false;
}


}  // namespace

bool DevPlan::compile(const Plan& plan, size_t typeSize, DevPlan* out, std::string* why) {
  *out = DevPlan();
  if (typeSize != 1 && typeSize != 2 && typeSize != 4 && typeSize != 8)
    return fail(why, "element size " + std::to_string(typeSize) + " is not 1, 2, 4 or 8");
  if (plan.programs.size() > kMaxPrograms)
    return fail(why, "plan " + plan.algorithm + " has " + std::to_string(plan.programs.size()) +
                         " programs; the CUDA executor runs at most " +
                         std::to_string(kMaxPrograms) + " (one block each)");
  out->typeSize = uint32_t(typeSize);
  out->sliceBytes = plan.sliceBytes;
  // (peer, channel, isSend) -> (index into conns, program using it)
  std::map<std::tuple<int, int, bool>, std::pair<uint16_t, size_t>> index;
  auto connFor = [&](int peer, uint16_t channel, bool isSend, size_t prog, uint16_t* idx,
                     std::string* err) {
    const auto key = std::make_tuple(peer, int(channel), isSend);
    auto it = index.find(key);
    if (it != index.end()) {
      if (it->second.second != prog) {
        *err = std::string("programs ") + std::to_string(it->second.second) + " and " +
               std::to_string(prog) + " both " + (isSend ? "send to" : "receive from") +
               " rank " + std::to_string(peer) + " on channel " + std::to_string(channel);
        return false;
      }
      *idx = it->second.first;
      return true;
    }
    if (out->conns.size() >= kMaxConns) {
      *err = "more than " + std::to_string(kMaxConns) + " connections";
      return false;
    }
    DevConnRef ref;
    ref.peer = peer;
    ref.channel = channel;
    ref.isSend = isSend ? 1 : 0;
    *idx = uint16_t(out->conns.size());
    out->conns.push_back(ref);
    index.emplace(key, std::make_pair(*idx, prog));
    return true;
  };

  for (size_t pi = 0; pi < plan.programs.size(); ++pi) {
    const Program& prog = plan.programs[pi];
    DevProgram dp;
    dp.firstStep = uint32_t(out->steps.size());
    dp.nSteps = uint32_t(prog.steps.size());
    if (out->steps.size() + prog.steps.size() > UINT32_MAX)
      return fail(why, "plan " + plan.algorithm + " has too many steps");
    bool waitedForAll = false;  // the kernel learns the peers' buffers at that wait
    for (size_t si = 0; si < prog.steps.size(); ++si) {
      const Step& s = prog.steps[si];
      // Where, for a refusal (built only then: a call compiles its plan once, but
      // strings per step would still be most of that).
      auto at = [&](const std::string& what) {
        return "plan " + plan.algorithm + " program " + std::to_string(pi) + " step " +
               std::to_string(si) + " (" + stepKindName(s.kind) + "): " + what;
      };
      DevStep d;
      d.kind = static_cast<uint8_t>(s.kind);
      d.flags = s.flags;
      if (isDirectAccess(s.kind)) {
        const std::string err = compileDirect(s, typeSize, &d);
        if (!err.empty()) return fail(why, at(err));
        if (s.kind == StepKind::kWait && s.recvPeer == kAllPeers) waitedForAll = true;
        else if (s.kind != StepKind::kSignal && !waitedForAll)
          return fail(why, at("comes before the program's first wait for every rank"));
        out->direct = true;
        out->steps.push_back(d);
        continue;
      }
      if (static_cast<uint8_t>(s.kind) > static_cast<uint8_t>(StepKind::kCopy))
        return fail(why, at("unknown step kind"));
      const bool src = needsSrc(s.kind), dst = needsDst(s.kind);
      if (src != (s.src.buf != Buf::kNone) || dst != (s.dst.buf != Buf::kNone))
        return fail(why, at("its regions do not match its kind"));
      for (const Region* r : {&s.src, &s.dst})
        if (r->buf != Buf::kNone && r->buf != Buf::kSend && r->buf != Buf::kRecv &&
            r->buf != Buf::kScratch)
          return fail(why, at("unknown buffer"));
      d.srcBuf = static_cast<uint8_t>(s.src.buf);
      d.dstBuf = static_cast<uint8_t>(s.dst.buf);
      if (!toBytes(s.count(), typeSize, &d.bytes) || !toBytes(s.src.offset, typeSize, &d.srcOff) ||
          !toBytes(s.dst.offset, typeSize, &d.dstOff))
        return fail(why, at("byte size overflows"));
      std::string err;
      if (sends(s.kind)) {
        if (s.sendPeer < 0) return fail(why, at("no send peer"));
        if (!connFor(s.sendPeer, s.channel, true, pi, &d.sendConn, &err))
          return fail(why, at(err));
      }
      if (recvs(s.kind)) {
        if (s.recvPeer < 0) return fail(why, at("no receive peer"));
        if (!connFor(s.recvPeer, s.channel, false, pi, &d.recvConn, &err))
          return fail(why, at(err));
      }
      out->steps.push_back(d);
    }
    out->programs.push_back(dp);
  }
  return true;
}

size_t DevPlanImage::bytesFor(const DevPlan& p) {
  return align16(sizeof(DevPlanImage)) + align16(p.programs.size() * sizeof(DevProgram)) +
         align16(p.steps.size() * sizeof(DevStep)) + p.conns.size() * sizeof(DevConn);
}

const DevPlanImage* DevPlanImage::write(const DevPlan& p, const DevConn* conns,
                                        const DevPeerTable& peers, void* hostMem, void* devMem) {
  char* h = static_cast<char*>(hostMem);
  char* d = static_cast<char*>(devMem);
  size_t off = align16(sizeof(DevPlanImage));
  const size_t progOff = off;
  off += align16(p.programs.size() * sizeof(DevProgram));
  const size_t stepOff = off;
  off += align16(p.steps.size() * sizeof(DevStep));
  const size_t connOff = off;

  auto* img = new (h) DevPlanImage();
  img->nPrograms = uint32_t(p.programs.size());
  img->nSteps = uint32_t(p.steps.size());
  img->nConns = uint32_t(p.conns.size());
  img->typeSize = p.typeSize;
  img->sliceBytes = p.sliceBytes;
  img->programs = reinterpret_cast<const DevProgram*>(d + progOff);
  img->steps = reinterpret_cast<const DevStep*>(d + stepOff);
  img->conns = reinterpret_cast<const DevConn*>(d + connOff);
  if (p.direct) img->peers = peers;
  if (!p.programs.empty())
    std::memcpy(h + progOff, p.programs.data(), p.programs.size() * sizeof(DevProgram));
  if (!p.steps.empty()) std::memcpy(h + stepOff, p.steps.data(), p.steps.size() * sizeof(DevStep));
  for (size_t i = 0; i < p.conns.size(); ++i) new (h + connOff + i * sizeof(DevConn)) DevConn(conns[i]);
  return img;
}

}  // namespace braid
