#include "tests/device_emu/emu_case.h"

#include <cstring>
#include <random>
#include <vector>

#include "tests/sim/simulator.h"
#include "src/reduce/float_types.h"
#include "src/reduce/reducer.h"
#include "tests/device_emu/emu_harness.h"

namespace braid {
namespace emutest {
namespace {

constexpr size_t kGuard = 64;

struct Sizes {
  uint64_t sendElems, recvElems;
  uint64_t sendOff, recvOff, storeElems;  // in-place layout
};

Sizes sizesFor(Coll c, uint64_t count, int n, int rank) {
  const uint64_t all = count * uint64_t(n), mine = count * uint64_t(rank);
  switch (c) {
    case Coll::kAllGather:
    case Coll::kGather: return {count, all, mine, 0, all};
    case Coll::kReduceScatter:
    case Coll::kScatter: return {all, count, 0, mine, all};
    case Coll::kAllToAll: return {all, all, 0, 0, all};
    default: return {count, count, 0, 0, count};
  }
}

ncclRedOp_t ncclOpOf(Op op) {
  switch (op) {
    case Op::kProd: return ncclProd;
    case Op::kMax: return ncclMax;
    case Op::kMin: return ncclMin;
    case Op::kAvg: return ncclAvg;
    case Op::kPreMulSum: return static_cast<ncclRedOp_t>(ncclNumOps);  // a user op
    default: return ncclSum;
  }
}

/// Rank r's PreMulSum scalar, as one element of `type`.
uint64_t scalarBits(ncclDataType_t type, int r) {
  const double v = 1.5 + 0.5 * (r % 3) - (r % 2 ? 3.0 : 0.0);  // 1.5, -1, 2.5, 0, ...
  uint64_t bits = 0;
  switch (type) {
    case ncclInt8: case ncclUint8: case ncclInt32: case ncclUint32: case ncclInt64: case ncclUint64: {
      const int64_t i = int64_t(v * 2);
      std::memcpy(&bits, &i, 8);  // little endian: the low bytes are the narrow value
      break;
    }
    case ncclFloat16: bits = floatToHalf(float(v)); break;
    case ncclBfloat16: bits = floatToBfloat16(float(v)); break;
    case ncclFloat8e4m3: bits = floatToFp8e4m3(float(v)); break;
    case ncclFloat8e5m2: bits = floatToFp8e5m2(float(v)); break;
    case ncclFloat32: { const float f = float(v); std::memcpy(&bits, &f, 4); break; }
    default: { std::memcpy(&bits, &v, 8); break; }
  }
  return bits;
}

/// One rank's memory: [guard | buffer | guard] storages.
struct RankMem {
  std::vector<unsigned char> store[2];  // [0]: recv (or both in place), [1]: send
  std::vector<unsigned char> scratch;
  uint64_t sendOff = 0, recvOff = 0;
  int sendStore = 1;
  char* send(size_t ts) { return reinterpret_cast<char*>(store[sendStore].data()) + kGuard + sendOff * ts; }
  char* recv(size_t ts) { return reinterpret_cast<char*>(store[0].data()) + kGuard + recvOff * ts; }
};

}  // namespace

const char* opName(Op op) {
  static const char* names[] = {"sum", "prod", "max", "min", "avg", "premulsum"};
  return names[int(op)];
}

ncclDataType_t typeAt(int i) {
  static const ncclDataType_t types[kNumTypes] = {
      ncclInt8, ncclUint8, ncclInt32, ncclUint32, ncclInt64, ncclUint64,
      ncclFloat16, ncclFloat32, ncclFloat64, ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2};
  return types[i];
}

bool isReducing(Coll c) {
  return c == Coll::kAllReduce || c == Coll::kReduce || c == Coll::kReduceScatter;
}
bool isRooted(Coll c) {
  return c == Coll::kBroadcast || c == Coll::kReduce || c == Coll::kGather || c == Coll::kScatter;
}

void fillValues(ncclDataType_t type, void* p, uint64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + 1);
  std::uniform_real_distribution<float> mag(0.25f, 2.0f);
  auto* b = static_cast<unsigned char*>(p);
  const size_t ts = dataTypeSize(type);
  for (uint64_t i = 0; i < n; ++i) {
    const uint64_t r = rng();
    const float f = (r & 1 ? -1.0f : 1.0f) * mag(rng);
    unsigned char* e = b + i * ts;
    switch (type) {
      case ncclFloat16: { const uint16_t h = floatToHalf(f); std::memcpy(e, &h, 2); break; }
      case ncclBfloat16: { const uint16_t h = floatToBfloat16(f); std::memcpy(e, &h, 2); break; }
      case ncclFloat8e4m3: e[0] = floatToFp8e4m3(f); break;
      case ncclFloat8e5m2: e[0] = floatToFp8e5m2(f); break;
      case ncclFloat32: std::memcpy(e, &f, 4); break;
      case ncclFloat64: { const double d = double(f) + double(r >> 40) * 1e-12; std::memcpy(e, &d, 8); break; }
      default: std::memcpy(e, &r, ts); break;  // integers: any bits
    }
  }
}

std::string EmuCase::describe() const {
  std::string s = std::string(collName(algo->coll)) + "/" + algo->name + " n=" +
                  std::to_string(nranks) + " count=" + std::to_string(count) + " type=" +
                  dataTypeName(type);
  if (isReducing(algo->coll)) s += std::string(" op=") + opName(op);
  if (isRooted(algo->coll)) s += " root=" + std::to_string(root);
  s += inPlace ? " in-place" : " out-of-place";
  s += " fifo=" + std::to_string(nslots) + "x" + std::to_string(slotBytes) + " chunk=" +
       std::to_string(chunkBytes) + " ch=" + std::to_string(nChannels) + " slice=" +
       std::to_string(sliceBytes);
  if (scalarByPointer) s += " scalar-ptr";
  if (layout) s += " layout=" + layout->describe();
  return s;
}

EmuResult runEmuCase(const EmuCase& c) {
  EmuResult res;
  const Coll coll = c.algo->coll;
  const int n = c.nranks;
  const size_t ts = dataTypeSize(c.type);
  const bool reducing = isReducing(coll);

  if (c.algo->needsPeerAccess && reducing && c.op == Op::kPreMulSum) {
    res.status = EmuStatus::kUnsupported;  // never on direct access (each rank's scalar)
    res.message = c.describe() + ": PreMulSum does not run on direct-access plans";
    return res;
  }
  // ---- plans ----
  std::vector<Plan> plans(n);
  PlanParams params;
  params.chunkBytes = c.chunkBytes;
  params.nChannels = c.nChannels;
  for (int r = 0; r < n; ++r) {
    PlanArgs args;
    args.coll = coll;
    args.nranks = n;
    args.rank = r;
    args.count = c.count;
    args.typeSize = ts;
    args.root = c.root;
    args.inPlace = c.inPlace;
    args.layout = c.layout;
    args.peerAccess = c.algo->needsPeerAccess;
    plans[r].algorithm = c.algo->name;
    if (!c.algo->build(args, params, &plans[r])) {
      res.status = r == 0 ? EmuStatus::kUnsupported : EmuStatus::kFailed;
      res.message = c.describe() + ": declined by rank " + std::to_string(r);
      return res;
    }
    plans[r].sliceBytes = c.sliceBytes;
  }

  // ---- memory: random inputs and guards, the same for both runs ----
  std::vector<RankMem> mem(n);
  for (int r = 0; r < n; ++r) {
    const Sizes sz = sizesFor(coll, c.count, n, r);
    RankMem& m = mem[r];
    const uint64_t elems[2] = {c.inPlace ? sz.storeElems : sz.recvElems, c.inPlace ? 0 : sz.sendElems};
    for (int s = 0; s < 2; ++s) {
      if (s == 1 && c.inPlace) break;
      m.store[s].resize(2 * kGuard + elems[s] * ts);
      fillValues(ncclUint8, m.store[s].data(), m.store[s].size(), uint64_t(r * 7 + s + 1));
    }
    if (c.inPlace) {
      m.sendStore = 0;
      m.sendOff = sz.sendOff;
      m.recvOff = sz.recvOff;
    }
    fillValues(c.type, m.send(ts), sz.sendElems, uint64_t(r + 100));
    m.scratch.assign(plans[r].scratchElems * ts + 1, 0xA5);
  }
  std::vector<RankMem> ref = mem;

  // ---- the host executor ----
  std::vector<SimRank> sim(n);
  std::vector<uint64_t> scalars(n);
  for (int r = 0; r < n; ++r) {
    const Sizes sz = sizesFor(coll, c.count, n, r);
    scalars[r] = scalarBits(c.type, r);
    sim[r].plan = &plans[r];
    sim[r].bufs.send = ref[r].send(ts);
    sim[r].bufs.recv = ref[r].recv(ts);
    sim[r].bufs.scratch = ref[r].scratch.data();
    sim[r].sendElems = sz.sendElems;
    sim[r].recvElems = sz.recvElems;
    if (reducing && c.op == Op::kPreMulSum) sim[r].reducer = Reducer::preMulSum(c.type, &scalars[r], n);
    else sim[r].reducer = Reducer(c.type, reducing ? ncclOpOf(c.op) : ncclSum, n);
  }
  {
    Simulator s(n, c.nChannels, SimGeometry{c.nslots, c.slotBytes, false});
    SimResult sr = s.run(sim);
    if (!sr.ok) {
      res.message = c.describe() + ": the host executor failed: " + sr.error;
      return res;
    }
  }

  // ---- the CUDA executor's interpreter ----
  Fabric fabric(c.nslots, c.slotBytes);
  std::vector<EmuLaunch> launches(n);
  std::vector<EmuLaunch*> ptrs;
  for (int r = 0; r < n; ++r) {
    EmuWork w;
    w.plan = &plans[r];
    w.send = mem[r].send(ts);
    w.recv = mem[r].recv(ts);
    w.scratch = mem[r].scratch.data();
    w.nranks = n;
    w.avg = reducing && c.op == Op::kAvg;
    if (c.mixedSlices && r % 2 == 1) w.sliceBytes = 0;
    if (reducing && c.op == Op::kPreMulSum) {
      w.scalarMode = c.scalarByPointer ? kDevScalarPointer : kDevScalarImmediate;
      w.scalarBits = scalars[r];
      w.scalarPtr = &scalars[r];
    }
    if (!launches[r].build(&fabric, r, ts, {w})) {
      res.message = c.describe() + ": building the launch failed";
      return res;
    }
    ptrs.push_back(&launches[r]);
  }
  const DevRed red = devRedFor(ncclOpOf(c.op), reducing);
  const std::vector<bool> ok = runAll(ptrs, c.type, red);
  for (int r = 0; r < n; ++r) {
    if (!ok[r]) {
      res.message = c.describe() + ": rank " + std::to_string(r) + " gave up (error=" +
                    std::to_string(launches[r].control().error) + ")";
      return res;
    }
    const DevControl& ctl = launches[r].control();
    const uint64_t launched = launches[r].launch().nBlocks > 0 ? 1 : 0;  // no blocks: no launch
    if (ctl.started != launched || ctl.finished != launched || ctl.error != 0) {
      res.message = c.describe() + ": rank " + std::to_string(r) + " control words started=" +
                    std::to_string(ctl.started) + " finished=" + std::to_string(ctl.finished);
      return res;
    }
    if (launches[r].barrier()[0] != 0) {
      res.message = c.describe() + ": barrier count left at " + std::to_string(launches[r].barrier()[0]);
      return res;
    }
  }
  if (!fabric.drained()) {
    res.message = c.describe() + ": bytes left in a FIFO";
    return res;
  }

  // ---- compare ----
  for (int r = 0; r < n; ++r) {
    for (int s = 0; s < 2; ++s) {
      const auto& got = mem[r].store[s];
      const auto& want = ref[r].store[s];
      for (size_t b = 0; b < got.size(); ++b) {
        if (got[b] == want[b]) continue;
        const bool guard = b < kGuard || b >= got.size() - kGuard;
        res.message = c.describe() + ": rank " + std::to_string(r) + " " +
                      (s == 0 ? "recv" : "send") + " storage byte " + std::to_string(b) +
                      (guard ? " (guard)" : " (element " + std::to_string((b - kGuard) / ts) + ")") +
                      ": got " + std::to_string(got[b]) + ", the host executor wrote " +
                      std::to_string(want[b]);
        return res;
      }
    }
  }
  res.status = EmuStatus::kPassed;
  return res;
}

}  // namespace emutest
}  // namespace braid
