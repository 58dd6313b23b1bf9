// Fuzzes the bootstrap's wire checks (src/bootstrap/wire_check.h) the way the sockets
// feed them: a root reading a series of RootHello messages, a rank reading a stream of
// rank-to-rank messages (MsgHeader + payload) and a rank reading the root's rank table.
//
// Input: a mode byte, then per mode (every struct as raw native bytes):
//   0  secret(8), then per hello: a flag byte (bit 0: use the job's secret) + RootHello
//   1  secret(8), nranks(1), then per message: a flag byte + MsgHeader + payload
//   2  nranks(1), a flag byte (bit 0: pad/cut the rest to nranks entries), the table
// Oracles: the root admits each rank of [0, nranks) once and never more than nranks; an
// accepted header names a rank in range, the connection's rank and a bounded size; a
// table is accepted only at its exact size and its addresses print and parse back.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "src/bootstrap/wire.h"
#include "src/bootstrap/wire_check.h"
#include "src/net/socket.h"
#include "tests/fuzz/fuzz_input.h"

using namespace braid;
using braid_fuzz::FuzzInput;

namespace {

constexpr int kMaxSimRanks = 1 << 16;  // the root allocates a slot per rank

void fuzzHellos(FuzzInput& in) {
  const uint64_t secret = in.take<uint64_t>();
  int nranks = -1, members = 0;
  std::vector<int> byRank;
  while (!in.empty() && (nranks < 0 || members < nranks)) {
    const uint8_t flags = in.byte();
    wire::RootHello h = in.take<wire::RootHello>();
    if (flags & 1) h.secret = secret;
    if (flags & 2) h.magic = wire::kHelloMagic;
    if (h.magic != wire::kHelloMagic) continue;  // readHello drops the connection
    const wire::RootStatus st = wire::checkHello(h, secret, nranks, byRank);
    switch (st) {
      case wire::kOk:
        FUZZ_CHECK(h.secret == secret);
        FUZZ_CHECK(h.rank >= 0 && h.rank < h.nranks);
        if (nranks < 0) {
          if (h.nranks > kMaxSimRanks) return;
          nranks = h.nranks;
          byRank.assign(size_t(nranks), -1);
        }
        FUZZ_CHECK(h.nranks == nranks);
        FUZZ_CHECK(byRank[size_t(h.rank)] < 0);
        byRank[size_t(h.rank)] = members++;
        break;
      case wire::kSecretMismatch:
        FUZZ_CHECK(h.secret != secret);
        break;
      case wire::kBadRank:
        FUZZ_CHECK(h.nranks < 1 || h.rank < 0 || h.rank >= h.nranks);
        break;
      case wire::kBadNranks:
        FUZZ_CHECK(nranks >= 0 && h.nranks != nranks);
        break;
      case wire::kDuplicateRank:
        FUZZ_CHECK(nranks >= 0 && byRank[size_t(h.rank)] >= 0);
        break;
      default:
        FUZZ_CHECK(st == wire::kOk);  // no other status may come back
    }
  }
  FUZZ_CHECK(nranks < 0 || members <= nranks);
}

void fuzzMessages(FuzzInput& in) {
  const uint64_t secret = in.take<uint64_t>();
  const int nranks = 1 + in.byte() % 16;
  int from = -1;
  while (!in.empty()) {
    const uint8_t flags = in.byte();
    wire::MsgHeader h = in.take<wire::MsgHeader>();
    if (flags & 1) h.secret = secret;
    if (flags & 2) h.bytes %= 64;  // a payload the input can hold
    const wire::HeaderVerdict v = wire::checkMsgHeader(h, secret, nranks, from);
    if (v == wire::HeaderVerdict::kForeignSecret) {
      FUZZ_CHECK(h.secret != secret);
      return;  // the connection is closed
    }
    if (v == wire::HeaderVerdict::kMalformed) {
      FUZZ_CHECK(h.secret == secret);
      FUZZ_CHECK(h.from < 0 || h.from >= nranks || (from >= 0 && h.from != from) ||
                 h.bytes > wire::kMaxMessageBytes);
      return;
    }
    FUZZ_CHECK(v == wire::HeaderVerdict::kAccept);
    FUZZ_CHECK(h.secret == secret && h.from >= 0 && h.from < nranks);
    FUZZ_CHECK(from < 0 || h.from == from);
    FUZZ_CHECK(h.bytes <= wire::kMaxMessageBytes);
    from = h.from;
    if (h.bytes > in.left()) return;  // the peer closed in the middle of the payload
    const std::string payload = in.bytes(size_t(h.bytes));
    FUZZ_CHECK(payload.size() == h.bytes);
  }
}

void fuzzTable(FuzzInput& in) {
  const int nranks = in.byte() % 33;
  const bool exact = in.flag();
  std::string rest = in.rest();
  if (exact) rest.resize(size_t(nranks) * wire::kAddrLen, '\0');
  std::vector<char> body(rest.begin(), rest.end());
  if (body.size() == size_t(nranks) * wire::kAddrLen) {
    for (int p = 0; p < nranks; ++p) {
      const std::string entry(&body[size_t(p) * wire::kAddrLen], wire::kAddrLen - 1);
      if (!braid_fuzz::addrAvoidsResolver(braid_fuzz::cString(entry))) return;
    }
  }
  std::vector<SockAddr> peers;
  int bad = -1;
  const wire::TableVerdict v = wire::parseRankTable(&body, nranks, &peers, &bad);
  if (v == wire::TableVerdict::kBadSize) {
    FUZZ_CHECK(body.size() != size_t(nranks) * wire::kAddrLen);
    return;
  }
  FUZZ_CHECK(body.size() == size_t(nranks) * wire::kAddrLen);
  if (v == wire::TableVerdict::kBadAddress) {
    FUZZ_CHECK(bad >= 0 && bad < nranks);
    FUZZ_CHECK(body[size_t(bad) * wire::kAddrLen + wire::kAddrLen - 1] == '\0');
    return;
  }
  FUZZ_CHECK(v == wire::TableVerdict::kOk);
  FUZZ_CHECK(peers.size() == size_t(nranks));
  for (const SockAddr& a : peers) {
    SockAddr b;
    FUZZ_CHECK(SockAddr::parse(a.toString(), &b));
    FUZZ_CHECK(b.toString() == a.toString());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzInput in(data, size);
  switch (in.byte() % 3) {
    case 0: fuzzHellos(in); break;
    case 1: fuzzMessages(in); break;
    default: fuzzTable(in); break;
  }
  return 0;
}
