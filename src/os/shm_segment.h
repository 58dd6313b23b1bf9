// Named POSIX shared-memory segments (/dev/shm): made by one process, mapped by the
// others of the host by name, unlinked once all have mapped them. One helper for the
// flag board, the shm transport's FIFOs and the one-sided signal counters. Depends on
// the logging base only.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace braid {

/// Creates segment `name` ("/..."; it must not exist: O_EXCL) of `bytes` and maps it
/// read-write at *base. With `reserve` its pages are allocated now (posix_fallocate), so
/// that a full /dev/shm fails here with ENOSPC instead of SIGBUS at a first touch.
/// Returns 0, or an errno with nothing left behind (the name is unlinked again, unless
/// it existed before: EEXIST).
int createSegment(const char* name, size_t bytes, bool reserve, void** base);

/// Maps the existing segment `name` read-write at *base, `bytes` long. With `checkSize`
/// the segment must be exactly that long (EINVAL otherwise). Returns 0 or an errno.
int openSegment(const char* name, size_t bytes, bool checkSize, void** base);

/// A process that may have made segments of a communicator, named
/// "/braid-<pid>-<comm hash>-r<rank>-..." (the shm transport's and the flag board's).
struct SegmentOwner {
  int pid;
  int rank;
  uint64_t pidNamespace;  ///< the owner's (pidNamespace()); its pid means nothing elsewhere
};

/// Removes the segments of communicator `commHash` whose owners died before unlinking
/// them (only owners of this pid namespace that no longer run). Returns how many.
int removeDeadOwnersSegments(uint64_t commHash, const std::vector<SegmentOwner>& owners);

}  // namespace braid
