// The NCCL 2.30 parameter API over Braid's registry: values set through the
// environment read back through handles and keys (every getter, the raw copy, the text),
// the key table, the dump; every misuse is ncclInvalidArgument as in NCCL 2.30.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>

#include "nccl.h"
#include "tests/multirank/harness.h"

namespace mr {
namespace {

ncclParamHandle_t bind(const char* key) {
  ncclParamHandle_t h = nullptr;
  EXPECT_EQ(ncclParamBind(&h, key), ncclSuccess) << key << ": " << ncclGetLastError(nullptr);
  return h;
}

TEST(ParamApi, StringSetThroughTheEnvironment) {
  ScopedEnv env({{"NCCL_ALGO", "ring"}, {"NCCL_PROTO", nullptr}});
  ncclParamHandle_t h = bind("NCCL_ALGO");
  ASSERT_NE(h, nullptr);
  const char* s = nullptr;
  ASSERT_EQ(ncclParamGetStr(h, &s), ncclSuccess);
  EXPECT_STREQ(s, "ring");
  // Read at each call: a new value shows at once.
  {
    ScopedEnv again({{"NCCL_ALGO", "^tree"}});
    ASSERT_EQ(ncclParamGetStr(h, &s), ncclSuccess);
    EXPECT_STREQ(s, "^tree");
  }
  // By key, and by the name without its prefix (the same handle).
  const char* value = nullptr;
  int len = -1;
  ASSERT_EQ(ncclParamGetParameter("NCCL_ALGO", &value, &len), ncclSuccess);
  EXPECT_STREQ(value, "ring");
  EXPECT_EQ(len, 4);
  EXPECT_EQ(bind("ALGO"), h);
  // Unset: the default (empty for NCCL_PROTO).
  ASSERT_EQ(ncclParamGetParameter("NCCL_PROTO", &value, &len), ncclSuccess);
  EXPECT_STREQ(value, "");
  EXPECT_EQ(len, 0);
  // The raw copy of a string is its text and NUL; too small a buffer is refused.
  char buf[16];
  memset(buf, 'x', sizeof(buf));
  ASSERT_EQ(ncclParamGet(h, buf, int(sizeof(buf)), &len), ncclSuccess);
  EXPECT_EQ(len, 5);
  EXPECT_STREQ(buf, "ring");
  EXPECT_EQ(ncclParamGet(h, buf, 4, &len), ncclInvalidArgument);
  EXPECT_EQ(len, 0);
  // A string is not an integer.
  int32_t i32 = 0;
  EXPECT_EQ(ncclParamGetI32(h, &i32), ncclInvalidArgument);
  EXPECT_TRUE(mentions(ncclGetLastError(nullptr), "string parameter"));
}

TEST(ParamApi, IntegerSetThroughTheEnvironment) {
  ScopedEnv env({{"NCCL_BUFFSIZE", "8M"}, {"BRAID_FIFO_SLOTS", nullptr}});
  ncclParamHandle_t h = bind("NCCL_BUFFSIZE");
  ASSERT_NE(h, nullptr);
  int64_t i64 = 0;
  ASSERT_EQ(ncclParamGetI64(h, &i64), ncclSuccess);
  EXPECT_EQ(i64, int64_t(8) << 20);
  int32_t i32 = 0;
  ASSERT_EQ(ncclParamGetI32(h, &i32), ncclSuccess);
  EXPECT_EQ(i32, 8 << 20);
  uint64_t u64 = 0;
  ASSERT_EQ(ncclParamGetU64(h, &u64), ncclSuccess);
  EXPECT_EQ(u64, uint64_t(8) << 20);
  uint32_t u32 = 0;
  ASSERT_EQ(ncclParamGetU32(h, &u32), ncclSuccess);
  EXPECT_EQ(u32, 8u << 20);
  // Too narrow for 8 MiB.
  int8_t i8 = 0;
  EXPECT_EQ(ncclParamGetI8(h, &i8), ncclInvalidArgument);
  EXPECT_TRUE(mentions(ncclGetLastError(nullptr), "does not fit in int8_t"));
  int16_t i16 = 0;
  EXPECT_EQ(ncclParamGetI16(h, &i16), ncclInvalidArgument);
  uint16_t u16 = 0;
  EXPECT_EQ(ncclParamGetU16(h, &u16), ncclInvalidArgument);
  // The text is the parsed value.
  const char* value = nullptr;
  int len = 0;
  ASSERT_EQ(ncclParamGetParameter("NCCL_BUFFSIZE", &value, &len), ncclSuccess);
  EXPECT_STREQ(value, "8388608");
  EXPECT_EQ(len, 7);
  // The raw copy is an int64_t.
  int64_t raw = 0;
  ASSERT_EQ(ncclParamGet(h, &raw, int(sizeof(raw)), &len), ncclSuccess);
  EXPECT_EQ(len, 8);
  EXPECT_EQ(raw, int64_t(8) << 20);
  EXPECT_EQ(ncclParamGet(h, &raw, 4, &len), ncclInvalidArgument);
  EXPECT_EQ(len, 0);
  // An integer is not a string.
  const char* s = nullptr;
  EXPECT_EQ(ncclParamGetStr(h, &s), ncclInvalidArgument);
  // Unset: the registry's default; small values fit every width.
  ncclParamHandle_t slots = bind("BRAID_FIFO_SLOTS");
  ASSERT_EQ(ncclParamGetI8(slots, &i8), ncclSuccess);
  EXPECT_EQ(i8, 8);
  uint8_t u8 = 0;
  ASSERT_EQ(ncclParamGetU8(slots, &u8), ncclSuccess);
  EXPECT_EQ(u8, 8u);
  ScopedEnv negative({{"BRAID_FIFO_SLOTS", "-3"}});
  EXPECT_EQ(ncclParamGetU8(slots, &u8), ncclInvalidArgument);
  ASSERT_EQ(ncclParamGetI16(slots, &i16), ncclSuccess);
  EXPECT_EQ(i16, -3);
}

TEST(ParamApi, Boolean) {
  ScopedEnv env({{"BRAID_SHM_CMA", "yes"}, {"NCCL_SHM_DISABLE", nullptr}});
  ncclParamHandle_t h = bind("BRAID_SHM_CMA");
  uint8_t u8 = 7;
  ASSERT_EQ(ncclParamGetU8(h, &u8), ncclSuccess);
  EXPECT_EQ(u8, 1u);
  const char* value = nullptr;
  int len = 0;
  ASSERT_EQ(ncclParamGetParameter("BRAID_SHM_CMA", &value, &len), ncclSuccess);
  EXPECT_STREQ(value, "TRUE");
  ASSERT_EQ(ncclParamGetParameter("SHM_DISABLE", &value, &len), ncclSuccess);
  EXPECT_STREQ(value, "FALSE");
  bool raw = false;
  ASSERT_EQ(ncclParamGet(h, &raw, int(sizeof(raw)), &len), ncclSuccess);
  EXPECT_EQ(len, 1);
  EXPECT_TRUE(raw);
}

TEST(ParamApi, Misuse) {
  ncclParamHandle_t h = nullptr;
  EXPECT_EQ(ncclParamBind(&h, "NCCL_NO_SUCH_THING"), ncclInvalidArgument);
  EXPECT_TRUE(mentions(ncclGetLastError(nullptr), "NCCL_NO_SUCH_THING"));
  EXPECT_EQ(h, nullptr);
  EXPECT_EQ(ncclParamBind(nullptr, "NCCL_ALGO"), ncclInvalidArgument);
  EXPECT_EQ(ncclParamBind(&h, nullptr), ncclInvalidArgument);
  const char* value = "x";
  int len = 9;
  EXPECT_EQ(ncclParamGetParameter("NCCL_NO_SUCH_THING", &value, &len), ncclInvalidArgument);
  EXPECT_EQ(value, nullptr);
  EXPECT_EQ(len, 0);
  EXPECT_EQ(ncclParamGetParameter(nullptr, &value, &len), ncclInvalidArgument);
  EXPECT_EQ(ncclParamGetParameter("NCCL_ALGO", nullptr, &len), ncclInvalidArgument);
  int64_t i64 = 0;
  EXPECT_EQ(ncclParamGetI64(nullptr, &i64), ncclInvalidArgument);
  int bogus = 0;
  EXPECT_EQ(ncclParamGetI64(reinterpret_cast<ncclParamHandle_t>(&bogus), &i64),
            ncclInvalidArgument);
  EXPECT_TRUE(mentions(ncclGetLastError(nullptr), "not a handle"));
  ncclParamHandle_t ok = bind("NCCL_BUFFSIZE");
  EXPECT_EQ(ncclParamGetI64(ok, nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclParamGet(ok, &i64, 0, &len), ncclInvalidArgument);
  EXPECT_EQ(ncclParamGet(ok, nullptr, 8, &len), ncclInvalidArgument);
  EXPECT_EQ(ncclParamGet(ok, &i64, 8, nullptr), ncclInvalidArgument);
  const char** table = nullptr;
  EXPECT_EQ(ncclParamGetAllParameterKeys(nullptr, &len), ncclInvalidArgument);
  EXPECT_EQ(ncclParamGetAllParameterKeys(&table, nullptr), ncclInvalidArgument);
}

TEST(ParamApi, AllKeysAreListedAndBind) {
  const char** table = nullptr;
  int n = 0;
  ASSERT_EQ(ncclParamGetAllParameterKeys(&table, &n), ncclSuccess);
  ASSERT_NE(table, nullptr);
  ASSERT_GE(n, 20);
  std::set<std::string> keys;
  for (int i = 0; i < n; ++i) {
    ASSERT_NE(table[i], nullptr);
    keys.insert(table[i]);
    ncclParamHandle_t h = nullptr;
    EXPECT_EQ(ncclParamBind(&h, table[i]), ncclSuccess) << table[i];
    const char* value = nullptr;
    int len = -1;
    EXPECT_EQ(ncclParamGetParameter(table[i], &value, &len), ncclSuccess) << table[i];
    EXPECT_EQ(len, value ? int(strlen(value)) : -2) << table[i];
  }
  EXPECT_EQ(keys.size(), size_t(n)) << "no key twice";
  for (const char* want : {"NCCL_ALGO", "NCCL_PROTO", "NCCL_BUFFSIZE", "NCCL_DEBUG",
                           "BRAID_TRANSPORT", "BRAID_TIMEOUT_MS"})
    EXPECT_EQ(keys.count(want), 1u) << want;
}

TEST(ParamApi, DumpAllPrintsEveryParameter) {
  ScopedEnv env({{"NCCL_BUFFSIZE", "1M"}});
  char path[] = "/tmp/braid_param_dump_XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  fflush(stdout);
  const int saved = dup(STDOUT_FILENO);
  ASSERT_GE(saved, 0);
  dup2(fd, STDOUT_FILENO);
  ncclParamDumpAll();
  fflush(stdout);
  dup2(saved, STDOUT_FILENO);
  close(saved);
  std::string out;
  char buf[4096];
  lseek(fd, 0, SEEK_SET);
  for (ssize_t k; (k = read(fd, buf, sizeof(buf))) > 0;) out.append(buf, size_t(k));
  close(fd);
  unlink(path);
  EXPECT_NE(out.find("=== ncclParam Registry Dump ==="), std::string::npos) << out;
  EXPECT_NE(out.find("NCCL_BUFFSIZE (integer)"), std::string::npos) << out;
  EXPECT_NE(out.find("Current value=1048576 set_by=env default=4194304"), std::string::npos)
      << out;
  const char** table = nullptr;
  int n = 0;
  ASSERT_EQ(ncclParamGetAllParameterKeys(&table, &n), ncclSuccess);
  for (int i = 0; i < n; ++i)
    EXPECT_NE(out.find(std::string(table[i]) + " ("), std::string::npos) << table[i];
}

// ncclConfig_t's 2.30 fields: NCCL_CONFIG_UNDEF_INT and NCCL 2.30's valid values are
// accepted (a communicator is made), others refused with the field named.
TEST(Config230, NewFieldsValidated) {
  struct Case {
    const char* field;
    int ncclConfig_t::*member;
    int bad;
  };
  const Case bad[] = {{"graphUsageMode", &ncclConfig_t::graphUsageMode, 3},
                      {"graphUsageMode", &ncclConfig_t::graphUsageMode, -1},
                      {"numRmaCtx", &ncclConfig_t::numRmaCtx, -1},
                      {"maxP2pPeers", &ncclConfig_t::maxP2pPeers, 0},
                      {"maxP2pPeers", &ncclConfig_t::maxP2pPeers, -5},
                      {"graphStreamOrdering", &ncclConfig_t::graphStreamOrdering, 2},
                      {"graphStreamOrdering", &ncclConfig_t::graphStreamOrdering, -1}};
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  for (const Case& c : bad) {
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.*c.member = c.bad;
    ncclComm_t comm = nullptr;
    EXPECT_EQ(ncclCommInitRankConfig(&comm, 1, id, 0, &cfg), ncclInvalidArgument)
        << c.field << "=" << c.bad;
    EXPECT_TRUE(mentions(ncclGetLastError(nullptr), std::string("config->") + c.field))
        << c.field << "=" << c.bad;
    EXPECT_EQ(comm, nullptr);
  }
  // Valid values (and the defaults) make a working communicator.
  const int good[][4] = {{NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,
                          NCCL_CONFIG_UNDEF_INT},
                         {0, 0, 1, 0},
                         {1, 1, 64, 1},
                         {2, 4, 1 << 20, 1}};
  for (const auto& g : good) {
    ncclUniqueId fresh;
    ASSERT_EQ(ncclGetUniqueId(&fresh), ncclSuccess);
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.graphUsageMode = g[0];
    cfg.numRmaCtx = g[1];
    cfg.maxP2pPeers = g[2];
    cfg.graphStreamOrdering = g[3];
    ncclComm_t comm = nullptr;
    ASSERT_EQ(ncclCommInitRankConfig(&comm, 1, fresh, 0, &cfg), ncclSuccess)
        << g[0] << " " << g[1] << " " << g[2] << " " << g[3] << ": " << ncclGetLastError(nullptr);
    int32_t x = 5, y = 0;
    EXPECT_EQ(ncclAllReduce(&x, &y, 1, ncclInt32, ncclSum, comm, nullptr), ncclSuccess);
    EXPECT_EQ(y, 5);
    // ncclCommSplit reads its config through the same check.
    ncclConfig_t badSplit = NCCL_CONFIG_INITIALIZER;
    badSplit.graphStreamOrdering = 5;
    ncclComm_t sub = nullptr;
    EXPECT_EQ(ncclCommSplit(comm, 0, 0, &sub, &badSplit), ncclInvalidArgument);
    EXPECT_TRUE(mentions(ncclGetLastError(nullptr), "ncclCommSplit: config->graphStreamOrdering"));
    EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
  }
}

}  // namespace
}  // namespace mr
