// split_edges (edge_split.hpp): keys per distinct edge, the smallest held out, the training
// CSR rebuilt without them, and non-edges drawn with a hash set of the input's edges.
#include <graph/detail/sample_select.hpp>
#include <graph/edge_split.hpp>
#include <wholememory/error.hpp>

#include <algorithm>
#include <cmath>
#include <tuple>
#include <unordered_set>

namespace wholestore::graph {

namespace {

std::uint64_t pair_code(std::int64_t a, std::int64_t b) {
  return detail::mix64(detail::mix64(static_cast<std::uint64_t>(a)) ^
                       static_cast<std::uint64_t>(b));
}

struct pair_hash {
  std::size_t operator()(const std::pair<std::int64_t, std::int64_t>& p) const {
    return static_cast<std::size_t>(pair_code(p.first, p.second));
  }
};

}  // namespace

edge_split split_edges(const host_csr& g, double test_fraction, std::uint64_t seed) {
  WM_EXPECTS(test_fraction >= 0.0 && test_fraction < 1.0,
             "split_edges: the held-out fraction must be in [0, 1), got " << test_fraction);
  const bool undirected = !g.directed;
  const auto n = static_cast<std::int64_t>(g.num_nodes);
  // Distinct edges (canonical direction for undirected graphs).
  std::unordered_set<std::pair<std::int64_t, std::int64_t>, pair_hash> edges;
  for (std::int64_t u = 0; u < n; ++u) {
    for (std::int64_t e = g.row_offsets[u]; e < g.row_offsets[u + 1]; ++e) {
      std::int64_t a = u, b = g.col_indices[e];
      if (undirected && a > b) std::swap(a, b);
      edges.insert({a, b});
    }
  }
  struct keyed {
    std::uint64_t key;
    std::int64_t u, v;
  };
  std::vector<keyed> all;
  all.reserve(edges.size());
  const std::uint64_t salt = detail::mix64(seed ^ 0x51ed270b5a1ed270ull);
  for (const auto& [a, b] : edges) all.push_back({pair_code(a, b) ^ salt, a, b});
  const auto held = static_cast<std::size_t>(std::llround(test_fraction * all.size()));
  auto order = [](const keyed& x, const keyed& y) {
    return std::tie(x.key, x.u, x.v) < std::tie(y.key, y.u, y.v);
  };
  std::partial_sort(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(held), all.end(), order);
  edge_split out;
  std::unordered_set<std::pair<std::int64_t, std::int64_t>, pair_hash> removed;
  for (std::size_t i = 0; i < held; ++i) {
    out.test_edges.emplace_back(all[i].u, all[i].v);
    removed.insert({all[i].u, all[i].v});
  }
  std::sort(out.test_edges.begin(), out.test_edges.end());

  // Training CSR: the input without the held-out pairs, order and weights kept.
  host_csr& t = out.train;
  t.num_nodes = g.num_nodes;
  t.directed = g.directed;
  t.feature_dim = g.feature_dim;
  t.node_features = g.node_features;
  t.node_ids = g.node_ids;
  t.row_offsets.assign(1, 0);
  const bool weights = !g.edge_weights.empty();
  for (std::int64_t u = 0; u < n; ++u) {
    for (std::int64_t e = g.row_offsets[u]; e < g.row_offsets[u + 1]; ++e) {
      std::int64_t a = u, b = g.col_indices[e];
      if (undirected && a > b) std::swap(a, b);
      if (removed.count({a, b})) continue;
      t.col_indices.push_back(g.col_indices[e]);
      if (weights) t.edge_weights.push_back(g.edge_weights[e]);
    }
    t.row_offsets.push_back(static_cast<std::int64_t>(t.col_indices.size()));
  }

  // Non-edges: uniform pairs from the seed's stream, rejected when an edge or a repeat.
  const double pairs = undirected ? n * (n - 1.0) / 2.0 : n * (n - 1.0);
  WM_EXPECTS(pairs - static_cast<double>(edges.size()) >= 2.0 * static_cast<double>(held),
             "split_edges: the graph has too few non-edges ("
                 << pairs - static_cast<double>(edges.size()) << ") to draw " << held
                 << " negatives from");
  std::unordered_set<std::pair<std::int64_t, std::int64_t>, pair_hash> drawn;
  const std::uint64_t key = detail::mix64(seed ^ 0x7f4a7c159e3779b9ull);
  for (std::uint64_t c = 0; out.test_non_edges.size() < held; ++c) {
    std::int64_t a = static_cast<std::int64_t>(
        detail::rand_below(detail::draw(key, 2 * c), static_cast<std::uint64_t>(n)));
    std::int64_t b = static_cast<std::int64_t>(
        detail::rand_below(detail::draw(key, 2 * c + 1), static_cast<std::uint64_t>(n)));
    if (a == b) continue;
    if (undirected && a > b) std::swap(a, b);
    if (edges.count({a, b})) continue;
    if (!drawn.insert({a, b}).second) continue;
    out.test_non_edges.emplace_back(a, b);
  }
  return out;
}

}  // namespace wholestore::graph
