#include "src/os/process.h"

#include <errno.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace braid {
namespace {

/// Reads /proc/<pid>/stat into buf; returns the text after the command name (whose
/// closing ')' is the last one: the name may hold spaces and ')'), or nullptr.
const char* readProcStat(pid_t pid, char (&buf)[1024]) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", int(pid));
  FILE* f = std::fopen(path, "r");
  if (!f) return nullptr;
  size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  const char* p = std::strrchr(buf, ')');
  return p ? p + 1 : nullptr;
}

/// State letter of /proc/<pid>/stat ('R', 'S', 'Z', ...), or 0 if unknown.
char processState(pid_t pid) {
  char buf[1024];
  const char* p = readProcStat(pid, buf);
  if (!p) return 0;
  while (*p == ' ') ++p;
  return *p;
}

/// One direction of the cross-process copy loop.
template <class Call>
int copyLoop(char* local, uint64_t remote, uint64_t n, Call call) {
  while (n > 0) {
    struct iovec l = {local, size_t(n)};
    struct iovec r = {reinterpret_cast<void*>(uintptr_t(remote)), size_t(n)};
    const ssize_t moved = call(&l, &r);
    if (moved < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (moved == 0) return EFAULT;
    local += moved;
    remote += uint64_t(moved);
    n -= uint64_t(moved);
  }
  return 0;
}

}  // namespace

uint64_t processStartTime(pid_t pid) {
  char buf[1024];
  const char* p = readProcStat(pid, buf);
  if (!p) return 0;
  // Fields after the name: state is field 3, starttime field 22.
  for (int field = 3; field < 22; ++field) {
    while (*p == ' ') ++p;
    while (*p && *p != ' ') ++p;
    if (!*p) return 0;
  }
  return std::strtoull(p, nullptr, 10);
}

uint64_t pidNamespace() {
  struct stat st;
  if (::stat("/proc/self/ns/pid", &st) != 0) return 0;
  return uint64_t(st.st_ino);
}

bool processAlive(pid_t pid, uint64_t startTime) {
  if (pid <= 0) return true;  // unknown: cannot tell
  if (kill(pid, 0) != 0 && errno != EPERM) return false;
  char st = processState(pid);
  if (st == 'Z' || st == 'X' || st == 'x') return false;  // exited, not yet reaped
  if (startTime != 0) {
    uint64_t now = processStartTime(pid);
    if (now != 0 && now != startTime) return false;  // pid reused by another process
  }
  return true;
}

int readProcessMemory(pid_t pid, uint64_t remote, void* dst, uint64_t n) {
  return copyLoop(static_cast<char*>(dst), remote, n, [pid](iovec* l, iovec* r) {
    return process_vm_readv(pid, l, 1, r, 1, 0);
  });
}

int writeProcessMemory(pid_t pid, uint64_t remote, const void* src, uint64_t n) {
  return copyLoop(const_cast<char*>(static_cast<const char*>(src)), remote, n,
                  [pid](iovec* l, iovec* r) { return process_vm_writev(pid, l, 1, r, 1, 0); });
}

}  // namespace braid
