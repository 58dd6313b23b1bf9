// Checks of the bootstrap's wire messages, apart from the sockets that carry them, so
// that they can be tested (and fuzzed: tests/fuzz/fuzz_bootstrap_wire.cc) on bytes alone.
// The root (root.cc) checks each RootHello; a joining rank (bootstrap.cc) checks the
// root's rank table; every rank checks the MsgHeader of each message it receives.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "src/bootstrap/wire.h"
#include "src/net/socket.h"

namespace braid {
namespace wire {

/// The root's verdict on a complete hello (its magic already checked): kOk to admit it,
/// else kSecretMismatch, kBadRank, kBadNranks or kDuplicateRank. `jobNranks` is the
/// nranks of the ranks admitted so far (-1: none yet, the hello then sets it) and
/// `byRank[r]` >= 0 where rank r already joined (size jobNranks; empty when none yet).
RootStatus checkHello(const RootHello& h, uint64_t secret, int jobNranks,
                      const std::vector<int>& byRank);

/// What a rank-to-rank header means for its connection.
enum class HeaderVerdict {
  kAccept,         ///< a message of h.bytes bytes from rank h.from follows
  kForeignSecret,  ///< another job's (or a stranger's) connection: close it
  kMalformed,      ///< sender out of range, changed mid-connection, or too large
};

/// Checks a header read from a connection; `knownFrom` is the rank the connection's
/// earlier headers named (-1: this is its first).
HeaderVerdict checkMsgHeader(const MsgHeader& h, uint64_t secret, int nranks, int knownFrom);

/// Why a rank table from the root was refused.
enum class TableVerdict { kOk, kBadSize, kBadAddress };

/// Reads the root's table of `nranks` listen addresses (kAddrLen bytes each) into
/// *peers. Each entry is NUL-terminated in place (its last byte is overwritten). On
/// kBadAddress, *badRank is the first entry that is not ip:port.
TableVerdict parseRankTable(std::vector<char>* body, int nranks, std::vector<SockAddr>* peers,
                            int* badRank);

}  // namespace wire
}  // namespace braid
