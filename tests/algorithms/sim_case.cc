#include "tests/algorithms/sim_case.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "src/reduce/reducer.h"

namespace braid {
namespace algotest {
namespace {

constexpr size_t kGuardBytes = 64;

uint8_t canaryByte(int rank, size_t i) { return uint8_t(0x5A ^ (i * 131) ^ (rank * 17)); }

ncclRedOp_t ncclOp(Op op) {
  switch (op) {
    case Op::kSum: return ncclSum;
    case Op::kProd: return ncclProd;
    case Op::kMax: return ncclMax;
    case Op::kMin: return ncclMin;
    case Op::kAvg: return ncclAvg;
    default: return ncclSum;
  }
}

/// One rank's memory: one or two storages, each with guard zones, and where the
/// collective's send and recv buffers lie in them.
struct RankMem {
  std::vector<uint8_t> store[2];     // [0]: recv (or shared in place), [1]: send
  std::vector<uint8_t> expect[2];    // expected final bytes
  std::vector<double> tolRef[2];     // per element: reference value when tolerance > 0
  std::vector<double> tol[2];        // per element: tolerance (0: compare exactly)
  int sendStore = 1, recvStore = 0;  // which storage holds each buffer
  uint64_t sendOff = 0, recvOff = 0; // element offsets within them
};

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

}  // namespace

const Setup& setupAt(int i) {
  // {name, {nslots, slotBytes, direct}, {chunkBytes, nChannels}}
  static const Setup setups[kNumSetups] = {
      {"4x64/c128/1ch", {4, 64, false}, {128, 1}},
      {"4x64/c128/2ch", {4, 64, true}, {128, 2}},
      {"2x8/c8/1ch", {2, 8, false}, {8, 1}},
      {"8x512/c2048/3ch", {8, 512, true}, {2048, 3}},
      {"4x4096/c8192/2ch", {4, 4096, false}, {8192, 2}},
  };
  return setups[i];
}

bool isReducing(Coll c) {
  return c == Coll::kAllReduce || c == Coll::kReduce || c == Coll::kReduceScatter;
}
bool isRooted(Coll c) {
  return c == Coll::kBroadcast || c == Coll::kReduce || c == Coll::kGather ||
         c == Coll::kScatter;
}

std::string CaseSpec::describe() const {
  std::string s = std::string(collName(algo->coll)) + "/" + algo->name +
                  " nranks=" + std::to_string(nranks) + " count=" + std::to_string(count) +
                  " type=" + typeInfo(type).name;
  if (isReducing(algo->coll)) s += std::string(" op=") + opName(op);
  if (isRooted(algo->coll)) s += " root=" + std::to_string(root);
  s += inPlace ? " in-place" : " out-of-place";
  s += std::string(" setup=") + setup.name;
  if (allowDirect) s += " direct";
  if (layout) {
    s += " layout=" + layout->describe() + " ring=";
    for (size_t i = 0; i < layout->ring.size(); ++i)
      s += (i ? "," : "") + std::to_string(layout->ring[i]);
  }
  return s;
}

bool usesSwitch(const Algorithm* algo) { return algo->needsSwitch; }

CaseResult runCase(const CaseSpec& spec) {
  CaseResult result;
  const Coll coll = spec.algo->coll;
  const int n = spec.nranks;
  const TypeInfo& t = typeInfo(spec.type);
  const size_t ts = t.size;
  const Op op = isReducing(coll) ? spec.op : Op::kNone;

  if (spec.algo->needsPeerAccess && op == Op::kPreMulSum) {
    // Each rank scales its own input by its own scalar; a rank reducing its peers'
    // inputs directly has only its own (the flag board never takes PreMulSum).
    result.status = CaseStatus::kUnsupported;
    result.message = spec.describe() + ": direct-access reductions take built-in ops only";
    return result;
  }
  // ---- plans -------------------------------------------------------------------
  std::vector<Plan> plans(n);
  for (int r = 0; r < n; ++r) {
    PlanArgs args;
    args.coll = coll;
    args.nranks = n;
    args.rank = r;
    args.count = spec.count;
    args.typeSize = ts;
    args.root = spec.root;
    args.inPlace = spec.inPlace;
    args.layout = spec.layout;
    args.collnet = usesSwitch(spec.algo);
    args.peerAccess = spec.algo->needsPeerAccess;
    plans[r].algorithm = spec.algo->name;
    if (!spec.algo->build(args, spec.setup.params, &plans[r])) {
      if (r > 0) {
        result.message = spec.describe() + ": rank 0 accepted the call but rank " +
                         std::to_string(r) + " declined it";
        return result;
      }
      result.status = CaseStatus::kUnsupported;
      result.message = spec.describe() + ": declined by the builder";
      return result;
    }
  }

  // ---- memory: inputs, canaries, guards, expectations --------------------------
  std::vector<RankMem> mem(n);
  // inputs[r][i]: rank r's send element i (as a value).
  auto input = [&](int r, uint64_t i) { return inputValue(t, op, n, r, i); };
  for (int r = 0; r < n; ++r) {
    RankMem& m = mem[r];
    const Sizes sz = sizesFor(coll, spec.count, n, r);
    if (spec.inPlace) {
      m.sendStore = m.recvStore = 0;
      m.sendOff = sz.sendOff;
      m.recvOff = sz.recvOff;
    }
    const uint64_t elems[2] = {spec.inPlace ? sz.storeElems : sz.recvElems,
                               spec.inPlace ? 0 : sz.sendElems};
    for (int s = 0; s < 2; ++s) {
      if (s == 1 && spec.inPlace) break;
      m.store[s].resize(2 * kGuardBytes + elems[s] * ts);
      for (size_t b = 0; b < m.store[s].size(); ++b) m.store[s][b] = canaryByte(r, b + s * 7);
      m.tol[s].assign(elems[s], 0);
      m.tolRef[s].assign(elems[s], 0);
    }
    // Inputs into the send buffer.
    uint8_t* send = m.store[m.sendStore].data() + kGuardBytes + m.sendOff * ts;
    for (uint64_t i = 0; i < sz.sendElems; ++i) encode(t, input(r, i), send + i * ts);
    for (int s = 0; s < 2; ++s) m.expect[s] = m.store[s];
  }

  // Expected outputs: recv element j of rank r gets a value (with tolerance).
  auto setOut = [&](int r, uint64_t j, double v, double tol) {
    RankMem& m = mem[r];
    const uint64_t e = m.recvOff + j;
    uint8_t* p = m.expect[m.recvStore].data() + kGuardBytes + e * ts;
    if (tol > 0) {
      m.tol[m.recvStore][e] = tol;
      m.tolRef[m.recvStore][e] = v;
      encode(t, std::nearbyint(v), p);  // placeholder: compared with tolerance
    } else {
      encode(t, v, p);
    }
  };
  auto reduced = [&](uint64_t i, RefReduce& ref) {
    for (int q = 0; q < n; ++q) ref.add(q, input(q, i));
  };
  const uint64_t c = spec.count;
  for (int r = 0; r < n; ++r) {
    switch (coll) {
      case Coll::kAllReduce:
        for (uint64_t i = 0; i < c; ++i) {
          RefReduce ref(t, op, n);
          reduced(i, ref);
          setOut(r, i, ref.result(), ref.tolerance());
        }
        break;
      case Coll::kReduce:
        if (r != spec.root) break;
        for (uint64_t i = 0; i < c; ++i) {
          RefReduce ref(t, op, n);
          reduced(i, ref);
          setOut(r, i, ref.result(), ref.tolerance());
        }
        break;
      case Coll::kReduceScatter:
        for (uint64_t i = 0; i < c; ++i) {
          RefReduce ref(t, op, n);
          reduced(uint64_t(r) * c + i, ref);
          setOut(r, i, ref.result(), ref.tolerance());
        }
        break;
      case Coll::kBroadcast:
        for (uint64_t i = 0; i < c; ++i) setOut(r, i, input(spec.root, i), 0);
        break;
      case Coll::kAllGather:
        for (int b = 0; b < n; ++b)
          for (uint64_t i = 0; i < c; ++i) setOut(r, uint64_t(b) * c + i, input(b, i), 0);
        break;
      case Coll::kGather:
        if (r != spec.root) break;
        for (int b = 0; b < n; ++b)
          for (uint64_t i = 0; i < c; ++i) setOut(r, uint64_t(b) * c + i, input(b, i), 0);
        break;
      case Coll::kScatter:
        for (uint64_t i = 0; i < c; ++i) setOut(r, i, input(spec.root, uint64_t(r) * c + i), 0);
        break;
      case Coll::kAllToAll:
        for (int p = 0; p < n; ++p)
          for (uint64_t i = 0; i < c; ++i)
            setOut(r, uint64_t(p) * c + i, input(p, uint64_t(r) * c + i), 0);
        break;
      default:
        result.message = spec.describe() + ": collective not handled by the test";
        return result;
    }
  }

  // ---- run -------------------------------------------------------------------------
  std::vector<SimRank> ranks(n);
  for (int r = 0; r < n; ++r) {
    RankMem& m = mem[r];
    const Sizes sz = sizesFor(coll, spec.count, n, r);
    SimRank& sr = ranks[r];
    sr.plan = &plans[r];
    sr.bufs.send = m.store[m.sendStore].data() + kGuardBytes + m.sendOff * ts;
    sr.bufs.recv = m.store[m.recvStore].data() + kGuardBytes + m.recvOff * ts;
    sr.sendElems = sz.sendElems;
    sr.recvElems = sz.recvElems;
    sr.allowDirect = spec.allowDirect && !spec.inPlace;
    if (op == Op::kPreMulSum) {
      alignas(8) uint8_t scalar[8];
      encode(t, preMulScalar(t, r), scalar);
      sr.reducer = Reducer::preMulSum(spec.type, scalar, n);
    } else {
      sr.reducer = Reducer(spec.type, ncclOp(op), n);
    }
  }
  const std::string bad =
      checkPlans(ranks, spec.setup.params.nChannels, ts, spec.setup.params.chunkBytes);
  if (!bad.empty()) {
    result.message = spec.describe() + ": plan check: " + bad;
    return result;
  }
  SimGeometry geo = spec.setup.geo;
  geo.direct = geo.direct && spec.allowDirect;
  // Direct access: odd counts reach the peers' bytes by copies (as between processes),
  // even counts through pointers (as within one).
  geo.peerReads = spec.count % 2 == 1;
  Simulator sim(n, spec.setup.params.nChannels, geo);
  if (usesSwitch(spec.algo))
    sim.enableSwitch(spec.layout ? spec.layout
                                 : std::make_shared<const RankLayout>(RankLayout::flat(n)));
  SimResult sr = sim.run(ranks);
  if (!sr.ok) {
    result.message = spec.describe() + ": " + sr.error;
    return result;
  }

  // ---- compare -------------------------------------------------------------------
  std::string errors;
  int nerr = 0;
  for (int r = 0; r < n && nerr < 5; ++r) {
    RankMem& m = mem[r];
    for (int s = 0; s < 2 && nerr < 5; ++s) {
      const std::vector<uint8_t>& got = m.store[s];
      const std::vector<uint8_t>& want = m.expect[s];
      if (got.empty()) continue;
      const char* what = spec.inPlace ? "buffer" : (s == 0 ? "recv buffer" : "send buffer");
      const size_t dataEnd = got.size() - kGuardBytes;
      for (size_t b = 0; b < got.size() && nerr < 5; ++b) {
        if (b < kGuardBytes || b >= dataEnd) {
          if (got[b] != want[b]) {
            errors += "\n  rank " + std::to_string(r) + " " + what + ": guard byte " +
                      std::to_string(b < kGuardBytes ? int64_t(b) - int64_t(kGuardBytes)
                                                     : int64_t(b - kGuardBytes)) +
                      " overwritten";
            ++nerr;
          }
          continue;
        }
        const size_t e = (b - kGuardBytes) / ts;
        b = kGuardBytes + (e + 1) * ts - 1;  // one element per iteration
        const uint8_t* g = got.data() + kGuardBytes + e * ts;
        const uint8_t* w = want.data() + kGuardBytes + e * ts;
        const double gv = decode(t, g);
        bool ok;
        double wv;
        if (m.tol[s][e] > 0) {
          wv = m.tolRef[s][e];
          ok = std::fabs(gv - wv) <= m.tol[s][e];
        } else {
          wv = decode(t, w);
          ok = std::memcmp(g, w, ts) == 0 || (gv == wv);  // gv == wv: +0 vs -0
        }
        if (!ok) {
          char line[200];
          snprintf(line, sizeof line, "\n  rank %d %s element %zu: got %.17g, expected %.17g", r,
                   what, e, gv, wv);
          errors += line;
          ++nerr;
        }
      }
    }
  }
  if (nerr) {
    result.message = spec.describe() + ": wrong results:" + errors;
    return result;
  }
  result.status = CaseStatus::kPassed;
  return result;
}

}  // namespace algotest
}  // namespace braid
