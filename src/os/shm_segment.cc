#include "src/os/shm_segment.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "src/config/log.h"
#include "src/os/process.h"

namespace braid {

int createSegment(const char* name, size_t bytes, bool reserve, void** base) {
  *base = nullptr;
  const int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) return errno;
  int err = 0;
  if (ftruncate(fd, off_t(bytes)) != 0) err = errno;
  if (!err && reserve) err = posix_fallocate(fd, 0, off_t(bytes));
  void* p = MAP_FAILED;
  if (!err) {
    p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) err = errno;
  }
  close(fd);
  if (err) {
    shm_unlink(name);
    return err;
  }
  *base = p;
  return 0;
}

int openSegment(const char* name, size_t bytes, bool checkSize, void** base) {
  *base = nullptr;
  const int fd = shm_open(name, O_RDWR, 0600);
  if (fd < 0) return errno;
  int err = 0;
  if (checkSize) {
    struct stat st;
    if (fstat(fd, &st) != 0) err = errno;
    else if (uint64_t(st.st_size) != uint64_t(bytes)) err = EINVAL;
  }
  void* p = MAP_FAILED;
  if (!err) {
    p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) err = errno;
  }
  close(fd);
  if (err) return err;
  *base = p;
  return 0;
}

int removeDeadOwnersSegments(uint64_t commHash, const std::vector<SegmentOwner>& owners) {
  std::vector<std::string> prefixes;
  const uint64_t ns = pidNamespace();
  for (const SegmentOwner& o : owners) {
    if (o.pid <= 0 || o.pid == int(getpid())) continue;
    if (ns == 0 || o.pidNamespace != ns) continue;  // its pid means nothing here
    if (processAlive(pid_t(o.pid), 0)) continue;
    char prefix[64];
    std::snprintf(prefix, sizeof prefix, "braid-%d-%016llx-r%d-", o.pid,
                  (unsigned long long)commHash, o.rank);
    prefixes.push_back(prefix);
  }
  if (prefixes.empty()) return 0;
  int removed = 0;
  DIR* d = opendir("/dev/shm");
  if (!d) return 0;
  std::vector<std::string> names;
  while (dirent* e = readdir(d))
    for (const std::string& pre : prefixes)
      if (std::strncmp(e->d_name, pre.c_str(), pre.size()) == 0) names.push_back(e->d_name);
  closedir(d);
  for (const std::string& n : names)
    if (shm_unlink(("/" + n).c_str()) == 0) {
      ++removed;
      BRAID_INFO(kLogShm, "shm: removed %s, left by a peer that died", n.c_str());
    }
  return removed;
}

}  // namespace braid
