// split_edges (edge_split.hpp): keys per distinct edge, the smallest held out, the training
// CSR rebuilt without them, and non-edges drawn against the input's edges.  The distinct
// edges are kept as a CSR of their own (by first endpoint, each list sorted, no repeats), so
// that membership is a binary search in one short list: hash sets of every edge took minutes
// and gigabytes on a products-sized graph.
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

// The distinct edges of a graph: pair (a, b) (a <= b for an undirected graph) is ends[i] for
// one i in [offsets[a], offsets[a + 1]), lists sorted, so positions follow (a, b) order.
struct distinct_edges {
  std::vector<std::int64_t> offsets, ends;

  distinct_edges(const host_csr& g, bool undirected) {
    const auto n = static_cast<std::int64_t>(g.num_nodes);
    auto canonical = [&](std::int64_t u, std::int64_t e) {
      std::int64_t a = u, b = g.col_indices[e];
      if (undirected && a > b) std::swap(a, b);
      return std::make_pair(a, b);
    };
    offsets.assign(n + 1, 0);
    for (std::int64_t u = 0; u < n; ++u)
      for (std::int64_t e = g.row_offsets[u]; e < g.row_offsets[u + 1]; ++e)
        ++offsets[canonical(u, e).first + 1];
    for (std::int64_t a = 0; a < n; ++a) offsets[a + 1] += offsets[a];
    ends.resize(static_cast<std::size_t>(offsets[n]));
    std::vector<std::int64_t> next(offsets.begin(), offsets.end() - 1);
    for (std::int64_t u = 0; u < n; ++u) {
      for (std::int64_t e = g.row_offsets[u]; e < g.row_offsets[u + 1]; ++e) {
        const auto [a, b] = canonical(u, e);
        ends[next[a]++] = b;
      }
    }
    // Sort each list and drop repeats, compacting in place.
    std::int64_t out = 0;
    for (std::int64_t a = 0; a < n; ++a) {
      const auto first = ends.begin() + offsets[a], last = ends.begin() + offsets[a + 1];
      std::sort(first, last);
      const auto unique_end = std::unique(first, last);
      offsets[a] = out;
      out = std::copy(first, unique_end, ends.begin() + out) - ends.begin();
    }
    offsets[n] = out;
    ends.resize(static_cast<std::size_t>(out));
    ends.shrink_to_fit();
  }
  std::size_t size() const { return ends.size(); }
  /// Position of (a, b), or size() when it is not an edge.
  std::size_t find(std::int64_t a, std::int64_t b) const {
    const auto first = ends.begin() + offsets[a], last = ends.begin() + offsets[a + 1];
    const auto it = std::lower_bound(first, last, b);
    return it != last && *it == b ? static_cast<std::size_t>(it - ends.begin()) : size();
  }
  /// The first endpoint of the edge at position i.
  std::int64_t first_of(std::size_t i) const {
    return static_cast<std::int64_t>(
               std::upper_bound(offsets.begin(), offsets.end(), static_cast<std::int64_t>(i)) -
               offsets.begin()) -
           1;
  }
};

}  // namespace

