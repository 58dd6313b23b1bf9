// gloo_bench: the Gloo side of the comparison (perf/compare/README.md), over Debian's
// libgloo-dev with the TCP transport on loopback (what PyTorch's CPU backend uses on one
// machine). Ranks are processes started by braidrun or mpirun; they meet through a
// gloo FileStore in the directory given with -S (new and empty for every launch).
//   braidrun -n 2 -- build/bin/gloo_bench -S /tmp/store -b 8 -e 256M -J out/gloo_n2_
// Algorithms (-A): all_reduce ring, bcube (gloo::allreduce) and ring_chunked,
// halving_doubling (the older classes, in-place only); reduce_scatter halving_doubling
// (in-place only); all_gather default (gloo::allgather); alltoall default; broadcast
// default and one_to_all (in-place only); reduce default.
// An algorithm that throws at some size is recorded with its message and skipped.
// gloo::AllgatherRing is left out: run repeatedly it returns wrong blocks now and then
// (peer blocks still NaN after the call), so its times would not be trustworthy.
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/alltoall.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/broadcast_one_to_all.h>
#include <gloo/math.h>
#include <gloo/reduce.h>
#include <gloo/reduce_scatter.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "perf/compare/bench.h"

namespace braid_compare {
namespace {

using ReduceFn = void (*)(void*, const void*, const void*, size_t);
const ReduceFn kSum = &gloo::sum<float>;

// Tags keep the driver's own traffic apart from the measured operations.
constexpr uint32_t kOpTag = 1;
constexpr uint32_t kBarrierTag = 1000;
constexpr uint32_t kSumTag = 1001;

/// Rank and size from the launcher's environment (braidrun/torchrun, Open MPI, PMI), as
/// perf/launch.cc reads them. False with a message when none is set or they are bad.
bool launcherRank(int* rank, int* size, std::string* error) {
  static const char* const kPairs[][2] = {{"RANK", "WORLD_SIZE"},
                                          {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
                                          {"PMI_RANK", "PMI_SIZE"}};
  for (const auto& p : kPairs) {
    const char* r = std::getenv(p[0]);
    const char* s = std::getenv(p[1]);
    if (r == nullptr || s == nullptr) continue;
    char* end1 = nullptr;
    char* end2 = nullptr;
    errno = 0;
    const long rv = std::strtol(r, &end1, 10);
    const long sv = std::strtol(s, &end2, 10);
    if (errno != 0 || *end1 != '\0' || *end2 != '\0' || sv < 1 || sv > 4096 || rv < 0 || rv >= sv) {
      *error = std::string("bad ") + p[0] + "/" + p[1] + " = '" + r + "'/'" + s + "'";
      return false;
    }
    *rank = static_cast<int>(rv);
    *size = static_cast<int>(sv);
    return true;
  }
  *rank = 0;
  *size = 1;
  return true;
}

class GlooBackend : public Backend {
 public:
  explicit GlooBackend(std::shared_ptr<gloo::Context> ctx) : ctx_(std::move(ctx)) {}
  int rank() const override { return ctx_->rank; }
  int size() const override { return ctx_->size; }
  void barrier() override {
    gloo::BarrierOptions o(ctx_);
    o.setTag(kBarrierTag);
    gloo::barrier(o);
  }
  void sumDoubles(double* v, size_t n) override {
    if (ctx_->size == 1) return;
    gloo::AllreduceOptions o(ctx_);
    o.setOutput(v, n);
    o.setReduceFunction(static_cast<ReduceFn>(&gloo::sum<double>));
    o.setTag(kSumTag);
    gloo::allreduce(o);
  }
  const std::shared_ptr<gloo::Context>& context() const { return ctx_; }

 private:
  std::shared_ptr<gloo::Context> ctx_;
};

using Ctx = std::shared_ptr<gloo::Context>;

Case allreduceNew(Ctx ctx, const std::string& name, gloo::AllreduceOptions::Algorithm alg,
                  bool inPlace) {
  Case cs;
  cs.coll = Coll::kAllReduce;
  cs.algorithm = name;
  cs.inPlace = inPlace;
  cs.prepare = [ctx, alg, inPlace](const Buffers& b, const Counts& k, int) {
    auto o = std::make_shared<gloo::AllreduceOptions>(ctx);
    o->setAlgorithm(alg);
    if (!inPlace) o->setInput(b.send, k.paramCount);
    o->setOutput(b.recv, k.paramCount);
    o->setReduceFunction(kSum);
    o->setTag(kOpTag);
    Op op;
    op.in = inPlace ? b.recv : b.send;
    op.out = b.recv;
    op.run = [o] { gloo::allreduce(*o); };
    return op;
  };
  return cs;
}

/// An old-API algorithm object built once per size and run repeatedly, in place on `buf`.
template <typename Algo>
Op oldApiOp(std::shared_ptr<Algo> algo, float* in, float* out) {
  Op op;
  op.in = in;
  op.out = out;
  op.run = [algo] { algo->run(); };
  return op;
}

int intCount(size_t n) {
  if (n > static_cast<size_t>(1) << 30) throw std::runtime_error("count too large for int");
  return static_cast<int>(n);
}

std::vector<Case> allCases(const Ctx& ctx, bool inPlaceToo) {
  using Alg = gloo::AllreduceOptions::Algorithm;
  std::vector<Case> out;
  // ---- all_reduce ----
  out.push_back(allreduceNew(ctx, "ring", Alg::RING, false));
  if (inPlaceToo) out.push_back(allreduceNew(ctx, "ring", Alg::RING, true));
  out.push_back(allreduceNew(ctx, "bcube", Alg::BCUBE, false));
  if (inPlaceToo) out.push_back(allreduceNew(ctx, "bcube", Alg::BCUBE, true));
  Case c;
  c.coll = Coll::kAllReduce;
  c.inPlace = true;
  c.algorithm = "ring_chunked";
  c.prepare = [ctx](const Buffers& b, const Counts& k, int) {
    std::vector<float*> ptrs{b.recv};
    return oldApiOp(
        std::make_shared<gloo::AllreduceRingChunked<float>>(ctx, ptrs, intCount(k.paramCount)),
        b.recv, b.recv);
  };
  out.push_back(c);
  c.algorithm = "halving_doubling";
  c.prepare = [ctx](const Buffers& b, const Counts& k, int) {
    std::vector<float*> ptrs{b.recv};
    return oldApiOp(
        std::make_shared<gloo::AllreduceHalvingDoubling<float>>(ctx, ptrs, intCount(k.paramCount)),
        b.recv, b.recv);
  };
  out.push_back(c);
  // ---- reduce_scatter: the whole input in one buffer, rank r's block left at its start ----
  c = Case();
  c.coll = Coll::kReduceScatter;
  c.inPlace = true;
  c.algorithm = "halving_doubling";
  c.prepare = [ctx](const Buffers& b, const Counts& k, int) {
    std::vector<float*> ptrs{b.send};
    std::vector<int> recvElems(static_cast<size_t>(ctx->size), intCount(k.paramCount));
    return oldApiOp(std::make_shared<gloo::ReduceScatterHalvingDoubling<float>>(
                        ctx, ptrs, intCount(k.count), recvElems),
                    b.send, b.send);
  };
  out.push_back(c);
  // ---- all_gather ----
  c = Case();
  c.coll = Coll::kAllGather;
  c.algorithm = "default";
  c.prepare = [ctx](const Buffers& b, const Counts& k, int) {
    auto o = std::make_shared<gloo::AllgatherOptions>(ctx);
    o->setInput(b.send, k.paramCount);
    o->setOutput(b.recv, k.count);
    o->setTag(kOpTag);
    Op op;
    op.in = b.send;
    op.out = b.recv;
    op.run = [o] { gloo::allgather(*o); };
    return op;
  };
  out.push_back(c);
  // ---- alltoall ----
  c = Case();
  c.coll = Coll::kAlltoall;
  c.algorithm = "default";
  c.prepare = [ctx](const Buffers& b, const Counts& k, int) {
    auto o = std::make_shared<gloo::AlltoallOptions>(ctx);
    o->setInput(b.send, k.count);
    o->setOutput(b.recv, k.count);
    o->setTag(kOpTag);
    Op op;
    op.in = b.send;
    op.out = b.recv;
    op.run = [o] { gloo::alltoall(*o); };
    return op;
  };
  out.push_back(c);
  // ---- broadcast ----
  c = Case();
  c.coll = Coll::kBroadcast;
  c.algorithm = "default";
  c.prepare = [ctx](const Buffers& b, const Counts& k, int root) {
    auto o = std::make_shared<gloo::BroadcastOptions>(ctx);
    if (ctx->rank == root) o->setInput(b.send, k.paramCount);
    o->setOutput(b.recv, k.paramCount);
    o->setRoot(root);
    o->setTag(kOpTag);
    Op op;
    op.in = b.send;
    op.out = b.recv;
    op.run = [o] { gloo::broadcast(*o); };
    return op;
  };
  out.push_back(c);
  c.algorithm = "one_to_all";
  c.inPlace = true;
  c.prepare = [ctx](const Buffers& b, const Counts& k, int root) {
    std::vector<float*> ptrs{b.recv};
    return oldApiOp(
        std::make_shared<gloo::BroadcastOneToAll<float>>(ctx, ptrs, k.paramCount, root, 0), b.recv,
        b.recv);
  };
  out.push_back(c);
  // ---- reduce ----
  c = Case();
  c.coll = Coll::kReduce;
  c.algorithm = "default";
  c.prepare = [ctx](const Buffers& b, const Counts& k, int root) {
    auto o = std::make_shared<gloo::ReduceOptions>(ctx);
    o->setInput(b.send, k.paramCount);
    o->setOutput(b.recv, k.paramCount);
    o->setRoot(root);
    o->setReduceFunction(kSum);
    o->setTag(kOpTag);
    Op op;
    op.in = b.send;
    op.out = b.recv;
    op.run = [o] { gloo::reduce(*o); };
    return op;
  };
  out.push_back(c);
  return out;
}

int benchMain(int argc, char** argv) {
  BenchOptions opt;
  int exitCode = 0;
  if (!parseBenchOptions(argc, argv, "gloo_bench", &opt, &exitCode)) return exitCode;
  int rank = 0, size = 1;
  std::string error;
  if (!launcherRank(&rank, &size, &error)) {
    std::fprintf(stderr, "gloo_bench: %s\n", error.c_str());
    return 2;
  }
  if (opt.store.empty()) {
    std::fprintf(stderr, "gloo_bench: -S <dir> (a new, empty rendezvous directory) is required\n");
    return 2;
  }
  if (opt.root >= size) {
    std::fprintf(stderr, "gloo_bench: root %d is not a rank (%d ranks)\n", opt.root, size);
    return 2;
  }
  std::shared_ptr<gloo::rendezvous::Context> ctx;
  try {
    gloo::transport::tcp::attr attr("127.0.0.1");
    auto dev = gloo::transport::tcp::CreateDevice(attr);
    gloo::rendezvous::FileStore store(opt.store);
    ctx = std::make_shared<gloo::rendezvous::Context>(rank, size);
    ctx->setTimeout(std::chrono::seconds(120));
    ctx->connectFullMesh(store, dev);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gloo_bench: rank %d: rendezvous in '%s' failed: %s\n", rank,
                 opt.store.c_str(), e.what());
    return 2;
  }
  if (rank == 0) std::printf("# gloo_bench: %d ranks, tcp transport on 127.0.0.1\n", size);
  std::vector<Case> cases;
  for (Case& cs : allCases(ctx, opt.inPlace)) {
    if (std::find(opt.colls.begin(), opt.colls.end(), cs.coll) == opt.colls.end()) continue;
    // -A takes "alg" (any collective) or "collective.alg".
    const std::string qualified = std::string(collName(cs.coll)) + "." + cs.algorithm;
    const auto& algs = opt.algorithms;
    if (!algs.empty() && std::find(algs.begin(), algs.end(), cs.algorithm) == algs.end() &&
        std::find(algs.begin(), algs.end(), qualified) == algs.end()) {
      continue;
    }
    cases.push_back(std::move(cs));
  }
  // Gloo's algorithms divide by the element count (SIGFPE at 0 elements per rank, e.g.
  // an 8-byte all_gather over 4 ranks): such sizes are recorded as errors, not run.
  for (Case& cs : cases) {
    cs.prepare = [inner = cs.prepare](const Buffers& b, const Counts& k, int root) {
      if (k.paramCount == 0) {
        throw std::runtime_error("0 elements per rank: not run (gloo divides by the count)");
      }
      return inner(b, k, root);
    };
  }
  if (cases.empty()) {
    std::fprintf(stderr, "gloo_bench: no case matches -C/-A\n");
    return 2;
  }
  GlooBackend be(ctx);
  return runBench(be, opt, cases, "gloo_bench", "gloo");
}

}  // namespace
}  // namespace braid_compare

int main(int argc, char** argv) { return braid_compare::benchMain(argc, argv); }
