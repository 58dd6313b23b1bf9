#include "algorithms/patterns/program_writer.h"

#include <algorithm>

namespace braid {
namespace patterns {

ProgramWriter::ProgramWriter(Plan* plan, int channel)
    : plan_(plan), index_(plan->programs.size()), channel_(channel) {
  plan_->programs.emplace_back();
}

void ProgramWriter::add(StepKind kind, uint8_t flags, int from, int to, Region src,
                        Region dst) {
  Step s;
  s.kind = kind;
  s.flags = flags;
  s.channel = static_cast<uint16_t>(channel_);
  s.recvPeer = from;
  s.sendPeer = to;
  s.src = src;
  s.dst = dst;
  if (s.count() == 0 && kind != StepKind::kSignal && kind != StepKind::kWait) return;
  // Index, not a reference: another writer may have grown plan_->programs since.
  plan_->programs[index_].steps.push_back(s);
}

void ProgramWriter::send(int to, Region src, uint8_t flags) {
  add(StepKind::kSend, flags, -1, to, src, Region{});
}
void ProgramWriter::recv(int from, Region dst, uint8_t flags) {
  add(StepKind::kRecv, flags, from, -1, Region{}, dst);
}
void ProgramWriter::recvReduceSend(int from, int to, Region src, uint8_t flags) {
  add(StepKind::kRecvReduceSend, flags, from, to, src, Region{});
}
void ProgramWriter::recvReduceCopy(int from, Region src, Region dst, uint8_t flags) {
  add(StepKind::kRecvReduceCopy, flags, from, -1, src, dst);
}
void ProgramWriter::recvReduceCopySend(int from, int to, Region src, Region dst,
                                       uint8_t flags) {
  add(StepKind::kRecvReduceCopySend, flags, from, to, src, dst);
}
void ProgramWriter::recvCopySend(int from, int to, Region dst) {
  add(StepKind::kRecvCopySend, 0, from, to, Region{}, dst);
}
void ProgramWriter::copy(Region src, Region dst, uint8_t flags) {
  add(StepKind::kCopy, flags, -1, -1, src, dst);
}

void ProgramWriter::signal() { add(StepKind::kSignal, 0, -1, -1, Region{}, Region{}); }
void ProgramWriter::wait(int peer) { add(StepKind::kWait, 0, peer, -1, Region{}, Region{}); }
void ProgramWriter::peerCopy(int from, Region src, Region dst) {
  add(StepKind::kPeerCopy, 0, from, -1, src, dst);
}
void ProgramWriter::peerReduce(Region src, Region dst, uint8_t flags, int to) {
  add(StepKind::kPeerReduce, flags, -1, to, src, dst);
}
void ProgramWriter::peerPut(int to, Region src, Region dst) {
  add(StepKind::kPeerPut, 0, -1, to, src, dst);
}

void dropEmptyPrograms(Plan* plan) {
  auto& ps = plan->programs;
  ps.erase(std::remove_if(ps.begin(), ps.end(), [](const Program& p) { return p.steps.empty(); }),
           ps.end());
}

}  // namespace patterns
}  // namespace braid
