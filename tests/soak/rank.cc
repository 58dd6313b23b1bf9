#include "tests/soak/rank.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "tests/soak/ops.h"

namespace soak {
namespace {

/// Reports a failed call once; the caller then gives up on the communicator.
bool failed(ncclResult_t r, const char* what, int rank, uint64_t iter, ncclComm_t comm,
            RankStats* st) {
  if (r == ncclSuccess) return false;
  st->errors.fetch_add(1);
  std::fprintf(stderr, "soak: ERROR rank %d iteration %llu %s: %s - %s\n", rank,
               (unsigned long long)iter, what, ncclGetErrorString(r),
               ncclGetLastError(comm));
  return true;
}

class RankLoop {
 public:
  RankLoop(const Config& cfg, int rank, RankStats* st)
      : cfg_(cfg), rank_(rank), st_(st), rng_(cfg.seed) {}

  void run(const ncclUniqueId& id) {
    ncclComm_t comm = nullptr;
    if (failed(ncclCommInitRank(&comm, cfg_.nranks, id, rank_), "ncclCommInitRank", rank_, 0,
               nullptr, st_))
      return;
    const auto t0 = std::chrono::steady_clock::now();
    bool ok = warmUp(comm);
    st_->warm.store(1);
    for (iter_ = 0; ok; ++iter_) {
      if (iter_ == 0) continue;  // iteration 0 was the warm-up
      st_->iterations.store(iter_);
      if (iter_ % 16 == 15) {
        const double el =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        const bool want = (cfg_.seconds > 0 && el >= cfg_.seconds) ||
                          (cfg_.iterations > 0 && iter_ >= cfg_.iterations);
        bool stop = false;
        ok = agreeToStop(comm, want, &stop);
        if (!ok || stop) break;
      }
      if (cfg_.rotateEvery && iter_ > 0 && iter_ % cfg_.rotateEvery == 0) {
        ok = rotate(&comm);
        if (!ok) break;
      }
      ok = iteration(comm);
    }
    if (ok) {
      failed(ncclCommDestroy(comm), "ncclCommDestroy", rank_, iter_, nullptr, st_);
    } else {
      ncclCommAbort(comm);
    }
    st_->finished.store(1);
  }

 private:
  /// Every collective at its largest size, with every root and send/recv shift, and the
  /// reductions once more with PreMulSum, so that what the library keeps per
  /// communicator exists before sampling starts: most collectives run on the flag board
  /// and make no FIFO connections, so the connections a random op needs (a root's tree,
  /// a send/recv pair, a PreMulSum plan) would otherwise appear one by one during the run.
  bool warmUp(ncclComm_t comm) {
    Limits lim;
    lim.maxBlockBytes = cfg_.maxBlockBytes;
    const int n = cfg_.nranks;
    for (int c = 0; c < int(Coll::kCount); ++c) {
      OpSpec s;
      s.coll = Coll(c);
      s.type = ncclFloat32;
      const bool nBlocks = s.coll == Coll::kAllGather || s.coll == Coll::kReduceScatter ||
                           s.coll == Coll::kAllToAll || s.coll == Coll::kGather ||
                           s.coll == Coll::kScatter;
      const bool rooted = s.coll == Coll::kBroadcast || s.coll == Coll::kReduce ||
                          s.coll == Coll::kGather || s.coll == Coll::kScatter;
      const bool reduces = s.coll == Coll::kAllReduce || s.coll == Coll::kReduce ||
                           s.coll == Coll::kReduceScatter;
      s.count = lim.maxBlockBytes / 4;  // as randomOp's largest
      if (nBlocks) s.count = std::min(s.count, 4 * lim.maxBlockBytes / (size_t(n) * 4));
      s.count = std::max<size_t>(1, s.count);
      const int variants = s.coll == Coll::kSendRecv ? std::max(1, n - 1) : rooted ? n : 1;
      for (int v = 0; v < variants; ++v)
        for (int op : {0, kPreMulSum}) {
          if (op == kPreMulSum && !reduces) continue;
          s.op = op;
          s.root = rooted ? v : 0;
          s.shift = n > 1 ? (s.coll == Coll::kSendRecv ? v + 1 : 1) : 0;
          if (!runOps(comm, n, rank_, {s}, false, false)) return false;
        }
    }
    return true;
  }

