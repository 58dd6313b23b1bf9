// Fuzzes combinations of NCCL API arguments on single-rank communicators with host
// buffers and the null stream: the input is a program of API calls (collectives and
// point-to-point with fuzzed counts, types, ops, roots and null / in-place / misaligned
// buffers; group nesting; ncclRedOpCreatePreMulSum; communicator creation, split,
// finalize, destroy and abort; null, finalized and destroyed handles). Never-created
// handles (pointers to other memory) are left out: checkComm reads their magic through
// a Comm*, which UBSan's vptr check rightly calls undefined behaviour.
//
// Input: a sequence of ops, each an op byte followed by the op's argument bytes.
// Oracles: every call returns a valid ncclResult_t and never crashes; a failure leaves a
// non-empty ncclGetLastError; on one rank the data-moving collectives copy their input
// and integer sum/min/max reductions return it unchanged.
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "nccl.h"
#include "tests/fuzz/fuzz_input.h"

using braid_fuzz::FuzzInput;

namespace {

constexpr size_t kMaxCount = 256;        // elements per buffer (bounds a run's work)
constexpr size_t kBufBytes = kMaxCount * 8 + 64;
constexpr int kMaxOps = 48;              // calls per input
constexpr int kMaxNewComms = 4;          // communicators created per input

ncclComm_t baseComm() {
  static ncclComm_t comm = [] {
    ncclComm_t c = nullptr;
    if (ncclCommInitAll(&c, 1, nullptr) != ncclSuccess) abort();
    return c;
  }();
  return comm;
}

bool validResult(ncclResult_t r) { return int(r) >= 0 && int(r) < int(ncclNumResults); }

void checkResult(ncclResult_t r) {
  FUZZ_CHECK(validResult(r));
  if (r != ncclSuccess && r != ncclInProgress) {
    const char* msg = ncclGetLastError(nullptr);
    FUZZ_CHECK(msg != nullptr && msg[0] != '\0');
  }
}

size_t typeSize(int t) {
  switch (t) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    default: return 8;
  }
}

bool isInteger(int t) { return t <= ncclUint64; }

class Program {
 public:
  explicit Program(FuzzInput& in) : in_(in) {
    for (size_t i = 0; i < kBufBytes; ++i) {
      send_[i] = static_cast<unsigned char>(i * 31 + 7);
      recv_[i] = 0;
    }
    live_.push_back(baseComm());
  }

  void run() {
    for (int n = 0; n < kMaxOps && !in_.empty(); ++n) step();
    // Errors returned by calls never break the communicator they were made on.
    ncclResult_t async = ncclInternalError;
    FUZZ_CHECK(ncclCommGetAsyncError(baseComm(), &async) == ncclSuccess);
    FUZZ_CHECK(async == ncclSuccess);
    while (depth_ > 0) {  // close what the program left open
      checkResult(ncclGroupEnd());
      --depth_;
    }
    for (auto& op : ops_) checkResult(ncclRedOpDestroy(op.first, op.second));
    for (ncclComm_t c : created_) checkResult(ncclCommDestroy(c));
  }

 private:
  // ---- argument choices --------------------------------------------------------
  ncclComm_t pickComm() {
    const uint8_t b = in_.byte();
    switch (b % 8) {
      case 6: return nullptr;
      case 7: return dead_.empty() ? nullptr : dead_[b / 8 % dead_.size()];
      default: return live_[b / 8 % live_.size()];
    }
  }
  ncclDataType_t pickType() {
    const uint8_t b = in_.byte();
    if (b < 240) return ncclDataType_t(b % ncclNumTypes);
    const int odd[] = {-1, ncclNumTypes, 100, 1 << 30};
    return ncclDataType_t(odd[b % 4]);
  }
  ncclRedOp_t pickOp() {
    const uint8_t b = in_.byte();
    if (b < 200) return ncclRedOp_t(b % ncclNumOps);
    if (b < 240 && !ops_.empty()) return ops_[b % ops_.size()].first;
    const int odd[] = {-1, ncclNumOps, ncclNumOps + 3, 0x7fffffff};
    return ncclRedOp_t(odd[b % 4]);
  }
  int pickRoot() {
    const uint8_t b = in_.byte();
    if (b < 220) return 0;
    const int odd[] = {-1, 1, 2, 0x7fffffff};
    return odd[b % 4];
  }
  /// Counts stay small with real buffers; huge ones come only with NULL buffers.
  size_t pickCount(bool* huge) {
    const uint8_t b = in_.byte();
    *huge = b >= 248;
    if (!*huge) return b % (kMaxCount / 2 + 1) + (b & 1 ? kMaxCount / 2 - 1 : 0);
    const size_t odd[] = {SIZE_MAX, SIZE_MAX / 2 + 1, size_t(1) << 40, size_t(INT32_MAX) + 1};
    return odd[b % 4];
  }
  enum class Buf { kNull, kSend, kRecv, kMisaligned };
  Buf pickBuf() {
    const uint8_t b = in_.byte();
    if (b < 200) return b & 1 ? Buf::kRecv : Buf::kSend;
    return b < 230 ? Buf::kNull : Buf::kMisaligned;
  }
  void* addr(Buf b, bool huge) {
    if (huge) return nullptr;
    switch (b) {
      case Buf::kNull: return nullptr;
      case Buf::kSend: return send_;
      case Buf::kRecv: return recv_;
      default: return send_ + 1;
    }
  }

