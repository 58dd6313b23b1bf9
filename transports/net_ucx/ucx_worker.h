// UcxWorker: one UCP worker per net context (one ncclNet init() call, i.e. one
// communicator), shared by all of that context's comms, each comm matching its own
// messages by a per-connection tag.
//
// Why one worker per context rather than one per comm: a UCP worker opens every
// transport interface (TCP listening sockets, shared-memory FIFOs, memory pools), so a
// worker per comm would multiply those by the number of connections (2 per peer and
// channel); one worker per context also lets one progress call advance all comms.
// Separate contexts (communicators) get separate workers, so they never contend.
//
// Thread safety: the net contract lets setup calls (connect/accept/close) run on other
// threads while the proxy thread tests requests of other comms on the same worker. The
// worker runs in UCS_THREAD_MODE_SERIALIZED and every call on it, or on state its
// callbacks touch, holds mu() (uncontended: a few tens of ns per test()).
//
// Endpoints are per peer worker, not per comm: UCX pairs the k-th endpoint worker A
// creates to worker B with the k-th one B creates to A (one connection), so with an
// endpoint per comm, comms created concurrently would share connections at random and
// closing one comm would break another. One endpoint per peer worker (UcxPeer), shared
// by every comm between the two workers, pairs exactly. It lives as long as the worker
// (closing and re-creating endpoints between the same two workers in quick succession
// once tripped an assertion in UCX 1.13's tcp connection matching in our tests), unless
// it fails: a failed endpoint is closed with its last comm, and later comms to that
// peer get a new one.
//
// The UCP context is process-wide and reference-counted: the first worker creates it,
// the last one gone destroys it (so a later context re-reads UCX_TLS / BRAID_UCX_TLS).
#pragma once
#include "transports/net_ucx/ucx_api.h"

#if BRAID_HAVE_UCX
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "nccl.h"

namespace braid {

class UcxComm;
class UcxWorker;
struct UcxRequestSlots;

/// The endpoint to one peer worker and the comms using it (all under the worker lock).
/// Owned by the worker until it is destroyed, so nothing UCX calls back can dangle.
struct UcxPeer {
  UcxWorker* worker = nullptr;
  std::string address;  ///< the peer worker's address
  ucp_ep_h ep = nullptr;
  std::vector<UcxComm*> comms;
  bool failed = false;  ///< UCX reported it failed: closed with its last comm, not reused
};

class UcxWorker {
 public:
  /// Creates a worker (and the process's UCP context if none exists yet).
  static ncclResult_t create(const UcxApi* api, UcxWorker** out);
  ~UcxWorker();  ///< closes the endpoints kept for reuse (bounded), destroys the worker
  UcxWorker(const UcxWorker&) = delete;
  UcxWorker& operator=(const UcxWorker&) = delete;

  const UcxApi* api() const { return api_; }
  ucp_worker_h handle() const { return worker_; }
  std::mutex& mu() { return mu_; }
  /// This worker's packed UCP address, sent to peers in the handshake.
  const std::string& address() const { return address_; }
  /// A tag id no other comm receiving on this worker uses. Caller holds mu().
  uint32_t nextTagId() { return ++lastTagId_; }
  /// Attaches `comm` to the endpoint to the worker at `address`, creating it (with
  /// peer-failure handling: a failure marks every attached comm failed) on first use.
  /// Caller holds mu().
  ncclResult_t attach(const std::string& address, const char* peerName, UcxComm* comm,
                      UcxPeer** out);
  /// Detaches `comm`. When it was the last one on a failed endpoint, starts a forced
  /// close of it, returns true and sets *closeReq to the close request (nullptr if done
  /// at once) for the caller to wait on. Caller holds mu().
  bool detach(UcxPeer* peer, UcxComm* comm, void** closeReq);
  /// Keeps a closed comm's request slots that UCX still holds until the worker is
  /// destroyed (no callback can reach them after that). Caller holds mu().
  void adopt(std::unique_ptr<UcxRequestSlots> slots);

 private:
  explicit UcxWorker(const UcxApi* api) : api_(api) {}
  /// Forced close of a peer's endpoint; returns the request to wait for, or nullptr.
  void* closeEndpoint(UcxPeer* peer);
  static void onPeerError(void* arg, ucp_ep_h ep, ucs_status_t status);

  const UcxApi* api_;
  ucp_worker_h worker_ = nullptr;
  std::string address_;
  uint32_t lastTagId_ = 0;
  std::map<std::string, UcxPeer*> peers_;  ///< current endpoint per peer address
  std::vector<UcxPeer*> retired_;          ///< failed ones replaced in peers_
  std::vector<std::unique_ptr<UcxRequestSlots>> orphans_;
  std::mutex mu_;
};

}  // namespace braid
#endif  // BRAID_HAVE_UCX
