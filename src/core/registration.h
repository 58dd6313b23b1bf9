// Registration: what ncclCommRegister / ncclCommWindowRegister record about a user
// buffer, and the lookup the executors and transports use to find it again.
//
// Host buffers need no registration for our transports; the record only says so.
// Device buffers keep their CUDA IPC handle and offset, so that a transport can map the
// buffer in a peer process (cudart::ipcOpenHandle + offset) and skip staging copies.
//
// Records live in a registry keyed by communicator (registration.cc), under one mutex;
// handles are validated against it before they are touched, so a stale or foreign
// handle is an error with a message, never a use after free.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "nccl.h"
#include "src/os/cuda_rt.h"

namespace braid {

struct Comm;
class LsaWindow;

/// What a window's owner told the other ranks about it (ncclCommWindowRegister is
/// collective: src/rma/rma.cc exchanges these).
struct WindowPeer {
  uint64_t addr = 0;  ///< the window's address in its owner's process
  uint64_t size = 0;
  MemKind kind = MemKind::kHost;
  int device = -1;
  bool hasIpc = false;
  unsigned char ipcHandle[kCudaIpcHandleBytes] = {};
  uint64_t ipcOffset = 0;
};

/// One registered range of a communicator.
struct Registration {
  Comm* comm = nullptr;
  void* buff = nullptr;
  size_t size = 0;
  bool window = false;  ///< made by ncclCommWindowRegister (else ncclCommRegister)
  int winFlags = 0;     ///< NCCL_WIN_* (windows only)
  MemKind kind = MemKind::kHost;
  int device = -1;      ///< the buffer's device (kDevice only)
  /// kDevice only, when CUDA could export the allocation: the CUDA IPC handle of the
  /// allocation holding buff, and buff's offset inside it. A peer maps the allocation
  /// with cudart::ipcOpenHandle and adds ipcOffset.
  bool hasIpc = false;
  unsigned char ipcHandle[kCudaIpcHandleBytes] = {};
  size_t ipcOffset = 0;
  /// Windows only, once exchanged with every rank (rmaExchangeWindow): index = rank.
  std::vector<WindowPeer> peers;
  bool exchanged = false;
  /// Windows only: what ncclCommWindowRegister hands out -- the record itself, or for
  /// device memory the device address of the window's ncclWindow_vidmem (lsa).
  void* handle = nullptr;
  /// Device windows: the device API's view (src/device/lsa_window.h), mapped after the
  /// exchange; null for host memory or without CUDA.
  std::shared_ptr<LsaWindow> lsa;
  /// A device communicator's resource window (ncclDevCommDestroy releases it, not
  /// ncclCommWindowDeregister).
  bool internal = false;

  /// Whether [p, p + bytes) lies inside this range.
  bool covers(const void* p, size_t bytes) const;
};

/// Records [buff, buff + size) for comm (arguments already validated): finds its
/// memory kind, and for device memory its IPC handle (a buffer CUDA cannot export, e.g.
/// managed memory, is still registered, without a handle). *out is the new record.
ncclResult_t addRegistration(Comm* comm, void* buff, size_t size, bool window, int winFlags,
                             Registration** out);

/// Removes a record made by addRegistration on comm with the same `window` kind.
/// A handle that is not such a live record (never registered, another communicator,
/// already deregistered) is ncclInvalidArgument with a message naming `call`.
ncclResult_t removeRegistration(Comm* comm, const void* handle, bool window, const char* call);

/// The record of comm covering [p, p + bytes) (the one with an IPC handle when several
/// do), or null. The pointer stays valid until that range is deregistered or the
/// communicator forgotten: as in NCCL, a buffer must not be deregistered while
/// operations that use it are in flight. Cheap (no lock) when nothing is registered.
const Registration* findRegistration(const Comm* comm, const void* p, size_t bytes);

/// The live window record `handle` (a Registration::handle) names (any communicator),
/// or null. Valid as long as findRegistration's answers are.
const Registration* findWindow(const void* handle);

/// Number of live records of comm (tests, diagnostics).
size_t registrationCount(const Comm* comm);

/// Drops every record of comm (at communicator destruction: NCCL frees a
/// communicator's registrations with it).
void forgetRegistrations(const Comm* comm);

}  // namespace braid
