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

/// The built-in CollNet (transports/collnet_switch/, name "BraidSwitch"): in-network
/// reductions through a braid-switch daemon (src/tools/switch_server/), found at BRAID_SWITCH;
/// 0 devices when that is unset.
const ncclCollNet_v11_t* switchCollNet();
/// Gives a BraidSwitch context (from its init()) the job secret its connects present
/// to the switch (the collnet ABI has no room for it). Called right after init().
void switchCollNetSetJobSecret(void* ctx, uint64_t secret);

/// Optional Braid extensions a built-in net registers for its table (the ncclNet ABI
/// has no room for them; external plugins have none and get the plain behaviour).
struct NetExtensions {
  /// A file descriptor that becomes ready (*events: what to poll for) when a comm may
  /// progress (the proxy then sleeps in poll() on it instead of napping); -1 when the
  /// comm has none (the proxy naps). Called only when the proxy is about to sleep, so
  /// it may arm the descriptor (e.g. request a completion event); returns
  /// kNetPollReady when the comm can move now.
  int (*pollFd)(void* comm, short* events) = nullptr;
  /// Whether the peer of a comm with nothing in flight is gone (called when its poll fd
  /// became readable; non-blocking); sets *why when it returns true. Lets a sender with
  /// nothing to send learn that its receiver died.
  bool (*peerGone)(void* comm, std::string* why) = nullptr;
  /// Frees what connect() keeps between its calls for `handle` (a socket, queue pairs)
  /// when the connect is given up before it returned a comm: ncclNet has no call for
  /// that, so plugins leak it (as under NCCL).
  void (*abandonConnect)(void* handle) = nullptr;
};
constexpr int kNetPollReady = -2;
void registerNetExtensions(const ncclNet_v11_t* net, const NetExtensions& ext);
/// The extensions registered for `net` (all null if none).
NetExtensions netExtensions(const ncclNet_v11_t* net);

}  // namespace braid
