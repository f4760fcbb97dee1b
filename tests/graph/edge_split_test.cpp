// split_edges: the exact held-out count, held-out edges gone from the training graph in both
// directions, training + held-out = the input's distinct edges, negatives that are distinct
// non-edges, weights kept with their edges, determinism by seed, and bad fractions named.
#include <graph/dataset.hpp>
#include <graph/detail/sample_select.hpp>
#include <graph/edge_split.hpp>
#include <graph/generate.hpp>
#include <wholememory/error.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace wholestore_test {
namespace {

using namespace wholestore::graph;
using edge = std::pair<std::int64_t, std::int64_t>;

std::set<edge> canonical_edges(const host_csr& g) {
  std::set<edge> out;
  for (std::int64_t u = 0; u < static_cast<std::int64_t>(g.num_nodes); ++u) {
    for (std::int64_t e = g.row_offsets[u]; e < g.row_offsets[u + 1]; ++e) {
      std::int64_t a = u, b = g.col_indices[e];
      if (!g.directed && a > b) std::swap(a, b);
      out.insert({a, b});
    }
  }
  return out;
}

host_csr undirected_graph() {
  generate_options go;
  go.num_nodes = 2000;
  go.num_edges = 16000;
  go.seed = 4;
  go.symmetrize = true;
  go.with_weights = true;
  go.drop_self_loops = true;
  host_csr g = generate_graph(go);
  g.directed = false;
  return g;
}

TEST(EdgeSplit, HoldsOutTheFractionInBothDirectionsAndDrawsNonEdges) {
  const host_csr g = undirected_graph();
  const std::set<edge> before = canonical_edges(g);
  const edge_split s = split_edges(g, 0.1, 77);
  EXPECT_EQ(s.test_edges.size(),
            static_cast<std::size_t>(std::llround(0.1 * static_cast<double>(before.size()))));
  EXPECT_EQ(s.test_non_edges.size(), s.test_edges.size());
  const std::set<edge> train = canonical_edges(s.train);
  for (const edge& e : s.test_edges) {
    EXPECT_LT(e.first, e.second);
    EXPECT_TRUE(before.count(e)) << "held-out " << e.first << "-" << e.second << " is no edge";
    EXPECT_FALSE(train.count(e)) << "held-out " << e.first << "-" << e.second << " still trains";
  }
  // No direction of a held-out edge survives in the CSR itself.
  const std::set<edge> held(s.test_edges.begin(), s.test_edges.end());
  for (std::int64_t u = 0; u < static_cast<std::int64_t>(g.num_nodes); ++u)
    for (std::int64_t e = s.train.row_offsets[u]; e < s.train.row_offsets[u + 1]; ++e)
      EXPECT_FALSE(
          held.count({std::min(u, s.train.col_indices[e]), std::max(u, s.train.col_indices[e])}));
  std::set<edge> together = train;
  together.insert(s.test_edges.begin(), s.test_edges.end());
  EXPECT_EQ(together, before);
  std::set<edge> negs;
  for (const edge& e : s.test_non_edges) {
    EXPECT_NE(e.first, e.second);
    EXPECT_FALSE(before.count(e)) << e.first << "-" << e.second << " is an edge";
    EXPECT_TRUE(negs.insert(e).second) << "negative repeated";
  }
  // Each row of the training graph is the input's row without the held-out pairs, in order,
  // weights with their edges (repeated edges have their own weights).
  ASSERT_EQ(s.train.edge_weights.size(), s.train.col_indices.size());
  for (std::int64_t u = 0; u < static_cast<std::int64_t>(g.num_nodes); ++u) {
    std::vector<std::pair<std::int64_t, float>> want, got;
    for (std::int64_t e = g.row_offsets[u]; e < g.row_offsets[u + 1]; ++e) {
      const std::int64_t v = g.col_indices[e];
      if (!held.count({std::min(u, v), std::max(u, v)})) want.emplace_back(v, g.edge_weights[e]);
    }
    for (std::int64_t e = s.train.row_offsets[u]; e < s.train.row_offsets[u + 1]; ++e)
      got.emplace_back(s.train.col_indices[e], s.train.edge_weights[e]);
    ASSERT_EQ(got, want) << "row " << u;
  }
}

// The split against the header's rule written plainly (std::set of every distinct edge, a full
// sort by (key, u, v), rejection against the set), on graphs with repeated edges and self
// loops, directed and undirected, at several fractions.
TEST(EdgeSplit, MatchesThePlainRuleOnGraphsWithRepeatsAndLoops) {
  using wholestore::graph::detail::draw;
  using wholestore::graph::detail::mix64;
  using wholestore::graph::detail::rand_below;
  for (bool directed : {false, true}) {
    generate_options go;
    go.num_nodes = 700;
    go.num_edges = 9000;
    go.seed = directed ? 8 : 9;
    go.symmetrize = !directed;
    go.with_weights = true;  // repeats and self loops kept
    host_csr g = generate_graph(go);
    g.directed = directed;
    const std::set<edge> all = canonical_edges(g);
    for (double fraction : {0.0, 0.01, 0.3, 0.95}) {
      const std::uint64_t seed = 1234;
      SCOPED_TRACE(std::string(directed ? "directed" : "undirected") + " fraction " +
                   std::to_string(fraction));
      const std::uint64_t salt = mix64(seed ^ 0x51ed270b5a1ed270ull);
      std::vector<std::tuple<std::uint64_t, std::int64_t, std::int64_t>> keyed;
      for (const edge& e : all) {
        keyed.emplace_back(mix64(mix64(static_cast<std::uint64_t>(e.first)) ^
                                 static_cast<std::uint64_t>(e.second)) ^
                               salt,
                           e.first, e.second);
      }
      std::sort(keyed.begin(), keyed.end());
      const auto held = static_cast<std::size_t>(std::llround(fraction * all.size()));
      std::vector<edge> want_held;
      for (std::size_t i = 0; i < held; ++i)
        want_held.emplace_back(std::get<1>(keyed[i]), std::get<2>(keyed[i]));
      std::sort(want_held.begin(), want_held.end());
      std::vector<edge> want_neg;
      std::set<edge> drawn;
      const std::uint64_t key = mix64(seed ^ 0x7f4a7c159e3779b9ull);
      const auto n = static_cast<std::uint64_t>(g.num_nodes);
      for (std::uint64_t c = 0; want_neg.size() < held; ++c) {
        auto x = static_cast<std::int64_t>(rand_below(draw(key, 2 * c), n));
        auto y = static_cast<std::int64_t>(rand_below(draw(key, 2 * c + 1), n));
        if (x == y) continue;
        if (!directed && x > y) std::swap(x, y);
        if (all.count({x, y}) || !drawn.insert({x, y}).second) continue;
        want_neg.emplace_back(x, y);
      }
      const edge_split s = split_edges(g, fraction, seed);
      EXPECT_EQ(s.test_edges, want_held);
      EXPECT_EQ(s.test_non_edges, want_neg);
      const std::set<edge> held_set(want_held.begin(), want_held.end());
      std::size_t kept = 0;
      for (std::int64_t u = 0; u < static_cast<std::int64_t>(g.num_nodes); ++u) {
        for (std::int64_t e = g.row_offsets[u]; e < g.row_offsets[u + 1]; ++e) {
          std::int64_t x = u, y = g.col_indices[e];
          if (!directed && x > y) std::swap(x, y);
          if (held_set.count({x, y})) continue;
          ASSERT_LT(kept, s.train.col_indices.size());
          EXPECT_EQ(s.train.col_indices[kept], g.col_indices[e]);
          EXPECT_EQ(s.train.edge_weights[kept], g.edge_weights[e]);
          ++kept;
        }
        EXPECT_EQ(s.train.row_offsets[u + 1], static_cast<std::int64_t>(kept));
      }
      EXPECT_EQ(kept, s.train.col_indices.size());
    }
  }
}

TEST(EdgeSplit, TheSeedDecidesTheSplit) {
  const host_csr g = undirected_graph();
  const edge_split a = split_edges(g, 0.2, 5), b = split_edges(g, 0.2, 5),
                   c = split_edges(g, 0.2, 6);
  EXPECT_EQ(a.test_edges, b.test_edges);
  EXPECT_EQ(a.test_non_edges, b.test_non_edges);
  EXPECT_EQ(a.train.col_indices, b.train.col_indices);
  EXPECT_NE(a.test_edges, c.test_edges);
  const edge_split none = split_edges(g, 0.0, 5);
  EXPECT_TRUE(none.test_edges.empty());
  EXPECT_EQ(none.train.col_indices, g.col_indices);
}

TEST(EdgeSplit, BadFractionsAreNamed) {
  const host_csr g = undirected_graph();
  for (double f : {-0.1, 1.0, std::nan("")}) {
    try {
      split_edges(g, f, 1);
      ADD_FAILURE() << "fraction " << f << " was accepted";
    } catch (const wholememory::logic_error& e) {
      EXPECT_NE(std::string(e.what()).find("held-out fraction must be in [0, 1)"),
                std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace wholestore_test
