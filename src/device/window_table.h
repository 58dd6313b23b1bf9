// WindowTable: a communicator's device windows as device code finds them by address
// (ncclDevComm.windowTable, walked by ncclFindWindow: nccl_device/core.h).
//
// One chain of 32-entry ncclDevCommWindowTable nodes in device memory per communicator,
// made with its first device window; an entry {base, size, window} per live window (the
// user's buffer and the ncclWindow_t handle), cleared when the window is deregistered.
// Every device communicator of the comm points at the chain's first node, so windows
// registered after ncclDevCommCreate are found too.
#pragma once
#include "nccl.h"

struct ncclDevCommWindowTable;

namespace braid {

struct Comm;

/// Adds window `handle` over [base, base + size) on `device` (the comm's).
ncclResult_t windowTableAdd(const Comm* c, int device, const void* base, size_t size,
                            ncclWindow_t handle);
/// Clears the entry of `handle` (no-op when absent).
void windowTableRemove(const Comm* c, ncclWindow_t handle);
/// The first node of c's chain (made empty when c has none yet).
ncclResult_t windowTableHead(const Comm* c, int device, ncclDevCommWindowTable** out);
/// Frees c's chain (communicator destruction).
void windowTableForget(const Comm* c);

}  // namespace braid
