// PlanCache: hits, the least recently used plans dropped first when the entries or the
// bytes run out, the newest kept even alone above the byte bound.
#include "src/core/plan_cache.h"

#include <gtest/gtest.h>

#include <memory>

namespace braid {
namespace {

PlanCache::Key key(uint64_t count) { return PlanCache::Key{count, 4, 0, 0, false, false, false}; }

std::shared_ptr<const Plan> planOf(size_t steps) {
  auto p = std::make_shared<Plan>();
  p->programs.resize(1);
  p->programs[0].steps.resize(steps);
  return p;
}

TEST(PlanCache, KeepsTheRecentlyUsedWhenEntriesRunOut) {
  PlanCache c(3, size_t(1) << 30);
  auto a = planOf(1), b = planOf(1), d = planOf(1), e = planOf(1);
  c.insert(key(1), a);
  c.insert(key(2), b);
  c.insert(key(3), d);
  EXPECT_EQ(c.find(key(1)), a);  // 1 is now the most recent: 2 is the oldest
  c.insert(key(4), e);
  EXPECT_EQ(c.size(), 3u);
  EXPECT_EQ(c.find(key(2)), nullptr);
  EXPECT_EQ(c.find(key(1)), a);
  EXPECT_EQ(c.find(key(3)), d);
  EXPECT_EQ(c.find(key(4)), e);
  // A hot plan survives a sweep over many other counts.
  for (uint64_t n = 100; n < 200; ++n) {
    EXPECT_EQ(c.find(key(1)), a);
    c.insert(key(n), planOf(1));
  }
  EXPECT_EQ(c.find(key(1)), a);
  EXPECT_EQ(c.find(key(150)), nullptr);
  EXPECT_NE(c.find(key(199)), nullptr);
}

TEST(PlanCache, BoundedByBytes) {
  const size_t one = PlanCache::bytesOf(*planOf(100));
  PlanCache c(1000, 3 * one);
  for (uint64_t n = 1; n <= 10; ++n) c.insert(key(n), planOf(100));
  EXPECT_EQ(c.size(), 3u);
  EXPECT_LE(c.bytes(), 3 * one);
  EXPECT_EQ(c.find(key(7)), nullptr);
  EXPECT_NE(c.find(key(8)), nullptr);
  // A plan larger than the whole bound is still kept (alone): the call needs it.
  c.insert(key(99), planOf(1000));
  EXPECT_EQ(c.size(), 1u);
  EXPECT_NE(c.find(key(99)), nullptr);
  c.clear();
  EXPECT_EQ(c.size(), 0u);
  EXPECT_EQ(c.bytes(), 0u);
}

}  // namespace
}  // namespace braid
