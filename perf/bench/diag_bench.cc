// diag_bench: what the diagnosis features cost per operation on the CPU, without the
// noise of a collective around them: the flight recorder's three updates of one op
// (queued, started, done), and BRAID_CHECK's fingerprint of a group and its comparison
// across 8 and 64 ranks. The end-to-end figures (8 B and 1 MiB all-reduce with
// BRAID_CHECK=0/1) come from the perf suite: docs/reliability.md.
//
//   diag_bench --benchmark_min_time=0.2 --benchmark_repetitions=3
//       --benchmark_report_aggregates_only=true     (one command line)
#include <benchmark/benchmark.h>

#include <vector>

#include "src/exec/op.h"
#include "src/diag/fingerprint.h"
#include "src/diag/flight_recorder.h"

namespace {

braid::OpRecord allReduce(size_t count) {
  braid::OpRecord op;
  op.coll = braid::Coll::kAllReduce;
  op.call = "ncclAllReduce";
  op.count = count;
  op.type = ncclFloat;
  op.op = ncclSum;
  return op;
}

void BM_FlightRecorderOp(benchmark::State& state) {
  braid::FlightRecorder fr(256);
  braid::OpRecord op = allReduce(2);
  for (auto _ : state) {
    fr.queued(&op);
    fr.started(op.frSeq, "direct");
    fr.finished(op.frSeq, true);
  }
}
BENCHMARK(BM_FlightRecorderOp);

void BM_FingerprintCompare(benchmark::State& state) {
  const int nranks = int(state.range(0));
  braid::OpRecord op = allReduce(1024);
  op.collSeq = 5;
  std::vector<const braid::OpRecord*> ops{&op};
  std::vector<braid::CollFingerprint> all(static_cast<size_t>(nranks));
  for (auto _ : state) {
    const braid::CollFingerprint mine = braid::makeFingerprint(ops);
    for (auto& f : all) f = mine;
    benchmark::DoNotOptimize(braid::compareFingerprints(all));
  }
}
BENCHMARK(BM_FingerprintCompare)->Arg(8)->Arg(64);

}  // namespace

BENCHMARK_MAIN();
