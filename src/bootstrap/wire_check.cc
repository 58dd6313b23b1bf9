#include "src/bootstrap/wire_check.h"

namespace braid {
namespace wire {

RootStatus checkHello(const RootHello& h, uint64_t secret, int jobNranks,
                      const std::vector<int>& byRank) {
  if (h.secret != secret) return kSecretMismatch;
  if (h.nranks < 1 || h.rank < 0 || h.rank >= h.nranks) return kBadRank;
  if (jobNranks < 0) return kOk;  // the first rank sets the job's size
  if (h.nranks != jobNranks) return kBadNranks;
  if (size_t(h.rank) >= byRank.size() || byRank[size_t(h.rank)] >= 0) return kDuplicateRank;
  return kOk;
}

HeaderVerdict checkMsgHeader(const MsgHeader& h, uint64_t secret, int nranks, int knownFrom) {
  if (h.secret != secret) return HeaderVerdict::kForeignSecret;
  if (h.from < 0 || h.from >= nranks || (knownFrom >= 0 && h.from != knownFrom) ||
      h.bytes > kMaxMessageBytes)
    return HeaderVerdict::kMalformed;
  return HeaderVerdict::kAccept;
}

TableVerdict parseRankTable(std::vector<char>* body, int nranks, std::vector<SockAddr>* peers,
                            int* badRank) {
  if (nranks < 0 || body->size() != size_t(nranks) * kAddrLen) return TableVerdict::kBadSize;
  peers->assign(size_t(nranks), SockAddr());
  for (int p = 0; p < nranks; ++p) {
    char* a = &(*body)[size_t(p) * kAddrLen];
    a[kAddrLen - 1] = '\0';
    if (!SockAddr::parse(a, &(*peers)[size_t(p)])) {
      if (badRank) *badRank = p;
      return TableVerdict::kBadAddress;
    }
  }
  return TableVerdict::kOk;
}

}  // namespace wire
}  // namespace braid