  // ---- ops -----------------------------------------------------------------------
  void collective(int kind) {
    ncclComm_t comm = pickComm();
    bool huge = false;
    const size_t count = pickCount(&huge);
    const ncclDataType_t type = pickType();
    const ncclRedOp_t op = pickOp();
    const int root = pickRoot();
    const Buf sb = pickBuf(), rb = pickBuf();
    void* s = addr(sb, huge);
    void* r = addr(rb, huge);
    if (!huge && rb == Buf::kMisaligned) r = recv_ + 1;
    const bool checkable = depth_ == 0 && !huge && s != nullptr && r != nullptr && s != r &&
                           sb != Buf::kMisaligned && rb != Buf::kMisaligned &&
                           comm == baseComm() && root == 0 && int(type) >= 0 &&
                           int(type) < ncclNumTypes;
    if (checkable) memset(recv_, 0xA5, kBufBytes);
    ncclResult_t res = ncclSuccess;
    bool copies = false;  // on one rank the result equals the input
    switch (kind) {
      case 0:
        res = ncclAllReduce(s, r, count, type, op, comm, nullptr);
        copies = isInteger(type) && (op == ncclSum || op == ncclMax || op == ncclMin);
        break;
      case 1: res = ncclBroadcast(s, r, count, type, root, comm, nullptr); copies = true; break;
      case 2:
        res = ncclReduce(s, r, count, type, op, root, comm, nullptr);
        copies = isInteger(type) && (op == ncclSum || op == ncclMax || op == ncclMin);
        break;
      case 3: res = ncclAllGather(s, r, count, type, comm, nullptr); copies = true; break;
      case 4:
        res = ncclReduceScatter(s, r, count, type, op, comm, nullptr);
        copies = isInteger(type) && (op == ncclSum || op == ncclMax || op == ncclMin);
        break;
      case 5: res = ncclAlltoAll(s, r, count, type, comm, nullptr); copies = true; break;
      case 6: res = ncclGather(s, r, count, type, root, comm, nullptr); copies = true; break;
      case 7: res = ncclScatter(s, r, count, type, root, comm, nullptr); copies = true; break;
      default: res = ncclBcast(s, count, type, root, comm, nullptr); break;
    }
    checkResult(res);
    if (checkable && copies && res == ncclSuccess)
      FUZZ_CHECK(memcmp(send_, recv_, count * typeSize(type)) == 0);
  }

  /// A send and a receive with the same peer, count and type in one group: on one rank
  /// only such a pair can complete (a lone ncclRecv from itself waits until
  /// BRAID_TIMEOUT_MS and then fails the communicator, as a receive from a silent peer
  /// must). The peer, buffers, count and type are fuzzed; `recvFirst` orders the pair.
  void pointToPoint(bool recvFirst) {
    ncclComm_t comm = pickComm();
    bool huge = false;
    const size_t count = pickCount(&huge);
    const ncclDataType_t type = pickType();
    const int peer = pickRoot();
    const Buf sb = pickBuf(), rb = pickBuf();
    void* s = addr(sb, huge);
    void* r = addr(rb, huge);
    if (!huge && rb == Buf::kMisaligned) r = recv_ + 1;
    if (s == r && s != nullptr)  // the receive must not overwrite its own source
      r = s == static_cast<void*>(recv_) ? static_cast<void*>(send_) : recv_;
    const bool checkable = depth_ == 0 && s == static_cast<void*>(send_) &&
                           r == static_cast<void*>(recv_) && comm == baseComm() && peer == 0 &&
                           int(type) >= 0 && int(type) < ncclNumTypes;
    if (checkable) memset(recv_, 0xA5, kBufBytes);
    checkResult(ncclGroupStart());
    if (recvFirst) checkResult(ncclRecv(r, count, type, peer, comm, nullptr));
    checkResult(ncclSend(s, count, type, peer, comm, nullptr));
    if (!recvFirst) checkResult(ncclRecv(r, count, type, peer, comm, nullptr));
    const ncclResult_t res = ncclGroupEnd();
    checkResult(res);
    if (checkable && res == ncclSuccess)
      FUZZ_CHECK(memcmp(send_, recv_, count * typeSize(type)) == 0);
  }

