// block_pairs_host (graph/block_pairs.hpp) against the rules computed here pair by pair: every
// block's pairs in input order, ids turned into rows of their partition, negatives drawn from
// the context partition's alias table, the counts; on random pairs for several partition counts
// (1, a count that does not divide the nodes, as many partitions as nodes), K = 0 and 5; the
// negatives of a partition follow degree^0.75 over its nodes; bad ids and settings refused
// naming them.
#include <graph/block_pairs.hpp>
#include <graph/negatives.hpp>
#include <graph/random.hpp>
#include <wholememory/bootstrap.hpp>
#include <wholememory/communicator.hpp>
#include <wholememory/error.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
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

// Alias tables of `rows` entries that never draw an odd row: even buckets keep themselves, odd
// ones always move to the row before.
struct even_rows_tables {
  std::vector<std::vector<alias_entry>> entries;
  std::vector<const alias_entry*> pointers;
  explicit even_rows_tables(const block_layout& l) {
    for (int c = 0; c < l.partitions; ++c) {
      std::vector<alias_entry> t(l.rows(c));
      for (std::size_t b = 0; b < t.size(); ++b)
        t[b] = b % 2 ? alias_entry{0, static_cast<std::int64_t>(b) - 1}
                     : alias_entry{std::uint64_t{1} << 32, static_cast<std::int64_t>(b)};
      entries.push_back(std::move(t));
    }
    for (const auto& t : entries) pointers.push_back(t.data());
  }
};

// The documented draw, restated: bucket rand_below(draw(k, 2j), rows) of the pair's key k, kept
// (even) or moved to its alias (odd, for even_rows_tables).
std::int64_t expected_negative(std::uint64_t key, std::int64_t u, std::int64_t t, std::int64_t n,
                               std::uint64_t j, std::uint64_t rows) {
  const std::uint64_t k =
      mix64(key ^ mix64(static_cast<std::uint64_t>(u)) ^ mix64(~static_cast<std::uint64_t>(t)) ^
            mix64(static_cast<std::uint64_t>(n) * 0x9e3779b97f4a7c15ull + 1));
  const auto b = static_cast<std::int64_t>(rand_below(draw(k, 2 * j), rows));
  return b % 2 ? b - 1 : b;
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
        const even_rows_tables tables(l);
        a.tables = tables.pointers.data();
        a.negative_key = 0x1234 + static_cast<std::uint64_t>(k);
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
                const std::int64_t want =
                    expected_negative(a.negative_key, in.centers[p], in.targets[p * per],
                                      in.targets[p * per + j], j, l.rows(c));
                EXPECT_EQ(ot[q * per + j], want) << "pair " << p << " negative " << j;
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
  const even_rows_tables tables(l);
  block_pairs_args a{l,         in.centers.data(), in.targets.data(),      n, k, oc.data(),
                     ot.data(), counts.data(),     tables.pointers.data(), 99};
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
  const even_rows_tables tables({10, 2});
  block_pairs_args a{{10, 2},
                     c.data(),
                     t.data(),
                     2,
                     1,
                     oc.data(),
                     ot.data(),
                     counts.data(),
                     tables.pointers.data(),
                     0};
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
  a.negatives_per_pair = 1;
  a.tables = nullptr;
  EXPECT_NE(error_of(a).find("negatives need the partitions' alias tables"), std::string::npos);
}

// Partition tables built as the trainer builds them (a negative_sampler over each partition's
// rows, weights out-degree^0.75): a partition's negatives follow its nodes' weights.
TEST(BlockPairs, NegativesFollowThePartitionsDegreeLaw) {
  const std::uint64_t nodes = 403;
  const int parts = 4, k = 4;
  std::mt19937_64 rng(5);
  std::vector<std::int64_t> degree(nodes);
  for (auto& d : degree) d = static_cast<std::int64_t>(rng() % 40);  // zeros included
  const block_layout l{nodes, parts};
  auto bs = wholememory::make_thread_bootstraps(1);
  auto comm = wholememory::make_host_communicator(
      std::shared_ptr<wholememory::bootstrap>(std::move(bs[0])));
  std::vector<std::unique_ptr<negative_sampler>> samplers;
  std::vector<const alias_entry*> tables;
  for (int c = 0; c < parts; ++c) {
    std::vector<std::int64_t> offsets(l.rows(c) + 1, 0);
    for (std::uint64_t r = 0; r < l.rows(c); ++r)
      offsets[r + 1] = offsets[r] + degree[r * parts + c];
    samplers.push_back(std::make_unique<negative_sampler>(comm, offsets, negative_options{}));
    tables.push_back(static_cast<const alias_entry*>(samplers.back()->table().data()));
  }
  // 100000 pairs whose contexts are all in partition 1, with random "global" negatives.
  const std::size_t n = 100000, per = k + 1;
  std::vector<std::int64_t> centers(n), targets(n * per);
  for (std::size_t p = 0; p < n; ++p) {
    centers[p] = static_cast<std::int64_t>(rng() % nodes);
    targets[p * per] = static_cast<std::int64_t>(rng() % (nodes / parts)) * parts + 1;
    for (std::size_t j = 1; j < per; ++j)
      targets[p * per + j] = static_cast<std::int64_t>(rng() % nodes);
  }
  std::vector<std::int64_t> oc(n), ot(n * per);
  std::vector<std::uint64_t> counts(parts * parts);
  block_pairs_host({l, centers.data(), targets.data(), n, k, oc.data(), ot.data(), counts.data(),
                    tables.data(), 7});
  EXPECT_EQ(
      counts[0 * parts + 1] + counts[1 * parts + 1] + counts[2 * parts + 1] + counts[3 * parts + 1],
      n);
  std::map<std::int64_t, double> seen;
  for (std::size_t p = 0; p < n; ++p)
    for (std::size_t j = 1; j < per; ++j) seen[ot[p * per + j]] += 1.0 / (n * k);
  double total = 0;
  for (std::uint64_t r = 0; r < l.rows(1); ++r) total += std::pow(degree[r * parts + 1], 0.75);
  for (std::uint64_t r = 0; r < l.rows(1); ++r) {
    const double want = std::pow(degree[r * parts + 1], 0.75) / total;
    const auto row = static_cast<std::int64_t>(r);
    const double got = seen.count(row) ? seen[row] : 0.0;
    if (want == 0) {
      EXPECT_EQ(got, 0.0) << "row " << r << " has no out-edges";
    } else {
      // 400000 draws: a share of about 1% lands within 10% (over 4 standard deviations).
      EXPECT_NEAR(got, want, 0.1 * want + 0.0005) << "row " << r;
    }
  }
}

}  // namespace
