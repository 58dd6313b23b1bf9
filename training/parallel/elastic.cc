// Elastic recovery (see elastic.h).
#include "training/parallel/elastic.h"

#include <algorithm>
#include <stdexcept>

namespace braid {
namespace train {
namespace {

std::string ranksText(const std::vector<int>& v) {
  std::string s;
  for (int x : v) s += (s.empty() ? "" : ", ") + std::to_string(x);
  return s;
}

double msSince(double t0) { return (now() - t0) * 1000; }

}  // namespace

void elasticCheck(const TrainerConfig& config) {
  if (config.mesh.tp != 1 || config.mesh.pp != 1)
    throw std::invalid_argument(
        "--elastic needs pure data parallelism (tp = pp = 1), not " + config.mesh.describe() +
        ": a dead rank of a tensor- or pipeline-parallel group takes a part of the model that "
        "no survivor holds");
}

template <class T>
ElasticEvent elasticRecover(const std::string& error, double errorWallMs, ElasticRun<T>& run,
                            std::FILE* out) {
  const double t0 = now();
  std::unique_ptr<ProcessGroup>& world = *run.world;
  std::unique_ptr<Trainer<T>>& trainer = *run.trainer;
  ElasticMembership& members = *run.members;
  const int me = members.originalRank();
  ElasticEvent ev;
  ev.error = error;
  ev.failedAtStep = trainer ? trainer->stepsDone() + 1 : 0;
  ev.fromSize = world->size();
  std::fprintf(out, "elastic: [rank %d] a collective failed during step %lld at wall ms %.0f: %s\n", me,
               static_cast<long long>(ev.failedAtStep), errorWallMs, error.c_str());
  std::fflush(out);

  // Stop everything that talks to the old communicators: revoke them (peers still
  // waiting in a collective fail now instead of at their timeout), join the
  // checkpoint writer (file I/O only), destroy the Trainer (aborting its groups).
  if (trainer) trainer->abandon();
  world->abandon();
  run.checkpoints->abandon();
  trainer.reset();

  // Agree on who failed, then shrink. Another death during the shrink: agree again.
  ElasticDecision d;
  for (int attempt = 1;; ++attempt) {
    const double ta = now();
    d = members.agree();
    ev.agreeMs += msSince(ta);
    const double ts = now();
    try {
      std::unique_ptr<ProcessGroup> smaller = world->shrink(d.excludeCurrent);
      if (smaller->size() != int(d.survivors.size()))
        throw std::runtime_error("elastic: the shrunk communicator has " + std::to_string(smaller->size()) +
                                 " ranks, the decision " + std::to_string(d.survivors.size()));
      world = std::move(smaller);  // the old one is aborted
      ev.shrinkMs = msSince(ts);
      break;
    } catch (const DistError& e) {
      std::fprintf(out, "elastic: [rank %d] ncclCommShrink failed (attempt %d): %s\n", me, attempt, e.what());
      std::fflush(out);
      if (attempt >= 3) throw;
    }
  }
  members.adopt(d);
  ev.failed.insert(ev.failed.end(), d.failed.begin(), d.failed.end());
  ev.toSize = world->size();
  for (int f : d.failed) {
    ev.why += (ev.why.empty() ? "" : "; ") + std::string("rank ") + std::to_string(f) + ": " + d.why[f];
    const auto lb = d.lastBeatMs.find(f);
    if (lb != d.lastBeatMs.end() && lb->second > 0) ev.detectMs = std::max(ev.detectMs, errorWallMs - lb->second);
  }
  std::fprintf(out,
               "elastic: [rank %d] the survivors agree: rank%s %s failed (%s)%s; detected %.0f ms after "
               "its last heartbeat, agreement %.0f ms\n",
               me, d.failed.size() == 1 ? "" : "s", ranksText(d.failed).c_str(), ev.why.c_str(),
               d.coordinator ? ", decided here" : "", ev.detectMs, ev.agreeMs);
  std::fprintf(out, "elastic: [rank %d] shrank the communicator from %d to %d ranks in %.0f ms; now rank %d of %d\n",
               me, ev.fromSize, ev.toSize, ev.shrinkMs, world->rank(), world->size());
  std::fflush(out);

  // The same model and global batch on fewer data-parallel replicas.
  TrainerConfig& c = *run.config;
  c.mesh.dp = world->size();
  if (c.batch % (int64_t(c.mesh.dp) * c.micros) != 0)
    throw std::invalid_argument("elastic: the global batch " + std::to_string(c.batch) +
                                " is not divisible by dp * microbatches = " +
                                std::to_string(c.mesh.dp * c.micros) +
                                " after the shrink; choose a batch every surviving DP size divides");
  const double tr = now();
  trainer = std::make_unique<Trainer<T>>(c, *world, *run.data);
  run.checkpoints->setWorld(world.get(), "e" + std::to_string(d.epoch));
  // Every survivor has joined its checkpoint writer and the old rank 0 committed what
  // it committed before the Trainer's collectives above: the directory is settled.
  std::string dir;
  const int64_t latest = latestCheckpoint(run.checkpoints->root(), &dir);
  const double lo = world->allReduceScalar(double(latest), ReduceOp::kMin);
  const double hi = world->allReduceScalar(double(latest), ReduceOp::kMax);
  if (lo != hi)
    throw std::runtime_error("elastic: the survivors see different newest checkpoints (steps " +
                             std::to_string(int64_t(lo)) + " to " + std::to_string(int64_t(hi)) +
                             ") in " + run.checkpoints->root() + ": is the directory shared?");
  if (latest >= 0) {
    trainer->load(dir);
    ev.resumedFrom = trainer->stepsDone();
    ev.checkpoint = dir;
  }
  ev.reloadMs = msSince(tr);
  ev.totalMs = msSince(t0);
  if (latest >= 0)
    std::fprintf(out, "elastic: [rank %d] reloaded %s (step %lld) re-sharded for dp=%d in %.0f ms; "
                      "resuming at step %lld (recovery took %.0f ms)\n",
                 me, dir.c_str(), static_cast<long long>(ev.resumedFrom), c.mesh.dp, ev.reloadMs,
                 static_cast<long long>(ev.resumedFrom + 1), ev.totalMs);
  else
    std::fprintf(out, "elastic: [rank %d] no complete checkpoint in %s: restarting from step 1 with dp=%d "
                      "(recovery took %.0f ms)\n",
                 me, run.checkpoints->root().c_str(), c.mesh.dp, ev.totalMs);
  std::fflush(out);
  return ev;
}

template ElasticEvent elasticRecover<float>(const std::string&, double, ElasticRun<float>&, std::FILE*);
template ElasticEvent elasticRecover<double>(const std::string&, double, ElasticRun<double>&, std::FILE*);

}  // namespace train
}  // namespace braid