  /// Replaces *comm by a split of it with every rank in one color (same ranks), then
  /// destroys the old communicator.
  bool rotate(ncclComm_t* comm) {
    ncclComm_t next = nullptr;
    if (failed(ncclCommSplit(*comm, 0, rank_, &next, nullptr), "ncclCommSplit (rotate)", rank_,
               iter_, *comm, st_))
      return false;
    int gotR = -1;
    if (next == nullptr || ncclCommUserRank(next, &gotR) != ncclSuccess || gotR != rank_) {
      st_->wrong.fetch_add(1);
      std::fprintf(stderr, "soak: WRONG rank %d: rotated communicator has rank %d\n", rank_,
                   gotR);
      return false;
    }
    if (failed(ncclCommDestroy(*comm), "ncclCommDestroy (rotate)", rank_, iter_, next, st_))
      return false;
    *comm = next;
    st_->rotations.fetch_add(1);
    return true;
  }

  /// All-reduce (max) of each rank's wish to stop: all stop at the same iteration.
  bool agreeToStop(ncclComm_t comm, bool want, bool* stop) {
    int32_t in = want ? 1 : 0, out = -1;
    st_->ops.fetch_add(1);
    if (failed(ncclAllReduce(&in, &out, 1, ncclInt32, ncclMax, comm, nullptr), "stop check",
               rank_, iter_, comm, st_))
      return false;
    if (out != 0 && out != 1) {
      st_->wrong.fetch_add(1);
      std::fprintf(stderr, "soak: WRONG rank %d stop check got %d\n", rank_, int(out));
    }
    *stop = out != 0;
    return true;
  }

  bool iteration(ncclComm_t comm) {
    const uint64_t u = uniform(rng_, 0, 99);
    Limits lim;
    lim.maxBlockBytes = cfg_.maxBlockBytes;
    if (u < 75) return runOps(comm, cfg_.nranks, rank_, {randomOp(rng_, cfg_.nranks, lim)},
                              false, false);
    if (u < 93) {  // several collectives (and rings) in one group
      lim.preMulSum = false;
      std::vector<OpSpec> specs(uniform(rng_, 2, 4));
      for (auto& s : specs) s = randomOp(rng_, cfg_.nranks, lim);
      return runOps(comm, cfg_.nranks, rank_, specs, true, false);
    }
    if (u < 97) {  // send/recv rings with different shifts in one group
      std::vector<OpSpec> specs(uniform(rng_, 1, 3));
      for (auto& s : specs) {
        s = randomOp(rng_, cfg_.nranks, lim);
        s.coll = Coll::kSendRecv;
        s.inPlace = false;
      }
      return runOps(comm, cfg_.nranks, rank_, specs, true, false);
    }
    return split(comm, lim);
  }

  /// Runs specs (one, or several in a group) on comm as rank `rank` of `n`; checks all.
  bool runOps(ncclComm_t comm, int n, int rank, const std::vector<OpSpec>& specs, bool group,
              bool child) {
    std::vector<std::unique_ptr<OpRun>> runs;
    for (const auto& s : specs) runs.push_back(std::make_unique<OpRun>(s, rank, n));
    if (cfg_.verbose && rank == 0)
      for (const auto& s : specs)
        std::fprintf(stderr, "soak: iteration %llu%s%s: %s\n", (unsigned long long)iter_,
                     group ? " group" : "", child ? " child" : "", describe(s).c_str());
    if (group && failed(ncclGroupStart(), "ncclGroupStart", rank_, iter_, comm, st_))
      return false;
    bool ok = true;
    for (auto& r : runs) {
      if (failed(r->enqueue(comm), describe(r->spec()).c_str(), rank_, iter_, comm, st_)) {
        ok = false;
        break;
      }
    }
    if (group) ok = !failed(ncclGroupEnd(), "ncclGroupEnd", rank_, iter_, comm, st_) && ok;
    if (!ok) return false;
    if (cfg_.corruptIteration != 0 && iter_ == cfg_.corruptIteration && rank_ == 1 && !child) runs.front()->corrupt();
    const std::string where = "iteration " + std::to_string(iter_) + (child ? " (child)" : "");
    for (auto& r : runs) {
      if (failed(r->release(comm), "ncclRedOpDestroy", rank_, iter_, comm, st_)) return false;
      if (r->check(where) != 0) st_->wrong.fetch_add(1);
    }
    st_->ops.fetch_add(runs.size());
    if (child) st_->childOps.fetch_add(runs.size());
    if (group) st_->groups.fetch_add(1);
    return true;
  }

