/*
 * The held-out edges of link-prediction evaluation: split_edges removes a fraction of a graph's
 * edges (an undirected edge leaves with both of its directions) and draws as many non-edges,
 * deterministically from a seed.
 *
 * Every distinct edge (for an undirected graph: every pair u < v with an edge; repeated edges
 * count once and leave together) gets the key mix64(seed, u, v); the round(fraction * edges)
 * edges of smallest key (ties by u, then v) are held out.  Negatives are pairs (a, b), a != b,
 * with no edge between them in the input graph (in either direction for an undirected graph),
 * drawn uniformly and without repeats from the seed's stream, as many as the held-out edges.
 * The training graph keeps every other edge, in its original order, with its weight; node
 * features and ids are kept.
 */
#pragma once

#include <graph/dataset.hpp>

#include <cstdint>
#include <utility>
#include <vector>

namespace wholestore::graph {

struct edge_split {
  host_csr train;
  std::vector<std::pair<std::int64_t, std::int64_t>> test_edges;  ///< held out, u < v if undirected
  std::vector<std::pair<std::int64_t, std::int64_t>> test_non_edges;  ///< same count
};

/// Throws logic_error for a fraction outside [0, 1) and when the graph has too few non-edges
/// to draw from.
edge_split split_edges(const host_csr& graph, double test_fraction, std::uint64_t seed);

}  // namespace wholestore::graph
