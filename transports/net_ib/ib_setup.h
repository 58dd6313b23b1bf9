// Connection setup of the IB net: the listen handle, the listening comm and the
// non-blocking connect()/accept() state machines. Both sides talk over a TCP socket
// (NCCL_SOCKET_IFNAME picks the address): the sender sends its ConnInfo with the
// handle's token, the receiver checks the token, brings its QPs up and answers with
// its own ConnInfo, the sender brings its QPs up and sends one "ready" byte; only then
// does accept() return, so the receiver never writes to a QP that is not yet ready.
#pragma once
#include "transports/net_ib/ibv_api.h"
#ifdef BRAID_HAVE_IBVERBS
#include <cstdint>
#include <memory>
#include <vector>

#include "nccl.h"
#include "src/net/socket.h"
#include "transports/net_ib/ib_comm.h"

namespace braid {
namespace ib {

/// What listen() writes into the caller's handle (NCCL_NET_HANDLE_MAXSIZE bytes).
struct IbHandle {
  uint64_t magic;
  uint64_t token;    ///< random; the proof that a connecting peer got the handle
  uint32_t addrLen;  ///< bytes of sockaddr_in / sockaddr_in6 in addr
  uint8_t addr[28];
};
static_assert(sizeof(IbHandle) <= 128, "the handle must fit NCCL_NET_HANDLE_MAXSIZE");

class IbListenComm {
 public:
  IbListenComm(const IbDevice* dev, int trafficClass);
  ~IbListenComm();
  IbListenComm(const IbListenComm&) = delete;
  IbListenComm& operator=(const IbListenComm&) = delete;

  /// Opens the listening socket and fills the handle.
  ncclResult_t listen(IbHandle* handle);
  /// One non-blocking step; *comm stays null until a connection is complete.
  ncclResult_t accept(IbComm** comm);

 private:
  struct Pending;
  /// Advances one pending connection: true when it is over, with *comm set (done),
  /// *res set (a local failure the caller must see) or neither (a peer dropped).
  bool step(Pending* p, IbComm** comm, ncclResult_t* res);

  const IbDevice* dev_;
  int trafficClass_;
  uint64_t token_ = 0;
  Socket listener_;
  std::vector<std::unique_ptr<Pending>> pending_;
};

/// One non-blocking step of connecting to `handle` from device `dev`. The state of an
/// unfinished connection is kept here, keyed by the handle's token, so the caller may
/// pass the same handle again in any buffer.
ncclResult_t ibConnectStep(const IbDevice* dev, int trafficClass, const IbHandle* handle,
                           IbComm** comm);
/// Drops the unfinished connection to `handle` (an IbHandle), if there is one.
void abandonConnect(void* handle);

}  // namespace ib
}  // namespace braid
#endif  // BRAID_HAVE_IBVERBS
