// ncclUniqueId: encoding, decoding and creation (which starts the root thread).
#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>

#include "src/bootstrap/bootstrap.h"
#include "src/bootstrap/root.h"
#include "src/bootstrap/unique_id.h"
#include "src/bootstrap/wire.h"
#include "src/config/params.h"
#include "src/config/error.h"
#include "src/net/socket.h"

namespace braid {
namespace {

static_assert(sizeof(wire::IdLayout) <= NCCL_UNIQUE_ID_BYTES, "id layout too large");
static_assert(sizeof(UniqueIdInfo::rootAddr) == wire::kAddrLen, "address length mismatch");

uint64_t mix64(uint64_t x) {  // splitmix64 finalizer
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

bool readUrandom(uint64_t* out) {
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ssize_t n;
  do {
    n = read(fd, out, sizeof(*out));
  } while (n < 0 && errno == EINTR);
  close(fd);
  return n == ssize_t(sizeof(*out));
}

}  // namespace

uint64_t bootstrapRandomSecret() {
  uint64_t s = 0;
  ssize_t n;
  do {
    n = getrandom(&s, sizeof(s), 0);
  } while (n < 0 && errno == EINTR);
  if (n == ssize_t(sizeof(s))) return s;
  if (readUrandom(&s)) return s;
  uint64_t t = uint64_t(std::chrono::high_resolution_clock::now().time_since_epoch().count());
  return mix64(t ^ (uint64_t(getpid()) << 32) ^ reinterpret_cast<uintptr_t>(&s));
}

uint64_t bootstrapSecretFromString(const std::string& text) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a, then mixed
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return mix64(h ^ 0x4272616964434944ull);  // "BraidCID"
}

void bootstrapEncodeId(const UniqueIdInfo& info, ncclUniqueId* id) {
  memset(id, 0, sizeof(*id));
  wire::IdLayout l{};
  l.magic = wire::kIdMagic;
  l.version = wire::kIdVersion;
  l.flags = info.fromEnv ? wire::kIdFromEnv : 0;
  l.secret = info.secret;
  memcpy(l.rootAddr, info.rootAddr, sizeof(l.rootAddr));
  l.rootAddr[sizeof(l.rootAddr) - 1] = '\0';
  memcpy(id->internal, &l, sizeof(l));
}

ncclResult_t bootstrapDecodeId(const ncclUniqueId& id, UniqueIdInfo* out) {
  if (!out) return setError(ncclInvalidArgument, nullptr, "bootstrapDecodeId: out is NULL");
  wire::IdLayout l;
  memcpy(&l, id.internal, sizeof(l));
  if (l.magic != wire::kIdMagic)
    return setError(ncclInvalidArgument, nullptr,
                    "ncclUniqueId is not a Braid unique id (bad magic 0x%08x): pass every rank "
                    "the id that ncclGetUniqueId filled, unchanged",
                    l.magic);
  if (l.version != wire::kIdVersion)
    return setError(ncclInvalidArgument, nullptr,
                    "ncclUniqueId has version %u but this Braid reads version %u: every "
                    "process must run the same Braid",
                    unsigned(l.version), unsigned(wire::kIdVersion));
  if (memchr(l.rootAddr, '\0', sizeof(l.rootAddr)) == nullptr)
    return setError(ncclInvalidArgument, nullptr,
                    "ncclUniqueId is corrupt: the root address is not terminated");
  SockAddr a;
  if (!SockAddr::parse(l.rootAddr, &a))
    return setError(ncclInvalidArgument, nullptr,
                    "ncclUniqueId is corrupt: root address '%s' is not ip:port", l.rootAddr);
  UniqueIdInfo info;
  info.secret = l.secret;
  info.fromEnv = (l.flags & wire::kIdFromEnv) != 0;
  memcpy(info.rootAddr, l.rootAddr, sizeof(info.rootAddr));
  *out = info;
  return ncclSuccess;
}

ncclResult_t bootstrapNewRootId(ncclUniqueId* id) {
  UniqueIdInfo info;
  SockAddr local;
  std::string ifname;
  BRAID_CHECK(pickLocalAddress(&local, &ifname));
  Socket listener;
  listener.setLabel("bootstrap root");
  SockAddr bound;
  BRAID_CHECK(listener.listen(local, &bound));
  const std::string text = bound.toString();
  if (text.size() >= sizeof(info.rootAddr))
    return setError(ncclInternalError, nullptr, "ncclGetUniqueId: root address %s is too long",
                    text.c_str());
  info.secret = bootstrapRandomSecret();
  info.fromEnv = false;
  memcpy(info.rootAddr, text.c_str(), text.size() + 1);
  const int64_t timeoutMs = param::kBootstrapTimeoutMs.get();
  BRAID_CHECK(bootstrapStartRoot(std::move(listener), info.secret,
                                 int(std::min<int64_t>(timeoutMs, INT32_MAX))));
  bootstrapEncodeId(info, id);
  BRAID_INFO(kLogBootstrap, "bootstrap: root listening on %s (%s)", text.c_str(), ifname.c_str());
  return ncclSuccess;
}

ncclResult_t bootstrapGetUniqueId(ncclUniqueId* id) {
  if (!id) return setError(ncclInvalidArgument, nullptr, "ncclGetUniqueId: uniqueId is NULL");
  UniqueIdInfo info;
  const std::string commId = param::kCommId.get();
  if (!commId.empty()) {
    // Every process derives the same id from the string; rank 0 hosts the root.
    SockAddr a;
    if (!SockAddr::parse(commId, &a) || a.port() <= 0)
      return setError(ncclInvalidArgument, nullptr,
                      "ncclGetUniqueId: NCCL_COMM_ID='%s' is not ip:port (or [ip6]:port) "
                      "with a nonzero port",
                      commId.c_str());
    const std::string text = a.toString();
    if (text.size() >= sizeof(info.rootAddr))
      return setError(ncclInvalidArgument, nullptr, "ncclGetUniqueId: NCCL_COMM_ID='%s' is too long",
                      commId.c_str());
    info.secret = bootstrapSecretFromString(text);
    info.fromEnv = true;
    memcpy(info.rootAddr, text.c_str(), text.size() + 1);
    bootstrapEncodeId(info, id);
    BRAID_INFO(kLogBootstrap, "bootstrap: unique id from NCCL_COMM_ID=%s", text.c_str());
    return ncclSuccess;
  }

  return bootstrapNewRootId(id);
}

}  // namespace braid