  /// Splits comm with random colors and keys (every rank draws all ranks' choices),
  /// checks the child's size and rank, runs a few ops on it and destroys it.
  bool split(ncclComm_t comm, const Limits& lim) {
    const int n = cfg_.nranks;
    const int k = int(uniform(rng_, 1, 3));
    std::vector<int> color(static_cast<size_t>(n)), key(static_cast<size_t>(n));
    for (int q = 0; q < n; ++q) {
      const int c = int(uniform(rng_, 0, uint64_t(k)));
      color[size_t(q)] = c == k ? NCCL_SPLIT_NOCOLOR : c;
      key[size_t(q)] = int(uniform(rng_, 0, 3));
    }
    const uint64_t childSeed = rng_();
    const int mine = color[size_t(rank_)];
    std::vector<int> members;  // child rank order: by key, ties by parent rank
    for (int q = 0; q < n; ++q)
      if (mine != NCCL_SPLIT_NOCOLOR && color[size_t(q)] == mine) members.push_back(q);
    std::stable_sort(members.begin(), members.end(),
                     [&](int a, int b) { return key[size_t(a)] < key[size_t(b)]; });
    ncclComm_t child = nullptr;
    if (failed(ncclCommSplit(comm, mine, key[size_t(rank_)], &child, nullptr), "ncclCommSplit",
               rank_, iter_, comm, st_))
      return false;
    st_->splits.fetch_add(1);
    if (mine == NCCL_SPLIT_NOCOLOR) {
      if (child != nullptr) {
        st_->wrong.fetch_add(1);
        std::fprintf(stderr, "soak: WRONG rank %d: NOCOLOR split returned a communicator\n",
                     rank_);
        ncclCommDestroy(child);
      }
      return true;
    }
    const int cn = int(members.size());
    const int cr = int(std::find(members.begin(), members.end(), rank_) - members.begin());
    int gotN = -1, gotR = -1;
    if (child == nullptr || ncclCommCount(child, &gotN) != ncclSuccess ||
        ncclCommUserRank(child, &gotR) != ncclSuccess || gotN != cn || gotR != cr) {
      st_->wrong.fetch_add(1);
      std::fprintf(stderr, "soak: WRONG rank %d iteration %llu: split child is rank %d of %d, "
                   "want %d of %d\n", rank_, (unsigned long long)iter_, gotR, gotN, cr, cn);
      if (child) ncclCommDestroy(child);
      return child != nullptr;
    }
    // Every member of this child draws the same child ops.
    Rng crng(childSeed ^ (uint64_t(mine) + 1) * 0x9e3779b97f4a7c15ull);
    const int nops = int(uniform(crng, 1, 5));
    bool ok = true;
    for (int i = 0; i < nops && ok; ++i) {
      const bool group = uniform(crng, 0, 3) == 0;
      Limits cl = lim;
      cl.preMulSum = !group;
      std::vector<OpSpec> specs(group ? 2 : 1);
      for (auto& s : specs) s = randomOp(crng, cn, cl);
      ok = runOps(child, cn, cr, specs, group, true);
    }
    if (!ok) {
      ncclCommAbort(child);
      return false;
    }
    return !failed(ncclCommDestroy(child), "ncclCommDestroy(child)", rank_, iter_, comm, st_);
  }

  const Config& cfg_;
  const int rank_;
  RankStats* st_;
  Rng rng_;
  uint64_t iter_ = 0;
};

}  // namespace

void runRank(const Config& cfg, int rank, const ncclUniqueId& id, RankStats* stats) {
  setLiveBytesCounter(&stats->liveBytes);
  RankLoop(cfg, rank, stats).run(id);
  stats->finished.store(1);
}

}  // namespace soak
