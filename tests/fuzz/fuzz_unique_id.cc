// Fuzzes the unique id and NCCL_COMM_ID: bootstrapDecodeId on 128 arbitrary bytes (an id
// that came over the user's own channel), and ip:port texts through SockAddr::parse and
// ncclGetUniqueId with NCCL_COMM_ID set (which derives the id without starting a root).
//
// Input: one mode byte, then the id bytes (mode 0) or the address text (mode 1).
// Oracles: a decoded id re-encodes to one that decodes the same; a parsed address prints
// as text that parses to the same address; an id made from NCCL_COMM_ID decodes.
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string>

#include "nccl.h"
#include "src/bootstrap/bootstrap.h"
#include "src/bootstrap/unique_id.h"
#include "src/bootstrap/wire.h"
#include "src/net/socket.h"
#include "tests/fuzz/fuzz_input.h"

using namespace braid;
using braid_fuzz::FuzzInput;

namespace {

bool sameAddr(const SockAddr& a, const SockAddr& b) {
  return a.toString() == b.toString() && a.port() == b.port();
}

void fuzzDecode(const std::string& bytes) {
  ncclUniqueId id;
  memset(&id, 0, sizeof(id));
  memcpy(id.internal, bytes.data(), bytes.size() < sizeof(id) ? bytes.size() : sizeof(id));
  // The root address inside must not reach the resolver (see addrAvoidsResolver).
  const char* addr = id.internal + offsetof(wire::IdLayout, rootAddr);
  if (memchr(addr, '\0', wire::kAddrLen) && !braid_fuzz::addrAvoidsResolver(addr)) return;
  UniqueIdInfo info;
  const ncclResult_t r = bootstrapDecodeId(id, &info);
  FUZZ_CHECK(r == ncclSuccess || r == ncclInvalidArgument);
  if (r != ncclSuccess) {
    FUZZ_CHECK(ncclGetLastError(nullptr)[0] != '\0');
    return;
  }
  FUZZ_CHECK(memchr(info.rootAddr, '\0', sizeof(info.rootAddr)) != nullptr);
  ncclUniqueId again;
  bootstrapEncodeId(info, &again);
  UniqueIdInfo info2;
  FUZZ_CHECK(bootstrapDecodeId(again, &info2) == ncclSuccess);
  FUZZ_CHECK(info2.secret == info.secret && info2.fromEnv == info.fromEnv);
  FUZZ_CHECK(strcmp(info2.rootAddr, info.rootAddr) == 0);
}

void fuzzCommId(const std::string& raw) {
  const std::string text = braid_fuzz::cString(raw);
  if (!braid_fuzz::addrAvoidsResolver(text)) return;
  SockAddr a;
  const bool ok = SockAddr::parse(text, &a);
  if (ok) {
    FUZZ_CHECK(a.port() >= 0 && a.port() <= 65535);
    SockAddr b;
    const std::string printed = a.toString();
    FUZZ_CHECK(SockAddr::parse(printed, &b));
    FUZZ_CHECK(sameAddr(a, b));
  }
  // ncclGetUniqueId with NCCL_COMM_ID: an empty value would start a root thread instead.
  if (text.empty()) return;
  setenv("NCCL_COMM_ID", text.c_str(), 1);
  ncclUniqueId id;
  const ncclResult_t r = ncclGetUniqueId(&id);
  unsetenv("NCCL_COMM_ID");
  FUZZ_CHECK(r == ncclSuccess || r == ncclInvalidArgument);
  if (r != ncclSuccess) {
    FUZZ_CHECK(!ok || a.port() == 0 || a.toString().size() >= 64);
    FUZZ_CHECK(ncclGetLastError(nullptr)[0] != '\0');
    return;
  }
  FUZZ_CHECK(ok);
  UniqueIdInfo info;
  FUZZ_CHECK(bootstrapDecodeId(id, &info) == ncclSuccess);
  FUZZ_CHECK(info.fromEnv);
  FUZZ_CHECK(info.secret == bootstrapSecretFromString(a.toString()));
  // Every process derives the same id from the same text.
  setenv("NCCL_COMM_ID", text.c_str(), 1);
  ncclUniqueId id2;
  FUZZ_CHECK(ncclGetUniqueId(&id2) == ncclSuccess);
  unsetenv("NCCL_COMM_ID");
  FUZZ_CHECK(memcmp(&id, &id2, sizeof(id)) == 0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzInput in(data, size);
  const uint8_t mode = in.byte();
  if (mode & 1)
    fuzzCommId(in.rest());
  else
    fuzzDecode(in.rest());
  return 0;
}
