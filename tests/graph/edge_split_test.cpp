// split_edges: the exact held-out count, held-out edges gone from the training graph in both
// directions, training + held-out = the input's distinct edges, negatives that are distinct
// non-edges, weights kept with their edges, determinism by seed, and bad fractions named.
#include <graph/dataset.hpp>
#include <graph/edge_split.hpp>
#include <graph/generate.hpp>
#include <wholememory/error.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>
#include <string>
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
