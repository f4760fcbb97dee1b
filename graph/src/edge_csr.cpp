// Edge arrays to a host CSR (edge_csr.hpp): a counting sort by row, then, when asked, each row
// sorted by neighbor with its duplicates dropped.
#include "edge_csr.hpp"

#include <wholememory/error.hpp>

#include <algorithm>
#include <utility>

namespace wholestore::graph::detail {

namespace {

// Sorts each row by neighbor (stable: the first weight read wins) and keeps one copy.
void drop_duplicates(host_csr& g) {
  const bool weighted = !g.edge_weights.empty();
  std::vector<std::pair<std::int64_t, float>> row;
  std::uint64_t out = 0;
  std::int64_t row_start = 0;
  for (std::uint64_t v = 0; v < g.num_nodes; ++v) {
    const std::int64_t begin = row_start, end = g.row_offsets[v + 1];
    row.clear();
    for (std::int64_t e = begin; e < end; ++e) {
      const auto i = static_cast<std::uint64_t>(e);
      row.emplace_back(g.col_indices[i], weighted ? g.edge_weights[i] : 0.0f);
    }
    std::stable_sort(row.begin(), row.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    row_start = end;
    g.row_offsets[v] = static_cast<std::int64_t>(out);
    for (std::size_t k = 0; k < row.size(); ++k) {
      if (k > 0 && row[k].first == row[k - 1].first) continue;
      g.col_indices[out] = row[k].first;
      if (weighted) g.edge_weights[out] = row[k].second;
      ++out;
    }
  }
  g.row_offsets[g.num_nodes] = static_cast<std::int64_t>(out);
  g.col_indices.resize(out);
  if (weighted) g.edge_weights.resize(out);
}

}  // namespace

void build_csr(host_csr& g, edge_arrays&& edges, const convert_options& options) {
  const std::uint64_t n = g.num_nodes, m = edges.src.size();
  WM_EXPECTS(edges.dst.size() == m && (edges.weights.empty() || edges.weights.size() == m),
             "build_csr: " << m << " sources, " << edges.dst.size() << " destinations and "
                           << edges.weights.size() << " weights");
  const bool sym = options.symmetrize, weighted = !edges.weights.empty();
  const bool loops = !options.drop_self_loops;
  // Row and neighbor of edge e: by source, or by destination when reversed.
  const std::vector<std::int64_t>& rows = options.reverse ? edges.dst : edges.src;
  const std::vector<std::int64_t>& cols = options.reverse ? edges.src : edges.dst;
  g.directed = !sym;
  g.direction = options.reverse ? edge_direction::in : edge_direction::out;
  g.row_offsets.assign(n + 1, 0);
  for (std::uint64_t e = 0; e < m; ++e) {
    const bool loop = rows[e] == cols[e];
    if (loop && !loops) continue;
    ++g.row_offsets[static_cast<std::uint64_t>(rows[e]) + 1];
    if (sym && !loop) ++g.row_offsets[static_cast<std::uint64_t>(cols[e]) + 1];
  }
  for (std::uint64_t v = 0; v < n; ++v) g.row_offsets[v + 1] += g.row_offsets[v];
  const std::uint64_t total = static_cast<std::uint64_t>(g.row_offsets[n]);
  g.col_indices.resize(total);
  g.edge_weights.clear();
  if (weighted) g.edge_weights.resize(total);
  std::vector<std::int64_t> cursor(g.row_offsets.begin(), g.row_offsets.end() - 1);
  auto place = [&](std::int64_t u, std::int64_t v, float w) {
    const std::int64_t at = cursor[static_cast<std::uint64_t>(u)]++;
    g.col_indices[static_cast<std::uint64_t>(at)] = v;
    if (weighted) g.edge_weights[static_cast<std::uint64_t>(at)] = w;
  };
  for (std::uint64_t e = 0; e < m; ++e) {
    const bool loop = rows[e] == cols[e];
    if (loop && !loops) continue;
    const float w = weighted ? edges.weights[e] : 0.0f;
    place(rows[e], cols[e], w);
    if (sym && !loop) place(cols[e], rows[e], w);
  }
  std::vector<std::int64_t>().swap(edges.src);
  std::vector<std::int64_t>().swap(edges.dst);
  std::vector<float>().swap(edges.weights);
  if (options.drop_duplicates) drop_duplicates(g);
}

}  // namespace wholestore::graph::detail