  void createPreMulSum() {
    ncclComm_t comm = pickComm();
    const ncclDataType_t type = pickType();
    const uint8_t how = in_.byte();
    scalars_[nScalars_ % 8] = in_.take<uint64_t>();
    void* scalar = how & 1 ? nullptr : &scalars_[nScalars_++ % 8];
    const auto residence = ncclScalarResidence_t(how & 2 ? ncclScalarHostImmediate
                                                         : ncclScalarDevice);
    ncclRedOp_t op;
    const ncclResult_t r = ncclRedOpCreatePreMulSum(how & 4 ? nullptr : &op, scalar, type,
                                                    residence, comm);
    checkResult(r);
    if (r == ncclSuccess && !(how & 4)) ops_.push_back({op, comm});
  }

  void destroyOp() {
    ncclComm_t comm = pickComm();
    const uint8_t b = in_.byte();
    if (b < 128 && !ops_.empty()) {
      const size_t i = b % ops_.size();
      const ncclResult_t r = ncclRedOpDestroy(ops_[i].first, comm);
      checkResult(r);
      if (r == ncclSuccess && comm == ops_[i].second) ops_.erase(ops_.begin() + long(i));
      return;
    }
    checkResult(ncclRedOpDestroy(ncclRedOp_t(b % 8), comm));
  }

  ncclConfig_t pickConfig(bool* use) {
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    const uint8_t b = in_.byte();
    *use = (b & 1) != 0;
    if (b & 2) cfg.blocking = in_.byte() % 3;
    if (b & 4) cfg.minCTAs = int(in_.take<int8_t>());
    if (b & 8) cfg.maxCTAs = int(in_.take<int8_t>());
    if (b & 16) {
      const std::string name = braid_fuzz::cString(in_.shortString(12));
      names_.push_back(name);
      cfg.netName = names_.back().c_str();
    }
    if (b & 32) cfg.splitShare = in_.byte() % 3;
    if (b & 64) cfg.size = in_.byte();  // a config of another (or no) version
    if (b & 128) cfg.collnetEnable = in_.byte() % 3;
    return cfg;
  }

