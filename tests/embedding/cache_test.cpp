// The cache's static hot-row policy against a direct count, on skewed random streams.
#include <embedding/cache.hpp>
#include <wholememory/error.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <vector>

namespace wholestore_test {
namespace {

namespace emb = wholestore::embedding;

/// The reference: count with an ordered map, then pick greedily the highest count, lowest id.
std::vector<std::int64_t> reference_hottest(const std::vector<std::int64_t>& sample,
                                            std::size_t capacity) {
  std::map<std::int64_t, std::uint64_t> counts;
  for (auto r : sample) ++counts[r];
  std::vector<std::int64_t> out;
  while (out.size() < capacity && !counts.empty()) {
    auto best = counts.begin();
    for (auto it = counts.begin(); it != counts.end(); ++it)
      if (it->second > best->second) best = it;
    out.push_back(best->first);
    counts.erase(best);
  }
  return out;
}

TEST(CacheHottestRows, MatchesADirectCountOnSkewedStreams) {
  std::mt19937_64 rng(5);
  for (std::size_t rows : {1u, 7u, 300u, 5000u}) {
    for (std::size_t capacity : {0u, 1u, 10u, 250u, 10000u}) {
      std::vector<std::int64_t> sample;
      std::uniform_real_distribution<double> u(0, 1);
      for (int i = 0; i < 3000; ++i)
        sample.push_back(static_cast<std::int64_t>(std::pow(u(rng), 3.0) * rows));
      EXPECT_EQ(emb::hottest_rows(sample, rows, capacity), reference_hottest(sample, capacity))
          << rows << " rows, capacity " << capacity;
    }
  }
}

TEST(CacheHottestRows, TiesGoToTheLowerRowAndEmptySampleGivesNothing) {
  EXPECT_EQ(emb::hottest_rows({9, 4, 9, 4, 2, 7, 7}, 10, 2), (std::vector<std::int64_t>{4, 7}));
  EXPECT_TRUE(emb::hottest_rows({}, 10, 5).empty());
}

TEST(CacheHottestRows, OutOfRangeIndexIsNamed) {
  try {
    emb::hottest_rows({1, 2, 10, 3}, 10, 2);
    FAIL() << "accepted an index outside the table";
  } catch (const wholememory::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("index 10 at position 2"), std::string::npos) << e.what();
  }
}

#if !defined(WHOLESTORE_HAS_CUDA)
TEST(DeviceCache, NeedsCuda) {
  emb::table t;
  EXPECT_THROW(emb::device_cache(t, {}, 0), wholememory::logic_error);
}
#endif

}  // namespace
}  // namespace wholestore_test
