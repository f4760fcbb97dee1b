// window_pairs_host (graph/walk_pairs.hpp) against a plain reference of the slot rules: pairs
// in slot order, slots whose pair has a -1 skipped, negatives carried along; ranges that start
// and end inside walks concatenate to the whole list; window_slots by brute force; bad
// arguments name the problem.
#include <graph/walk_pairs.hpp>
#include <wholememory/error.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

using namespace wholestore::graph;

// Walks with dead ends: walk v stops after (v % (length + 1)) steps.
std::vector<std::int64_t> make_walks(std::size_t count, int length) {
  std::vector<std::int64_t> w(count * (length + 1));
  for (std::size_t v = 0; v < count; ++v)
    for (int i = 0; i <= length; ++i)
      w[v * (length + 1) + i] =
          i <= static_cast<int>(v % (length + 1)) ? static_cast<std::int64_t>(v * 100 + i) : -1;
  return w;
}

struct pairs {
  std::vector<std::int64_t> centers, targets;
};

// The rules written out: walk by walk, i then j, the slot counter running over every slot.
pairs reference(const std::vector<std::int64_t>& walks, std::size_t count, int length, int window,
                std::uint64_t lo, std::uint64_t hi, const std::vector<std::int64_t>& negatives,
                int k) {
  pairs out;
  std::uint64_t slot = 0;
  for (std::size_t v = 0; v < count; ++v)
    for (int i = 0; i <= length; ++i)
      for (int j = 0; j <= length; ++j) {
        if (i == j || std::abs(i - j) > window) continue;
        const std::int64_t c = walks[v * (length + 1) + i], t = walks[v * (length + 1) + j];
        if (slot >= lo && slot < hi && c >= 0 && t >= 0) {
          out.centers.push_back(c);
          out.targets.push_back(t);
          for (int q = 0; q < k; ++q) out.targets.push_back(negatives[(slot - lo) * k + q]);
        }
        ++slot;
      }
  return out;
}

pairs run(const std::vector<std::int64_t>& walks, std::uint64_t first_walk, std::size_t count,
          int length, int window, std::uint64_t lo, std::uint64_t hi,
          const std::vector<std::int64_t>& negatives, int k) {
  pairs out;
  out.centers.assign(hi - lo, -7);
  out.targets.assign((hi - lo) * (k + 1), -7);
  window_pairs_args a;
  a.walks = walks.data() + first_walk * (length + 1);
  a.first_walk = first_walk;
  a.walk_count = count;
  a.walk_length = length;
  a.window = window;
  a.lo = lo;
  a.hi = hi;
  a.negatives = negatives.data();
  a.negatives_per_pair = k;
  a.centers = out.centers.data();
  a.targets = out.targets.data();
  const std::size_t n = window_pairs_host(a);
  out.centers.resize(n);
  out.targets.resize(n * (k + 1));
  return out;
}

TEST(WindowSlots, CountsEveryPairInTheWindow) {
  for (int length : {1, 2, 7, 20})
    for (int window : {1, 3, 40}) {
      std::uint64_t brute = 0;
      for (int i = 0; i <= length; ++i)
        for (int j = 0; j <= length; ++j) brute += (i != j && std::abs(i - j) <= window);
      EXPECT_EQ(window_slots(length, window), brute) << length << ", " << window;
    }
}

TEST(WindowPairs, MatchTheReferenceOverRangesInsideWalks) {
  for (int length : {1, 4, 9})
    for (int window : {1, 2, 5})
      for (int k : {0, 1, 3}) {
        const std::size_t count = 13;
        const std::vector<std::int64_t> walks = make_walks(count, length);
        const std::uint64_t total = count * window_slots(length, window);
        std::vector<std::int64_t> negatives(total * k);
        for (std::size_t i = 0; i < negatives.size(); ++i)
          negatives[i] = 1000000 + static_cast<std::int64_t>(i);
        const pairs whole = reference(walks, count, length, window, 0, total, negatives, k);
        EXPECT_EQ(run(walks, 0, count, length, window, 0, total, negatives, k).centers,
                  whole.centers);
        // Three ranges cut inside walks, each given only the walks it needs, concatenate to the
        // whole list.
        const std::uint64_t cuts[] = {0, total / 3 + 1, 2 * total / 3 + 2, total};
        pairs joined;
        for (int r = 0; r < 3; ++r) {
          const std::uint64_t lo = cuts[r], hi = cuts[r + 1];
          const std::uint64_t s = window_slots(length, window);
          const std::uint64_t w0 = lo / s, w1 = hi > lo ? (hi - 1) / s + 1 : w0;
          const std::vector<std::int64_t> part(negatives.begin() + lo * k,
                                               negatives.begin() + hi * k);
          const pairs p = run(walks, w0, w1 - w0, length, window, lo, hi, part, k);
          const pairs want = reference(walks, count, length, window, lo, hi, part, k);
          EXPECT_EQ(p.centers, want.centers);
          EXPECT_EQ(p.targets, want.targets);
          joined.centers.insert(joined.centers.end(), p.centers.begin(), p.centers.end());
          joined.targets.insert(joined.targets.end(), p.targets.begin(), p.targets.end());
        }
        EXPECT_EQ(joined.centers, whole.centers) << length << " " << window << " " << k;
        EXPECT_EQ(joined.targets, whole.targets) << length << " " << window << " " << k;
      }
}

TEST(WindowPairs, EmptyRangeAndBadArguments) {
  const std::vector<std::int64_t> walks = make_walks(2, 3), none;
  EXPECT_EQ(run(walks, 0, 2, 3, 1, 5, 5, none, 0).centers.size(), 0u);
  window_pairs_args a;
  a.walks = walks.data();
  a.walk_count = 2;
  a.walk_length = 0;
  auto message = [&] {
    try {
      std::vector<std::int64_t> c(100), t(100);
      a.centers = c.data();
      a.targets = t.data();
      window_pairs_host(a);
    } catch (const wholememory::logic_error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_NE(message().find("walk_length must be at least 1, got 0"), std::string::npos);
  a.walk_length = 3;
  a.window = 0;
  EXPECT_NE(message().find("window must be at least 1, got 0"), std::string::npos);
  a.window = 1;
  a.lo = 0;
  a.hi = 100;  // 6 slots per walk: 2 walks cover 12
  EXPECT_NE(message().find("do not cover slots [0, 100)"), std::string::npos) << message();
}

}  // namespace