  /// A nonblocking communicator's init finishes in the background: wait for it.
  void settle(ncclComm_t c) {
    ncclResult_t async = ncclInProgress;
    for (int i = 0; i < 2000 && async == ncclInProgress; ++i) {
      checkResult(ncclCommGetAsyncError(c, &async));
      if (async == ncclInProgress) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

  void adopt(ncclResult_t r, ncclComm_t c) {
    if ((r == ncclSuccess || r == ncclInProgress) && c != nullptr) {
      if (depth_ == 0) settle(c);
      live_.push_back(c);
      created_.push_back(c);
    }
  }

  void newComm() {
    if (int(created_.size()) >= kMaxNewComms) return;
    const uint8_t how = in_.byte();
    ncclComm_t c = nullptr;
    if (depth_ > 0) return;  // deferred inits: the handle appears at ncclGroupEnd
    switch (how % 4) {
      case 0: {
        const int ndev = how < 200 ? 1 : int(how % 3) - 1;  // 1, or -1 / 0 / 1
        const ncclResult_t r = ncclCommInitAll(how & 8 ? nullptr : &c, ndev, nullptr);
        checkResult(r);
        if (r == ncclSuccess && ndev == 1 && !(how & 8)) adopt(r, c);
        return;
      }
      case 1: {  // a bad unique id (wrong magic) or bad rank / nranks: refused early
        ncclUniqueId id;
        memset(&id, 0, sizeof(id));
        const std::string bytes = in_.shortString(sizeof(id.internal));
        memcpy(id.internal, bytes.data(), bytes.size());
        id.internal[0] = 'X';  // never Braid's magic: no bootstrap connects anywhere
        const int nranks = int(in_.take<int8_t>()), rank = int(in_.take<int8_t>());
        checkResult(ncclCommInitRank(&c, nranks, id, rank));
        return;
      }
      default: {  // split the base communicator (or any handle) with a fuzzed config
        ncclComm_t parent = pickComm();
        const int color = how & 16 ? NCCL_SPLIT_NOCOLOR : int(in_.take<int8_t>());
        const int key = int(in_.take<int8_t>());
        bool use = false;
        ncclConfig_t cfg = pickConfig(&use);
        const ncclResult_t r = ncclCommSplit(parent, color, key, &c, use ? &cfg : nullptr);
        checkResult(r);
        adopt(r, c);
        return;
      }
    }
  }

  void endComm(int how) {
    if (depth_ > 0 || created_.empty()) return;  // never with work of the group pending
    const size_t i = in_.byte() % created_.size();
    ncclComm_t c = created_[i];
    const ncclResult_t r = how == 0   ? ncclCommDestroy(c)
                           : how == 1 ? ncclCommAbort(c)
                                      : ncclCommFinalize(c);
    checkResult(r);
    if (how == 2) return;  // finalized: still to be destroyed
    created_.erase(created_.begin() + long(i));
    for (size_t k = 0; k < live_.size(); ++k)
      if (live_[k] == c) live_.erase(live_.begin() + long(k));
    for (size_t k = ops_.size(); k-- > 0;)
      if (ops_[k].second == c) ops_.erase(ops_.begin() + long(k));
    dead_.push_back(c);  // kept by the library's quarantine: a "destroyed" handle
  }

  void queries() {
    ncclComm_t comm = pickComm();
    int v = 0;
    ncclResult_t async;
    const uint8_t which = in_.byte();
    switch (which % 5) {
      case 0: checkResult(ncclCommCount(comm, which & 8 ? nullptr : &v)); break;
      case 1: checkResult(ncclCommUserRank(comm, which & 8 ? nullptr : &v)); break;
      case 2: checkResult(ncclCommCuDevice(comm, which & 8 ? nullptr : &v)); break;
      case 3: checkResult(ncclCommGetAsyncError(comm, which & 8 ? nullptr : &async)); break;
      default: FUZZ_CHECK(ncclGetErrorString(ncclResult_t(int(which) - 100)) != nullptr); break;
    }
  }

  void step() {
    const uint8_t op = in_.byte();
    switch (op % 20) {
      case 0: case 1: case 2: case 3: case 4: case 5: case 6: case 7: case 8:
        collective(op % 20);
        break;
      case 9: pointToPoint(false); break;
      case 10: pointToPoint(true); break;
      case 11:
        if (depth_ < 8) {
          checkResult(ncclGroupStart());
          ++depth_;
        }
        break;
      case 12:
        checkResult(ncclGroupEnd());
        if (depth_ > 0) --depth_;
        break;
      case 13: {
        ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
        checkResult(ncclGroupSimulateEnd(op & 32 ? nullptr : &sim));
        if (depth_ > 0 && !(op & 32)) --depth_;
        break;
      }
      case 14: createPreMulSum(); break;
      case 15: destroyOp(); break;
      case 16: newComm(); break;
      case 17: endComm(in_.byte() % 3); break;
      case 18: queries(); break;
      default: collective(8); break;
    }
  }

  FuzzInput& in_;
  int depth_ = 0;
  std::vector<ncclComm_t> live_, created_, dead_;
  std::vector<std::pair<ncclRedOp_t, ncclComm_t>> ops_;
  std::deque<std::string> names_;  // netName texts (a deque keeps them in place)
  uint64_t scalars_[8] = {};
  size_t nScalars_ = 0;
  alignas(64) unsigned char send_[kBufBytes];
  alignas(64) unsigned char recv_[kBufBytes];
};

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  // Bounded waits: a call that would wait for a peer fails within seconds, not minutes.
  setenv("BRAID_TIMEOUT_MS", "3000", 0);
  setenv("BRAID_BOOTSTRAP_TIMEOUT_MS", "3000", 0);
  setenv("BRAID_FLIGHT_RECORDER_DIR", "/tmp/braid-fuzz-flight-recorder", 0);
  unsetenv("NCCL_DEBUG_FILE");
  (void)baseComm();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static bool ready = (LLVMFuzzerInitialize(nullptr, nullptr), true);
  (void)ready;
  FuzzInput in(data, size);
  Program(in).run();
  return 0;
}
