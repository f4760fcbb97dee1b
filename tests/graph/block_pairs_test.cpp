// block_pairs_host (graph/block_pairs.hpp) against the rules computed here pair by pair: every
// block's pairs in input order, ids turned into rows of their partition, negatives moved into
// the context's partition, the counts; on random pairs for several partition counts (1, a
// count that does not divide the nodes, as many partitions as nodes), K = 0 and 5; bad ids and
// settings refused naming them.
#include <graph/block_pairs.hpp>
#include <wholememory/error.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace wholestore::graph;

struct pairs_in {
  std::vector<std::int64_t> centers, targets;
};

pairs_in random_pairs(std::uint64_t nodes, std::size_t n, int k, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::int64_t> id(0, static_cast<std::int64_t>(nodes) - 1);
  pairs_in p;
  for (std::size_t i = 0; i < n; ++i) {
    p.centers.push_back(id(rng));
    for (int j = 0; j <= k; ++j) p.targets.push_back(id(rng));
  }
  return p;
}

TEST(BlockPairs, LayoutRowsCoverEveryNodeOnce) {
  for (std::uint64_t nodes : {1u, 7u, 8u, 1000u})
    for (int parts : {1, 2, 3, 4, 7}) {
      if (static_cast<std::uint64_t>(parts) > nodes) continue;
      const block_layout l{nodes, parts};
      std::uint64_t total = 0;
      for (int c = 0; c < parts; ++c) {
        total += l.rows(c);
        // The last row of c is the node of c with the largest id.
        const std::uint64_t last = (l.rows(c) - 1) * static_cast<std::uint64_t>(parts) + c;
        EXPECT_LT(last, nodes);
        EXPECT_GE(last + static_cast<std::uint64_t>(parts), nodes);
      }
      EXPECT_EQ(total, nodes) << nodes << " nodes, " << parts << " partitions";
      EXPECT_EQ(l.max_rows(), l.rows(0));
    }
}

TEST(BlockPairs, EqualToThePairByPairRule) {
  for (std::uint64_t nodes : {1000u, 13u})
    for (int parts : {1, 3, 4, 13})
      for (int k : {0, 5}) {
        if (static_cast<std::uint64_t>(parts) > nodes) continue;
        const std::size_t n = 2000;
        const pairs_in in = random_pairs(nodes, n, k, static_cast<unsigned>(nodes + parts + k));
        const std::size_t per = static_cast<std::size_t>(k) + 1;
        const block_layout l{nodes, parts};
        std::vector<std::int64_t> oc(n), ot(n * per);
        std::vector<std::uint64_t> counts(static_cast<std::size_t>(parts * parts), 99);
        block_pairs_args a;
        a.layout = l;
        a.centers = in.centers.data();
        a.targets = in.targets.data();
        a.pairs = n;
        a.negatives_per_pair = k;
        a.out_centers = oc.data();
        a.out_targets = ot.data();
        a.counts = counts.data();
        block_pairs_host(a);
        // The rule: blocks in order, each block's pairs in input order.
        std::size_t q = 0;
        for (int i = 0; i < parts; ++i)
          for (int c = 0; c < parts; ++c) {
            std::uint64_t in_block = 0;
            for (std::size_t p = 0; p < n; ++p) {
              if (in.centers[p] % parts != i || in.targets[p * per] % parts != c) continue;
              ++in_block;
              ASSERT_LT(q, n);
              EXPECT_EQ(oc[q], in.centers[p] / parts);
              EXPECT_EQ(ot[q * per], in.targets[p * per] / parts);
              for (std::size_t j = 1; j < per; ++j) {
                // The node of the negative's group that lies in c (the group's last node of c
                // when the group ends before c), as a row of c.
                std::int64_t node = in.targets[p * per + j] / parts * parts + c;
                if (node >= static_cast<std::int64_t>(nodes)) node -= parts;
                EXPECT_EQ(node % parts, c);
                EXPECT_EQ(ot[q * per + j], node / parts) << "pair " << p << " negative " << j;
              }
              ++q;
            }
            EXPECT_EQ(counts[static_cast<std::size_t>(i * parts + c)], in_block);
          }
        EXPECT_EQ(q, n);
      }
}

TEST(BlockPairs, EveryRowIsInsideItsPartition) {
  const std::uint64_t nodes = 1001;  // partitions of 251 and 250 rows
  const int parts = 4, k = 5;
  const std::size_t n = 5000, per = k + 1;
  pairs_in in = random_pairs(nodes, n, k, 7);
  in.targets[per + 3] = static_cast<std::int64_t>(nodes) - 1;  // the last group: 1000 only
  const block_layout l{nodes, parts};
  std::vector<std::int64_t> oc(n), ot(n * per);
  std::vector<std::uint64_t> counts(parts * parts);
  block_pairs_args a{l, in.centers.data(), in.targets.data(), n,
                     k, oc.data(),         ot.data(),         counts.data()};
  block_pairs_host(a);
  std::size_t q = 0;
  for (int i = 0; i < parts; ++i)
    for (int c = 0; c < parts; ++c)
      for (std::uint64_t x = 0; x < counts[static_cast<std::size_t>(i * parts + c)]; ++x, ++q) {
        EXPECT_LT(static_cast<std::uint64_t>(oc[q]), l.rows(i));
        for (std::size_t j = 0; j < per; ++j)
          EXPECT_LT(static_cast<std::uint64_t>(ot[q * per + j]), l.rows(c));
      }
}

std::string error_of(block_pairs_args a) {
  try {
    block_pairs_host(a);
  } catch (const wholememory::logic_error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(BlockPairs, BadIdsAndSettingsAreNamed) {
  std::vector<std::int64_t> c = {0, 5}, t = {1, 2, 3, 10}, oc(2), ot(4);
  std::vector<std::uint64_t> counts(4);
  block_pairs_args a{{10, 2}, c.data(), t.data(), 2, 1, oc.data(), ot.data(), counts.data()};
  EXPECT_NE(error_of(a).find("target 10 at position 3 is outside [0, 10)"), std::string::npos)
      << error_of(a);
  t[3] = 9;
  c[1] = -1;
  EXPECT_NE(error_of(a).find("center -1 of pair 1"), std::string::npos) << error_of(a);
  c[1] = 5;
  EXPECT_EQ(error_of(a), "(no error)");
  a.layout.partitions = 11;
  EXPECT_NE(error_of(a).find("11 partitions of 10 nodes"), std::string::npos) << error_of(a);
  a.layout.partitions = 0;
  EXPECT_NE(error_of(a).find("partitions must be at least 1"), std::string::npos);
  a.layout.partitions = 2;
  a.negatives_per_pair = -1;
  EXPECT_NE(error_of(a).find("negatives_per_pair must be >= 0"), std::string::npos);
}

}  // namespace
