#include "algorithms/plan.h"

#include <cstdio>

namespace braid {

const char* stepKindName(StepKind k) {
  switch (k) {
    case StepKind::kSend: return "Send";
    case StepKind::kRecv: return "Recv";
    case StepKind::kRecvReduceSend: return "RecvReduceSend";
    case StepKind::kRecvReduceCopy: return "RecvReduceCopy";
    case StepKind::kRecvReduceCopySend: return "RecvReduceCopySend";
    case StepKind::kRecvCopySend: return "RecvCopySend";
    case StepKind::kCopy: return "Copy";
    case StepKind::kSignal: return "Signal";
    case StepKind::kWait: return "Wait";
    case StepKind::kPeerCopy: return "PeerCopy";
    case StepKind::kPeerReduce: return "PeerReduce";
    case StepKind::kPeerPut: return "PeerPut";
  }
  return "Unknown";
}

const char* collName(Coll c) {
  switch (c) {
    case Coll::kAllReduce: return "AllReduce";
    case Coll::kBroadcast: return "Broadcast";
    case Coll::kReduce: return "Reduce";
    case Coll::kAllGather: return "AllGather";
    case Coll::kReduceScatter: return "ReduceScatter";
    case Coll::kAllToAll: return "AllToAll";
    case Coll::kGather: return "Gather";
    case Coll::kScatter: return "Scatter";
    case Coll::kSendRecv: return "SendRecv";
    case Coll::kCount: break;
  }
  return "Unknown";
}

const char* switchOpName(SwitchOp op) {
  switch (op) {
    case SwitchOp::kNone: return "none";
    case SwitchOp::kAllReduce: return "allreduce";
    case SwitchOp::kAllGather: return "allgather";
    case SwitchOp::kReduceScatter: return "reducescatter";
  }
  return "unknown";
}

size_t Plan::stepCount() const {
  size_t n = 0;
  for (const Program& p : programs) n += p.steps.size();
  return n;
}

namespace {

const char* bufName(Buf b) {
  switch (b) {
    case Buf::kSend: return "send";
    case Buf::kRecv: return "recv";
    case Buf::kScratch: return "scratch";
    case Buf::kNone: break;
  }
  return "-";
}

void appendRegion(std::string& out, const char* label, const Region& r) {
  if (r.buf == Buf::kNone) return;
  char line[96];
  snprintf(line, sizeof(line), " %s=%s[%llu+%llu]", label, bufName(r.buf),
           static_cast<unsigned long long>(r.offset), static_cast<unsigned long long>(r.count));
  out += line;
}

}  // namespace

std::string Plan::toString() const {
  std::string out = "plan " + (algorithm.empty() ? std::string("?") : algorithm) + ": " +
                    std::to_string(programs.size()) + " program(s), " +
                    std::to_string(stepCount()) + " step(s)\n";
  for (size_t p = 0; p < programs.size(); ++p) {
    out += "program " + std::to_string(p) + ":\n";
    const std::vector<Step>& steps = programs[p].steps;
    for (size_t i = 0; i < steps.size(); ++i) {
      const Step& s = steps[i];
      char head[96];
      snprintf(head, sizeof(head), "  %3zu %-18s ch%u", i, stepKindName(s.kind),
               static_cast<unsigned>(s.channel));
      out += head;
      if (s.recvPeer == kSwitchPeer) out += " from=switch";
      else if (s.recvPeer == kAllPeers) out += " from=all";
      else if (s.recvPeer >= 0) out += " from=" + std::to_string(s.recvPeer);
      if (s.sendPeer == kSwitchPeer) out += " to=switch";
      else if (s.sendPeer >= 0) out += " to=" + std::to_string(s.sendPeer);
      appendRegion(out, "src", s.src);
      appendRegion(out, "dst", s.dst);
      if (s.flags & kPreOp) out += " pre";
      if (s.flags & kPostOp) out += " post";
      out += "\n";
    }
  }
  return out;
}

}  // namespace braid
