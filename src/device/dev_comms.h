// The device communicators (ncclDevCommCreate, dev_comm_api.cc) a communicator made,
// released with it when the program did not call ncclDevCommDestroy.
#pragma once

namespace braid {

struct Comm;

/// Frees the resource buffers of c's remaining device communicators (their resource
/// windows go with c's registrations).
void forgetDevComms(const Comm* c);

}  // namespace braid
