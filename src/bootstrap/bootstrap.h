// Bootstrap: the out-of-band TCP network ranks use to find each other and exchange
// setup data. The ncclUniqueId carries the root's address and a random 64-bit secret;
// every bootstrap connection presents the secret, and the root rejects (with a clear
// error on the connecting side) a rank whose id belongs to another job.
//
// Root: ncclGetUniqueId starts a root thread in the calling process (or, with
// NCCL_COMM_ID=ip:port, rank 0 starts it at that address during init). The root
// collects every rank's listen address, sends the table back, and exits.
// Ranks then talk directly: send/recv by (peer, tag); allGather and barrier on top.
#pragma once
#include <atomic>
#include <functional>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "nccl.h"

namespace braid {

/// The decoded content of an ncclUniqueId (128 bytes on the wire).
struct UniqueIdInfo {
  uint64_t secret = 0;
  bool fromEnv = false;  ///< made from NCCL_COMM_ID: rank 0 hosts the root
  // root address, as text "ip:port" ("[ip6]:port" for IPv6)
  char rootAddr[64] = {};
};

/// Fills `id` and, unless NCCL_COMM_ID is set, starts a root thread listening for it.
ncclResult_t bootstrapGetUniqueId(ncclUniqueId* id);
/// As bootstrapGetUniqueId, but always starts a fresh root thread in this process and
/// ignores NCCL_COMM_ID (used for the communicators ncclCommSplit/Shrink create).
ncclResult_t bootstrapNewRootId(ncclUniqueId* id);
/// Decodes an id; fails with ncclInvalidArgument (and a message) for garbage.
ncclResult_t bootstrapDecodeId(const ncclUniqueId& id, UniqueIdInfo* out);

struct BootstrapOptions {
  int timeoutMs = 120000;                         ///< per blocking wait
  const std::atomic<bool>* abortFlag = nullptr;   ///< waits give up when set
};

class Bootstrap {
 public:
  virtual ~Bootstrap() = default;
  /// Joins the job named by `id` as `rank` of `nranks`. Blocks until all ranks joined.
  /// Errors: ncclInvalidArgument for an id of another job (secret mismatch) or
  /// inconsistent nranks; ncclSystemError / ncclRemoteError for network failures or
  /// timeouts, always with a message naming what failed.
  static ncclResult_t create(const ncclUniqueId& id, int rank, int nranks,
                             const BootstrapOptions& opts, std::unique_ptr<Bootstrap>* out);

  virtual int rank() const = 0;
  virtual int nranks() const = 0;
  virtual uint64_t secret() const = 0;
  /// "ip" of the interface this rank's bootstrap listens on (for data sockets).
  virtual const char* localIp() const = 0;

  /// Point-to-point messages, matched by (peer, tag); a message from another peer or
  /// with another tag is kept until asked for. send() does not wait for the receiver.
  virtual ncclResult_t send(int peer, uint32_t tag, const void* data, size_t bytes) = 0;
  virtual ncclResult_t recv(int peer, uint32_t tag, void* data, size_t bytes) = 0;

  /// data holds nranks blocks of `bytes`; on entry block `rank()` is ours, on return
  /// all are filled.
  virtual ncclResult_t allGather(void* data, size_t bytes) = 0;
  virtual ncclResult_t barrier() = 0;

  /// A second abort flag the waits honour until reset to nullptr: a communicator being
  /// derived from this one (ncclCommSplit/Shrink) lends its own flag, so aborting the
  /// child stops the exchange it runs on the parent's bootstrap.
  virtual void setExtraAbortFlag(const std::atomic<bool>* flag) = 0;

  /// Tells whether a peer is known to be gone (true, with *why): a wait for that peer's
  /// message then fails with ncclRemoteError instead of running to the timeout. The
  /// communicator installs one once it knows its peers (processes on this machine).
  using PeerProbe = std::function<bool(int peer, std::string* why)>;
  virtual void setPeerProbe(PeerProbe probe) = 0;
};

}  // namespace braid
