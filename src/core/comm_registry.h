// The communicators this process made and has not freed: live ones and the retired
// shells in Comm::retire's quarantine. A handle from the user is looked up here before
// anything reads through it, so a handle that was never a communicator (or whose shell
// was freed long ago) is an error, never a read of foreign memory.
#pragma once

namespace braid {

/// Called by Comm's constructor and destructor.
void registerComm(const void* comm);
void unregisterComm(const void* comm);
/// Whether `handle` is a communicator made here and not freed (retired shells count:
/// checkComm then says "destroyed"). Cheap when the same handles come back (a thread's
/// recent answers are kept until any communicator is freed).
bool knownComm(const void* handle);

}  // namespace braid