edge_split split_edges(const host_csr& g, double test_fraction, std::uint64_t seed) {
  WM_EXPECTS(test_fraction >= 0.0 && test_fraction < 1.0,
             "split_edges: the held-out fraction must be in [0, 1), got " << test_fraction);
  const bool undirected = !g.directed;
  const auto n = static_cast<std::int64_t>(g.num_nodes);
  const distinct_edges edges(g, undirected);

  // Keys; ties go to the smaller (u, v), which is the smaller position.
  struct keyed {
    std::uint64_t key;
    std::size_t at;
  };
  std::vector<keyed> all(edges.size());
  const std::uint64_t salt = detail::mix64(seed ^ 0x51ed270b5a1ed270ull);
  for (std::int64_t a = 0; a < n; ++a) {
    for (std::int64_t i = edges.offsets[a]; i < edges.offsets[a + 1]; ++i) {
      const auto at = static_cast<std::size_t>(i);
      all[at] = {pair_code(a, edges.ends[at]) ^ salt, at};
    }
  }
  const auto held = static_cast<std::size_t>(std::llround(test_fraction * all.size()));
  auto order = [](const keyed& x, const keyed& y) {
    return std::tie(x.key, x.at) < std::tie(y.key, y.at);
  };
  if (held < all.size()) {
    std::nth_element(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(held), all.end(),
                     order);
  }
  edge_split out;
  for (std::size_t i = 0; i < held; ++i) {
    out.test_edges.emplace_back(edges.first_of(all[i].at), edges.ends[all[i].at]);
  }
  all = {};
  std::sort(out.test_edges.begin(), out.test_edges.end());

  // Training CSR: the input without the held-out pairs, order and weights kept.
  host_csr& t = out.train;
  t.num_nodes = g.num_nodes;
  t.directed = g.directed;
  t.feature_dim = g.feature_dim;
  t.node_features = g.node_features;
  t.node_ids = g.node_ids;
  t.row_offsets.assign(1, 0);
  t.row_offsets.reserve(static_cast<std::size_t>(n) + 1);
  const bool weights = !g.edge_weights.empty();
  t.col_indices.reserve(g.col_indices.size());
  if (weights) t.edge_weights.reserve(g.edge_weights.size());
  // What each row loses: the other endpoint of its held-out pairs (both rows of an undirected
  // pair), sorted, as a small CSR; rows that lose nothing are copied whole.
  std::vector<std::int64_t> lost_at(static_cast<std::size_t>(n) + 1, 0), lost;
  for (const auto& [a, b] : out.test_edges) {
    ++lost_at[static_cast<std::size_t>(a) + 1];
    if (undirected) ++lost_at[static_cast<std::size_t>(b) + 1];
  }
  for (std::size_t u = 0; u < static_cast<std::size_t>(n); ++u) lost_at[u + 1] += lost_at[u];
  lost.resize(static_cast<std::size_t>(lost_at[static_cast<std::size_t>(n)]));
  {
    std::vector<std::int64_t> next(lost_at.begin(), lost_at.end() - 1);
    for (const auto& [a, b] : out.test_edges) {
      lost[static_cast<std::size_t>(next[static_cast<std::size_t>(a)]++)] = b;
      if (undirected) lost[static_cast<std::size_t>(next[static_cast<std::size_t>(b)]++)] = a;
    }
  }
  for (std::int64_t u = 0; u < n; ++u)
    std::sort(lost.begin() + lost_at[u], lost.begin() + lost_at[u + 1]);
  for (std::int64_t u = 0; u < n; ++u) {
    const std::int64_t begin = g.row_offsets[u], end = g.row_offsets[u + 1];
    const auto lost_begin = lost.begin() + lost_at[u], lost_end = lost.begin() + lost_at[u + 1];
    if (lost_begin == lost_end) {
      t.col_indices.insert(t.col_indices.end(), g.col_indices.begin() + begin,
                           g.col_indices.begin() + end);
      if (weights) {
        t.edge_weights.insert(t.edge_weights.end(), g.edge_weights.begin() + begin,
                              g.edge_weights.begin() + end);
      }
    } else {
      for (std::int64_t e = begin; e < end; ++e) {
        if (std::binary_search(lost_begin, lost_end, g.col_indices[e])) continue;
        t.col_indices.push_back(g.col_indices[e]);
        if (weights) t.edge_weights.push_back(g.edge_weights[e]);
      }
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
  drawn.reserve(held);
  const std::uint64_t key = detail::mix64(seed ^ 0x7f4a7c159e3779b9ull);
  for (std::uint64_t c = 0; out.test_non_edges.size() < held; ++c) {
    std::int64_t a = static_cast<std::int64_t>(
        detail::rand_below(detail::draw(key, 2 * c), static_cast<std::uint64_t>(n)));
    std::int64_t b = static_cast<std::int64_t>(
        detail::rand_below(detail::draw(key, 2 * c + 1), static_cast<std::uint64_t>(n)));
    if (a == b) continue;
    if (undirected && a > b) std::swap(a, b);
    if (edges.find(a, b) != edges.size()) continue;
    if (!drawn.insert({a, b}).second) continue;
    out.test_non_edges.emplace_back(a, b);
  }
  return out;
}

}  // namespace wholestore::graph
