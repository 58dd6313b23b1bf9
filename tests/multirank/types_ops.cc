// All 12 datatypes x {sum, prod, max, min, avg, PreMulSum (host-immediate scalar),
// PreMulSum (pointer scalar)} for AllReduce, Reduce and ReduceScatter, on 2, 3 and 4
// ranks. Inputs are small integers chosen so that every partial result of any reduction
// order is exact even in fp8 e5m2, and so that avg's result is an integer.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "nccl.h"
#include "tests/multirank/data.h"
#include "tests/multirank/harness.h"

namespace mr {
namespace {

enum class Op { kSum, kProd, kMax, kMin, kAvg, kPreMulImmediate, kPreMulPointer };

const char* opName(Op o) {
  switch (o) {
    case Op::kSum: return "sum";
    case Op::kProd: return "prod";
    case Op::kMax: return "max";
    case Op::kMin: return "min";
    case Op::kAvg: return "avg";
    case Op::kPreMulImmediate: return "premulsumImmediate";
    case Op::kPreMulPointer: return "premulsumPointer";
  }
  return "?";
}

constexpr double kScalar = 2;

/// Base value per element: {-2..2} (signed, floats) or {1, 2} (unsigned).
double base(ncclDataType_t t, size_t i) {
  return isUnsigned(t) ? double(1 + i % 2) : double(int64_t(i * 7 % 5) - 2);
}

/// Rank r's input at element i. Sum-like ops: base + (+1,-1,+1,-1,...,0) so the ranks'
/// values sum to n*base; every subset sum has magnitude <= 8. Prod: factors in
/// {1, 2, -1} (unsigned {1, 2}), products up to 16.
double input(ncclDataType_t t, Op o, int n, int r, size_t i) {
  if (o == Op::kProd) {
    static const double sgn[3] = {1, 2, -1}, uns[3] = {1, 2, 1};
    size_t k = (size_t(r) * 2 + i) % 3;
    return isUnsigned(t) ? uns[k] : sgn[k];
  }
  double d = r < 2 * (n / 2) ? (r % 2 == 0 ? 1 : -1) : 0;
  return base(t, i) + d;
}

double expected(ncclDataType_t t, Op o, int n, size_t i) {
  double acc = input(t, o, n, 0, i);
  if (o == Op::kPreMulImmediate || o == Op::kPreMulPointer) acc *= kScalar;
  for (int r = 1; r < n; ++r) {
    double v = input(t, o, n, r, i);
    switch (o) {
      case Op::kProd: acc *= v; break;
      case Op::kMax: acc = std::max(acc, v); break;
      case Op::kMin: acc = std::min(acc, v); break;
      case Op::kPreMulImmediate:
      case Op::kPreMulPointer: acc += kScalar * v; break;
      default: acc += v; break;
    }
  }
  if (o == Op::kAvg) acc /= n;
  return acc;
}

/// One rank's share of a type x op check: AllReduce, Reduce (every root) and
/// ReduceScatter over a few counts.
void checkTypeOp(ncclComm_t comm, int rank, int n, ncclDataType_t t, Op o) {
  const cudaStream_t s = nullptr;
  ncclRedOp_t op = ncclSum;
  unsigned char scalarBuf[8] = {};
  switch (o) {
    case Op::kSum: op = ncclSum; break;
    case Op::kProd: op = ncclProd; break;
    case Op::kMax: op = ncclMax; break;
    case Op::kMin: op = ncclMin; break;
    case Op::kAvg: op = ncclAvg; break;
    case Op::kPreMulImmediate:
      store(t, scalarBuf, 0, kScalar);
      MR_NCCL_OK(ncclRedOpCreatePreMulSum(&op, scalarBuf, t, ncclScalarHostImmediate, comm));
      store(t, scalarBuf, 0, 0);  // immediate: the value was read by the create call
      break;
    case Op::kPreMulPointer:
      store(t, scalarBuf, 0, 0);
      MR_NCCL_OK(ncclRedOpCreatePreMulSum(&op, scalarBuf, t, ncclScalarDevice, comm));
      store(t, scalarBuf, 0, kScalar);  // pointer: read when the collective runs
      break;
  }
  for (size_t count : {size_t(1), size_t(37), size_t(1000)}) {
    SCOPED_TRACE(std::string(typeName(t)) + " " + opName(o) + " count " + std::to_string(count) +
                 " rank " + std::to_string(rank) + " of " + std::to_string(n));
    {  // AllReduce
      TypedBuffer send(t, count), recv(t, count);
      for (size_t i = 0; i < count; ++i) send.set(i, input(t, o, n, rank, i));
      MR_NCCL_OK(ncclAllReduce(send.data(), recv.data(), count, t, op, comm, s));
      EXPECT_TRUE(checkElements("allreduce", count, [&](size_t i, double* g, double* w) {
        *g = recv.get(i);
        *w = expected(t, o, n, i);
      }));
    }
    for (int root = 0; root < n; ++root) {  // Reduce, in place
      TypedBuffer buf(t, count);
      for (size_t i = 0; i < count; ++i) buf.set(i, input(t, o, n, rank, i));
      MR_NCCL_OK(ncclReduce(buf.data(), buf.data(), count, t, op, root, comm, s));
      if (rank == root) {
        EXPECT_TRUE(checkElements("reduce", count, [&](size_t i, double* g, double* w) {
          *g = buf.get(i);
          *w = expected(t, o, n, i);
        })) << "root " << root;
      }
    }
    {  // ReduceScatter: element j of the full vector is input(.., j)
      const size_t nc = count * size_t(n);
      TypedBuffer send(t, nc), recv(t, count);
      for (size_t j = 0; j < nc; ++j) send.set(j, input(t, o, n, rank, j));
      MR_NCCL_OK(ncclReduceScatter(send.data(), recv.data(), count, t, op, comm, s));
      EXPECT_TRUE(checkElements("reducescatter", count, [&](size_t i, double* g, double* w) {
        *g = recv.get(i);
        *w = expected(t, o, n, size_t(rank) * count + i);
      }));
    }
  }
  if (o == Op::kPreMulImmediate || o == Op::kPreMulPointer) {
    EXPECT_EQ(ncclRedOpDestroy(op, comm), ncclSuccess) << ncclGetLastError(comm);
  }
}

using Param = std::tuple<ncclDataType_t, Op, int>;
class TypesOps : public ::testing::TestWithParam<Param> {};

TEST_P(TypesOps, AllReduceReduceReduceScatter) {
  const ncclDataType_t t = std::get<0>(GetParam());
  const Op o = std::get<1>(GetParam());
  run(Launch::kInitAll, std::get<2>(GetParam()),
      [&](ncclComm_t& comm, int rank, int n) { checkTypeOp(comm, rank, n, t, o); });
}

const Op kOps[] = {Op::kSum, Op::kProd, Op::kMax, Op::kMin,
                   Op::kAvg, Op::kPreMulImmediate, Op::kPreMulPointer};

INSTANTIATE_TEST_SUITE_P(
    All, TypesOps,
    ::testing::Combine(::testing::ValuesIn(allTypes()), ::testing::ValuesIn(kOps),
                       ::testing::Values(2, 3, 4)),
    [](const ::testing::TestParamInfo<Param>& info) {
      return std::string(typeName(std::get<0>(info.param))) + "_" +
             opName(std::get<1>(info.param)) + "_" + std::to_string(std::get<2>(info.param)) +
             "ranks";
    });

// The same matrix once over forked processes and the shm transport (3 ranks).
TEST(TypesOpsProcesses, AllTypesAllOpsShm) {
  ScopedEnv env({{"BRAID_TRANSPORT", "shm"}});
  run(Launch::kProcesses, 3, [&](ncclComm_t& comm, int rank, int n) {
    for (ncclDataType_t t : allTypes())
      for (Op o : kOps) {
        checkTypeOp(comm, rank, n, t, o);
        if (::testing::Test::HasFatalFailure()) return;
      }
  });
}

// The flag board between processes: counts 1 and 37 inline or single copy (limits
// lowered so both paths take every type), 1000 single copy.
TEST(TypesOpsProcesses, AllTypesAllOpsBoard) {
  ScopedEnv env({{"BRAID_TRANSPORT", "auto"}, {"BRAID_BOARD_INLINE_BYTES", "64"}});
  run(Launch::kProcesses, 3, [&](ncclComm_t& comm, int rank, int n) {
    for (ncclDataType_t t : allTypes())
      for (Op o : kOps) {
        checkTypeOp(comm, rank, n, t, o);
        if (::testing::Test::HasFatalFailure()) return;
      }
  });
}

}  // namespace
}  // namespace mr
