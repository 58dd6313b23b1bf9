#include "tests/training_parallel/ranks.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace tp_test {

void runRanks(int nranks, const RankFn& fn, int watchdogSeconds) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  std::vector<std::string> errors(static_cast<size_t>(nranks));
  std::mutex mu;
  std::condition_variable cv;
  int done = 0;
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; ++r) {
    threads.emplace_back([&, r] {
      ncclComm_t comm = nullptr;
      const ncclResult_t res = ncclCommInitRank(&comm, nranks, id, r);
      if (res != ncclSuccess) {
        errors[size_t(r)] = std::string("ncclCommInitRank: ") + ncclGetErrorString(res);
      } else {
        try {
          fn(r, nranks, comm);
        } catch (const std::exception& e) {
          errors[size_t(r)] = e.what();
        }
        ncclCommDestroy(comm);
      }
      std::lock_guard<std::mutex> lock(mu);
      ++done;
      cv.notify_all();
    });
  }
  {
    std::unique_lock<std::mutex> lock(mu);
    if (!cv.wait_for(lock, std::chrono::seconds(watchdogSeconds), [&] { return done == nranks; })) {
      std::fprintf(stderr, "runRanks: %d of %d ranks still running after %d s; aborting\n",
                   nranks - done, nranks, watchdogSeconds);
      std::abort();
    }
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < nranks; ++r)
    EXPECT_TRUE(errors[size_t(r)].empty()) << "rank " << r << ": " << errors[size_t(r)];
}

}  // namespace tp_test
