// Braid's built-in networks: each is an ncclNet_v11_t (include/braid/net_plugin.h),
// exactly what an external plugin provides, so the net transport (transports/net/)
// treats them and external plugins alike.
//
//   socketNet()  TCP                       transports/net_socket/  name "Socket"
//   ibNet()      libibverbs RC queue pairs transports/net_ib/      name "IB"
//   ucxNet()     UCX (UCP tag messages)    transports/net_ucx/     name "UCX"
//
// ibNet() and ucxNet() return nullptr where this build or this machine cannot offer
// them (library missing at run time: they load it with dlopen, as NCCL does).
#pragma once
#include <string>

#include "braid/net_plugin.h"

namespace braid {

const ncclNet_v11_t* socketNet();
const ncclNet_v11_t* ibNet();
const ncclNet_v11_t* ucxNet();

/// Optional Braid extension for built-in nets: a file descriptor that becomes readable
/// when a comm of this net may progress (the proxy then sleeps in poll() on it instead
/// of napping). Returns -1 when the comm has none. Registered by the net itself.
/// Called only when the proxy is about to sleep, so it may arm the descriptor (e.g.
/// request a completion event); it returns kNetPollReady when the comm can move now.
using NetPollFdFn = int (*)(void* comm);
constexpr int kNetPollReady = -2;
void registerNetPollFd(const ncclNet_v11_t* net, NetPollFdFn fn);
NetPollFdFn netPollFd(const ncclNet_v11_t* net);
/// Optional too: whether the peer of a comm with nothing in flight is gone (called
/// when its poll fd became readable; non-blocking). Sets *why when it returns true.
/// Lets a sender with nothing to send learn that its receiver died.
using NetPeerGoneFn = bool (*)(void* comm, std::string* why);
void registerNetPeerGone(const ncclNet_v11_t* net, NetPeerGoneFn fn);
NetPeerGoneFn netPeerGone(const ncclNet_v11_t* net);

}  // namespace braid
