// SwitchClient: one member's connection to its braid-switch (the collComm of the
// BraidSwitch collnet). connect() is blocking (the switch answers once the whole group
// is there); afterwards nothing blocks: post() queues an operation and sends what the
// socket takes, test() moves bytes both ways and says whether a request is complete.
//
// Operations go out in posting order as frames (wire.h): kOp, then the input as kData
// frames; results come back as kData frames written straight into the request's output
// pieces, then kDone. A kFail from the switch (a member went away), or the switch
// closing the connection, fails every request not yet complete.
#pragma once
#include <sys/uio.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "nccl.h"
#include "transports/collnet_switch/wire.h"

namespace braid {

class SwitchClient;

struct SwitchRequest {
  SwitchClient* owner = nullptr;
  uint64_t seq = 0;
  bool used = false;
  bool done = false;
  bool reported = false;  ///< its failure was logged already
  wire::OpDesc desc{};
  std::vector<iovec> in;   ///< input pieces (user memory), sent in order
  uint64_t inLen = 0;
  std::vector<iovec> out;  ///< output pieces, filled in order
  uint64_t outLen = 0;
  uint64_t outGot = 0;
};

class SwitchClient {
 public:
  static constexpr size_t kSlots = 64;  ///< requests that may be outstanding

  /// Connects to the switch at `addr`, says `hello` and waits (at most timeoutMs) for
  /// the group to form. On failure *why says what happened.
  static ncclResult_t connect(const std::string& addr, const Hello& hello, int timeoutMs,
                              std::unique_ptr<SwitchClient>* out, std::string* why);
  ~SwitchClient();

  /// Queues an operation. *request is null when kSlots requests are outstanding (try
  /// again after test() completed some).
  ncclResult_t post(const wire::OpDesc& d, const std::vector<iovec>& in, uint64_t inLen,
                    const std::vector<iovec>& out, uint64_t outLen, SwitchRequest** request,
                    std::string* why);
  /// done=1 and size = output bytes once `r` is complete (the slot is then free);
  /// ncclRemoteError / ncclSystemError with *why once the group or the switch failed.
  ncclResult_t test(SwitchRequest* r, int* done, int* size, std::string* why);
  /// Says goodbye (when nothing is in flight) and closes.
  void close();

  const std::string& address() const { return addr_; }
  void* user = nullptr;  ///< the owner's context (the collnet's comm)

 private:
  SwitchClient(int fd, std::string addr) : fd_(fd), addr_(std::move(addr)) {}
  void progress();
  void pumpSend();
  void pumpRecv();
  void fail(ncclResult_t code, std::string why);
  SwitchRequest* find(uint64_t seq);

  int fd_;
  std::string addr_;
  std::mutex mu_;
  SwitchRequest reqs_[kSlots];
  uint64_t postSeq_ = 0;
  bool failed_ = false;
  ncclResult_t failCode_ = ncclSuccess;
  std::string why_;
  // sending
  uint64_t txSeq_ = 0;       ///< the request being sent
  bool txOpSent_ = false;    ///< its kOp frame is out
  uint64_t txInSent_ = 0;    ///< input bytes of it sent
  bool txActive_ = false;    ///< a frame is partly sent
  bool txIsOp_ = false;
  unsigned char txHdr_[sizeof(wire::FrameHeader) + sizeof(wire::OpDesc)] = {};
  size_t txHdrLen_ = 0, txHdrSent_ = 0;
  uint64_t txDataLeft_ = 0;
  uint64_t txBytes_ = 0;     ///< bytes sent so far (all frames)
  // receiving
  wire::FrameHeader rxHdr_{};
  size_t rxHdrGot_ = 0;
  SwitchRequest* rxReq_ = nullptr;  ///< kData payload goes here
  uint64_t rxDataLeft_ = 0;
  std::string rxCtl_;               ///< kFail reason
  size_t rxCtlGot_ = 0;
};

}  // namespace braid
