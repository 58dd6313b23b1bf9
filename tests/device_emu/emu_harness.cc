#include "tests/device_emu/emu_harness.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>
#include <thread>

namespace braid {
namespace emutest {
namespace {

/// Seconds after which runAll aborts launches that have not finished (a deadlock).
constexpr int kHangSeconds = 30;

}  // namespace

AlignedBytes::AlignedBytes(size_t n)
    : p_(static_cast<char*>(::operator new(n ? n : 1, std::align_val_t(64)))), n_(n) {}
AlignedBytes::~AlignedBytes() {
  if (p_) ::operator delete(p_, std::align_val_t(64));
}
AlignedBytes& AlignedBytes::operator=(AlignedBytes&& o) noexcept {
  if (this != &o) {
    if (p_) ::operator delete(p_, std::align_val_t(64));
    p_ = o.p_;
    n_ = o.n_;
    o.p_ = nullptr;
    o.n_ = 0;
  }
  return *this;
}

void* Fabric::region(int src, int dst, int channel) {
  const auto key = std::make_tuple(src, dst, channel);
  auto it = regions_.find(key);
  if (it == regions_.end()) {
    AlignedBytes mem(FifoLayout::bytesFor(nslots_, slotBytes_));
    FifoLayout::init(mem.data(), nslots_, slotBytes_);
    it = regions_.emplace(key, std::move(mem)).first;
  }
  return it->second.data();
}

bool Fabric::drained() const {
  for (const auto& kv : regions_) {
    const auto* h = reinterpret_cast<const FifoHeader*>(kv.second.data());
    if (h->head.load() != h->tail.load()) return false;
  }
  return true;
}

DevPeerTable Fabric::peers(int rank, int nranks) {
  if (areas_.size() != size_t(nranks)) {
    areas_.clear();
    areaPtrs_.clear();
    for (int r = 0; r < nranks; ++r) {
      AlignedBytes a(sizeof(DevPeerArea) + 128);
      std::memset(a.data(), 0, a.size());
      // 128-aligned, as cudaMalloc's memory is
      auto* p = reinterpret_cast<DevPeerArea*>((uintptr_t(a.data()) + 127) & ~uintptr_t(127));
      areaPtrs_.push_back(p);
      areas_.push_back(std::move(a));
    }
  }
  DevPeerTable t;
  t.areas = areaPtrs_.data();
  t.rank = uint32_t(rank);
  t.nranks = uint32_t(nranks);
  t.sysScope = 0;
  return t;
}

bool EmuLaunch::build(Fabric* fabric, int rank, size_t typeSize, const std::vector<EmuWork>& works) {
  if (works.size() > size_t(DevLaunch::kMaxWorks)) {
    ADD_FAILURE() << "too many works";
    return false;
  }
  launch_ = DevLaunch();
  images_.clear();
  launch_.nWorks = uint32_t(works.size());
  launch_.control = &control_;
  launch_.barrier = barrier_;
  for (size_t w = 0; w < works.size(); ++w) {
    const EmuWork& ew = works[w];
    DevPlan dp;
    std::string why;
    if (!DevPlan::compile(*ew.plan, typeSize, &dp, &why)) {
      ADD_FAILURE() << "DevPlan::compile: " << why;
      return false;
    }
    if (ew.sliceBytes != UINT64_MAX) dp.sliceBytes = ew.sliceBytes;
    std::vector<DevConn> conns;
    for (const DevConnRef& ref : dp.conns)
      conns.push_back(ref.isSend ? fabric->conn(rank, ref.peer, ref.channel)
                                 : fabric->conn(ref.peer, rank, ref.channel));
    AlignedBytes mem(DevPlanImage::bytesFor(dp));
    const DevPeerTable peers = dp.direct ? fabric->peers(rank, ew.nranks) : DevPeerTable();
    const DevPlanImage* img = DevPlanImage::write(dp, conns.data(), peers, mem.data(), mem.data());
    images_.push_back(std::move(mem));
    DevWork& dw = launch_.works[w];
    dw.plan = img;
    dw.send = static_cast<const char*>(ew.send);
    dw.recv = static_cast<char*>(ew.recv);
    dw.scratch = static_cast<char*>(ew.scratch);
    dw.scalarMode = ew.scalarMode;
    if (ew.scalarMode == kDevScalarPointer) dw.scalarPtr = ew.scalarPtr;
    else dw.scalarBits = ew.scalarBits;
    dw.nranks = uint32_t(ew.nranks);
    dw.avg = ew.avg ? 1 : 0;
    dw.firstBlock = ew.firstBlock;
    dw.newStage = ew.newStage ? 1 : 0;
    if (ew.firstBlock + img->nPrograms > launch_.nBlocks)
      launch_.nBlocks = ew.firstBlock + img->nPrograms;
  }
  return true;
}

int blockThreads() {
  const char* v = std::getenv("BRAID_EMU_BLOCK_THREADS");
  const int n = v != nullptr ? std::atoi(v) : 4;
  return n >= 1 ? n : 1;
}

std::vector<bool> runAll(std::vector<EmuLaunch*> launches, ncclDataType_t type, DevRed red,
                         int threads) {
  if (threads <= 0) threads = blockThreads();
  std::vector<std::vector<char>> ok(launches.size());
  std::vector<std::thread> blocks;
  std::atomic<size_t> running{0};
  for (size_t r = 0; r < launches.size(); ++r) {
    const DevLaunch& l = launches[r]->launch();
    ok[r].assign(l.nBlocks, 0);
    for (uint32_t b = 0; b < l.nBlocks; ++b) {
      ++running;
      blocks.emplace_back([&, r, b] {
        ok[r][b] = emulateDevBlock(launches[r]->launch(), b, type, red, threads);
        --running;
      });
    }
  }
  // A hang is a failure, not a stuck test: abort every launch after a while (the
  // blocks then give up, as they would on the GPU).
  const auto t0 = std::chrono::steady_clock::now();
  while (running.load() != 0) {
    if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(kHangSeconds)) {
      ADD_FAILURE() << "the emulated launches did not finish in " << kHangSeconds
                    << " s: aborting them";
      for (EmuLaunch* l : launches) __atomic_store_n(&l->control().abort, 1u, __ATOMIC_RELEASE);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  for (auto& t : blocks) t.join();
  std::vector<bool> res(launches.size(), true);
  for (size_t r = 0; r < launches.size(); ++r)
    for (char v : ok[r]) res[r] = res[r] && v;
  return res;
}

HostConns::HostConns(Fabric* fabric, int rank, const Plan& plan) : fabric_(fabric), rank_(rank) {
  for (const Program& p : plan.programs) {
    for (const Step& s : p.steps) {
      if (s.sendPeer >= 0 && !senders_.count({s.sendPeer, s.channel}))
        senders_[{s.sendPeer, s.channel}] =
            std::make_unique<FifoSender>(fabric_->region(rank_, s.sendPeer, s.channel));
      if (s.recvPeer >= 0 && !receivers_.count({s.recvPeer, s.channel}))
        receivers_[{s.recvPeer, s.channel}] =
            std::make_unique<FifoReceiver>(fabric_->region(s.recvPeer, rank_, s.channel));
    }
  }
}

FifoSender* HostConns::sender(int peer, int channel) {
  auto it = senders_.find({peer, channel});
  return it == senders_.end() ? nullptr : it->second.get();
}

FifoReceiver* HostConns::receiver(int peer, int channel) {
  auto it = receivers_.find({peer, channel});
  return it == receivers_.end() ? nullptr : it->second.get();
}

}  // namespace emutest
}  // namespace braid
