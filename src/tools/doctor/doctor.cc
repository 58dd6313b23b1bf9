// braid-doctor's diagnosis: see doctor.h.
#include "src/tools/doctor/doctor.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <map>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "src/diag/fingerprint.h"

namespace braid {
namespace {

bool pending(const FrRecord::Op& op) {
  return op.state == "queued" || op.state == "started" || op.state == "failed";
}

std::string peerName(int peer) { return peer == -2 ? "the switch" : "rank " + std::to_string(peer); }

/// What must agree across ranks for one collective.
std::string signature(const FrRecord::Op& op) {
  char buf[200];
  snprintf(buf, sizeof(buf), "%s|%" PRId64 "|%s|%s|%d", op.call.c_str(), op.count, op.type.c_str(),
           op.op.c_str(), op.root);
  return buf;
}

std::string seconds(int64_t us) {
  char buf[32];
  snprintf(buf, sizeof(buf), "%.1f s", double(us) / 1e6);
  return buf;
}

const FrRecord::Op* findColl(const FrRecord& r, int64_t collSeq) {
  for (const FrRecord::Op& op : r.ops)
    if (op.collSeq == collSeq) return &op;
  return nullptr;
}

/// The diagnosis of one communicator's records (sorted by rank).
void diagnoseComm(const std::vector<const FrRecord*>& recs, std::string* out) {
  const FrRecord& first = *recs.front();
  const int nranks = first.nranks;
  std::string& o = *out;
  o += "comm " + first.comm + (first.commName.empty() ? "" : " \"" + first.commName + "\"") +
       ": " + std::to_string(nranks) + " ranks";
  std::map<std::string, std::vector<int>> reasons;
  std::set<int> have;
  for (const FrRecord* r : recs) {
    reasons[r->reason].push_back(r->rank);
    have.insert(r->rank);
  }
  o += "; records from";
  bool firstReason = true;
  for (const auto& kv : reasons) {
    o += (firstReason ? " " : ", ") + rankList(kv.second) + " (" + kv.first + ")";
    firstReason = false;
  }
  o += "\n";
  std::vector<std::string> causes;

  std::vector<int> missing;
  for (int r = 0; r < nranks; ++r)
    if (!have.count(r)) missing.push_back(r);
  if (!missing.empty()) {
    o += "  " + rankList(missing) + ": no record (the process died, or it did not dump: "
         "`braid-info --dump PID` asks a live one)\n";
  }

  // Mismatches: one collective number, different calls.
  std::map<int64_t, std::map<std::string, std::vector<int>>> bySeq;
  for (const FrRecord* r : recs)
    for (const FrRecord::Op& op : r->ops)
      if (op.collSeq >= 0) bySeq[op.collSeq][signature(op)].push_back(r->rank);
  int mismatches = 0;
  for (const auto& kv : bySeq) {
    if (kv.second.size() < 2) continue;
    if (++mismatches > 3) continue;
    std::string line = "  MISMATCH at collective #" + std::to_string(kv.first) + ":";
    bool firstSig = true;
    for (const auto& sig : kv.second) {
      const FrRecord* r = nullptr;
      for (const FrRecord* x : recs)
        if (x->rank == sig.second.front()) r = x;
      const FrRecord::Op* op = findColl(*r, kv.first);
      line += std::string(firstSig ? " " : "; ") + rankList(sig.second) + " called " +
              describeOp(*op);
      firstSig = false;
    }
    o += line + "\n";
    if (causes.empty())
      causes.push_back("the ranks called different collectives at #" + std::to_string(kv.first) +
                       " (run with BRAID_CHECK=1 to stop there with an error)");
  }
  if (mismatches > 3) o += "  ... " + std::to_string(mismatches - 3) + " more mismatches\n";

  // The oldest collective some rank has not finished.
  int64_t oldest = INT64_MAX;
  for (const FrRecord* r : recs)
    for (const FrRecord::Op& op : r->ops)
      if (op.collSeq >= 0 && pending(op)) oldest = std::min(oldest, op.collSeq);
  if (oldest != INT64_MAX) {
    // Ranks inside it, by what they wait on; ranks that never called it; ranks done.
    struct Inside {
      std::vector<int> ranks;
      int64_t longestUs = 0;
      std::string detail;  ///< the first rank's
    };
    std::map<std::string, Inside> inside;
    std::vector<int> behind, finished;
    std::map<int, std::string> behindWhat;
    std::string call;
    for (const FrRecord* r : recs) {
      const FrRecord::Op* op = findColl(*r, oldest);
      if (op && pending(*op)) {
        if (call.empty()) call = callText(*op);
        std::string how = op->state;
        if (!op->algorithm.empty()) how += " (" + op->algorithm + ")";
        if (op->waiting) how += ", waiting on " + peerName(op->waitingOn);
        Inside& in = inside[how];
        in.ranks.push_back(r->rank);
        const int64_t since = op->startedUs ? op->startedUs : op->queuedUs;
        const int64_t until = op->endedUs ? op->endedUs : r->timeUs;
        in.longestUs = std::max(in.longestUs, until - since);
        if (in.detail.empty()) in.detail = op->detail;
      } else if (r->collectivesIssued <= oldest) {
        behind.push_back(r->rank);
        std::string what = "issued " + std::to_string(r->collectivesIssued) + " collective(s)";
        const FrRecord::Op* last = nullptr;
        for (const FrRecord::Op& x : r->ops)
          if (x.collSeq >= 0) last = &x;
        if (last) what += "; its last, " + describeOp(*last) + ", is " + last->state;
        for (const FrRecord::Op& x : r->ops)
          if (x.collSeq < 0 && pending(x)) {
            what += "; it is in " + describeOp(x) + " (" + x.state +
                    (x.waiting ? ", waiting on " + peerName(x.waitingOn) : std::string()) + ")";
            break;
          }
        behindWhat[r->rank] = what;
      } else {
        finished.push_back(r->rank);
      }
    }
    o += "  oldest unfinished collective: #" + std::to_string(oldest) + " " + call + "\n";
    for (const auto& kv : inside) {
      o += "    " + rankList(kv.second.ranks) + " in it: " + kv.first + " for up to " +
           seconds(kv.second.longestUs);
      if (!kv.second.detail.empty()) o += "; " + kv.second.detail;
      o += "\n";
    }
    for (int r : behind)
      o += "    rank " + std::to_string(r) + " never called it (" + behindWhat[r] + ")\n";
    if (!finished.empty()) o += "    " + rankList(finished) + " finished it\n";
    if (!missing.empty()) o += "    " + rankList(missing) + ": unknown (no record)\n";
    if (!behind.empty())
      causes.push_back(rankList(behind) + " did not call collective #" + std::to_string(oldest) +
                       " (" + call + ") that the others wait in");
    else if (!missing.empty())
      causes.push_back(rankList(missing) + " left no record: probably dead while the others "
                       "wait in collective #" + std::to_string(oldest));
    // Who is waited on most.
    std::map<int, int> waitedOn;
    for (const FrRecord* r : recs) {
      const FrRecord::Op* op = findColl(*r, oldest);
      if (op && op->waiting) ++waitedOn[op->waitingOn];
    }
    if (behind.empty() && missing.empty() && !waitedOn.empty()) {
      auto top = std::max_element(waitedOn.begin(), waitedOn.end(),
                                  [](const std::pair<const int, int>& a,
                                     const std::pair<const int, int>& b) { return a.second < b.second; });
      causes.push_back("ranks wait on " + peerName(top->first) + " in collective #" +
                       std::to_string(oldest) + "; look at its record and log");
    }
  }

  // Sends and receives not finished, and failures outside the oldest collective.
  for (const FrRecord* r : recs) {
    int shown = 0;
    for (const FrRecord::Op& op : r->ops) {
      const bool p2pPending = op.collSeq < 0 && pending(op);
      const bool otherFailure = op.state == "failed" && op.collSeq != oldest && op.collSeq >= 0;
      if (!p2pPending && !otherFailure) continue;
      if (++shown > 3) break;
      o += "  rank " + std::to_string(r->rank) + ": " + describeOp(op) + " " + op.state;
      if (op.waiting) o += ", waiting on " + peerName(op.waitingOn);
      if (!op.detail.empty()) o += ": " + op.detail;
      o += "\n";
    }
  }
  if (oldest == INT64_MAX && missing.empty() && mismatches == 0) {
    int64_t last = -1;
    for (const FrRecord* r : recs) last = std::max(last, r->collectivesIssued - 1);
    o += "  every recorded collective finished (last: #" + std::to_string(last) + ")\n";
  }
  for (const std::string& c : causes) o += "  => " + c + "\n";
}

}  // namespace

std::string describeOp(const FrRecord::Op& op) {
  return "#" + std::to_string(op.collSeq >= 0 ? op.collSeq : op.seq) + " " + callText(op);
}

std::string callText(const FrRecord::Op& op) {
  std::string out = op.call + "(count " + std::to_string(op.count) + ", " + op.type;
  if (!op.op.empty()) out += ", " + op.op;
  if (op.root >= 0) out += ", root " + std::to_string(op.root);
  if (op.peer >= 0) out += ", peer " + std::to_string(op.peer);
  return out + ")";
}

namespace {

/// Member `key` of object `o` as a string / an integer, or `def` where it is missing or
/// of another type (a record from another version still reads).
std::string str(const nlohmann::json& o, const char* key, const std::string& def = "") {
  auto it = o.find(key);
  return it != o.end() && it->is_string() ? it->get<std::string>() : def;
}
int64_t num(const nlohmann::json& o, const char* key, int64_t def = 0) {
  auto it = o.find(key);
  if (it == o.end() || !it->is_number()) return def;
  const double d = it->get<double>();
  return d >= -9.2e18 && d <= 9.2e18 ? it->get<int64_t>() : def;
}

}  // namespace

bool parseFlightRecord(const std::string& text, FrRecord* out, std::string* error) {
  nlohmann::json v;
  try {
    v = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    *error = std::string("not valid JSON: ") + e.what();
    return false;
  }
  if (!v.is_object() || str(v, "format") != "braid-flight-record") {
    *error = "not a Braid flight record (no \"format\": \"braid-flight-record\")";
    return false;
  }
  FrRecord r;
  r.reason = str(v, "reason");
  r.comm = str(v, "comm");
  r.commName = str(v, "comm_name");
  r.host = str(v, "host");
  r.rank = int(num(v, "rank", -1));
  r.nranks = int(num(v, "nranks", 0));
  r.pid = int(num(v, "pid", 0));
  r.timeUs = num(v, "time_us");
  r.timeoutMs = num(v, "timeout_ms");
  r.opsIssued = num(v, "ops_issued");
  r.collectivesIssued = num(v, "collectives_issued");
  if (r.rank < 0 || r.nranks <= 0 || r.rank >= r.nranks || r.nranks > (1 << 24)) {
    *error = "rank " + std::to_string(r.rank) + " of " + std::to_string(r.nranks) + " is not valid";
    return false;
  }
  auto entries = v.find("entries");
  if (entries != v.end() && entries->is_array()) {
    for (const nlohmann::json& e : *entries) {
      if (!e.is_object()) continue;
      FrRecord::Op op;
      op.seq = num(e, "seq");
      op.collSeq = num(e, "coll_seq", -1);
      op.call = str(e, "call");
      op.count = num(e, "count");
      op.type = str(e, "type");
      op.op = str(e, "op");
      op.root = int(num(e, "root", -1));
      op.peer = int(num(e, "peer", -1));
      op.state = str(e, "state");
      op.algorithm = str(e, "algorithm");
      op.detail = str(e, "detail");
      op.waiting = e.contains("waiting_on");
      op.waitingOn = int(num(e, "waiting_on"));
      op.queuedUs = num(e, "queued_us");
      op.startedUs = num(e, "started_us");
      op.endedUs = num(e, "ended_us");
      r.ops.push_back(op);
    }
  }
  *out = std::move(r);
  return true;
}

std::string diagnose(const std::vector<FrRecord>& records) {
  std::map<std::string, std::vector<const FrRecord*>> byComm;
  for (const FrRecord& r : records) byComm[r.comm].push_back(&r);
  std::string out;
  for (auto& kv : byComm) {
    auto& v = kv.second;
    std::sort(v.begin(), v.end(), [](const FrRecord* a, const FrRecord* b) {
      return a->rank != b->rank ? a->rank < b->rank : a->timeUs > b->timeUs;
    });
    // One record per rank: the newest.
    v.erase(std::unique(v.begin(), v.end(),
                        [](const FrRecord* a, const FrRecord* b) { return a->rank == b->rank; }),
            v.end());
    diagnoseComm(v, &out);
  }
  if (records.empty()) out = "no flight records\n";
  return out;
}

}  // namespace braid
