// Other processes of this host, seen from here (Linux): who they are (start time, pid
// namespace), whether they still run, and copying to and from their memory. The lowest
// layer: it includes nothing of Braid's.
#pragma once
#include <sys/types.h>

#include <cstdint>

namespace braid {

/// Start time of a process (clock ticks since boot, /proc/<pid>/stat field 22), or 0
/// if unknown. Distinguishes a process from a later one that reuses its pid.
uint64_t processStartTime(pid_t pid);

/// Identity of this process's pid namespace (inode of /proc/self/ns/pid), 0 if unknown.
/// Pids of peers in another namespace (containers sharing /dev/shm) mean nothing here.
uint64_t pidNamespace();

/// Whether process `pid` still runs: it exists (kill(pid, 0) succeeds or says EPERM),
/// is not a zombie, and, if startTime != 0, is the same process that had that start
/// time.
bool processAlive(pid_t pid, uint64_t startTime);

/// Copies n bytes at address `remote` of process `pid` into dst (process_vm_readv;
/// partial transfers and EINTR are retried). Returns 0, or an errno (EFAULT when the
/// kernel moved nothing).
int readProcessMemory(pid_t pid, uint64_t remote, void* dst, uint64_t n);

/// Copies n bytes from src to address `remote` of process `pid` (process_vm_writev),
/// as readProcessMemory.
int writeProcessMemory(pid_t pid, uint64_t remote, const void* src, uint64_t n);

}  // namespace braid
