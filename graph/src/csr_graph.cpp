// csr_graph: copying host graphs into WholeMemory.  Loading from files is in load_graph.cpp.
// make_graph agrees with the other ranks on its input before it builds anything: every rank
// must hold the same host graph (sizes and a digest of every array it copies).
#include <graph/csr_graph.hpp>

#include "csr_check.hpp"
#include "edge_layout.hpp"

#include <graph/detail/sample_select.hpp>
#include <wholememory/bootstrap.hpp>
#include <wholememory/convert.hpp>
#include <wholememory/device.hpp>
#include <wholememory/error.hpp>

#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace wholestore::graph {

namespace wm = wholememory;

wm::wm_tensor csr_graph::features_tensor() const {
  WM_EXPECTS(has_features(), "the graph has no node features");
  wm::wm_tensor t;
  t.memory = &node_features;
  t.type = feature_type;
  t.rows = num_nodes;
  t.cols = feature_dim;
  t.row_stride = feature_dim;
  t.col_offset = 0;
  return t;
}

namespace {

// Whether every part of `edges` (elements of `elem` bytes) starts at the first edge of the
// matching rank's nodes: first_edge[r] (row_offsets at the first node of rank r's part) * elem.
bool edges_split_at(const wm::allocation& edges, std::size_t elem, std::uint64_t num_edges,
                    const std::vector<std::uint64_t>& first_edge) {
  if (!edges || edges.size() != num_edges * elem ||
      edges.num_parts() + 1 != static_cast<int>(first_edge.size())) {
    return false;
  }
  const wm::partition& parts = edges.get_partition();
  for (int r = 0; r < parts.num_parts(); ++r) {
    if (parts.part_offset(r) != first_edge[static_cast<std::size_t>(r)] * elem) return false;
  }
  return true;
}

}  // namespace

bool edges_follow_nodes(const csr_graph& g) {
  if (!g.row_offsets || !g.col_indices || g.type() != wm::memory_type::distributed) return false;
  wm::communicator& comm = g.row_offsets.comm();
  // Every rank's first row offset (-1 where its part holds none): with the partitions, which
  // every rank knows, they place every rank's edges.
  const wm::part_info rows = g.row_offsets.local_part();
  std::int64_t first = -1;
  if (rows.bytes >= 8 && rows.offset % 8 == 0) wm::copy_bytes(&first, rows.ptr, 8);
  std::vector<std::int64_t> firsts(static_cast<std::size_t>(comm.size()));
  comm.get_bootstrap().allgather(&first, firsts.data(), sizeof(first));

  const wm::partition& row_parts = g.row_offsets.get_partition();
  const std::uint64_t n = g.num_nodes;
  if (row_parts.total_bytes != (n + 1) * 8 || row_parts.num_parts() != comm.size()) return false;
  // first_edge[r]: row_offsets[a_r] (a_r the first entry of rank r's part), found on the first
  // rank from r on whose part is not empty (it starts at a_r too); num_edges past the last.
  std::vector<std::uint64_t> first_edge(static_cast<std::size_t>(comm.size()) + 1, g.num_edges);
  for (int r = comm.size() - 1; r >= 0; --r) {
    const auto i = static_cast<std::size_t>(r);
    if (row_parts.part_offset(r) % 8 != 0) return false;
    const std::uint64_t a = row_parts.part_offset(r) / 8;
    if (a >= n) continue;  // no node: no edges (first_edge stays num_edges)
    if (row_parts.part_bytes(r) == 0) {
      first_edge[i] = first_edge[i + 1];
      continue;
    }
    if (firsts[i] < 0 || static_cast<std::uint64_t>(firsts[i]) > g.num_edges) return false;
    first_edge[i] = static_cast<std::uint64_t>(firsts[i]);
  }
  const std::size_t col_elem = wm::dtype_size(g.col_type);
  if (!edges_split_at(g.col_indices, col_elem, g.num_edges, first_edge)) return false;
  return !g.has_weights() || edges_split_at(g.edge_weights, 4, g.num_edges, first_edge);
}

namespace {

// Elements [first, first + count) of an array: the part a rank copies.
using check_part = std::function<void(std::uint64_t first, std::size_t count)>;

// Collective: an array of `count` elements of `elem` bytes each, every rank writing its own
// part from `src` (the whole array, identical on all ranks), after `check` (when given) saw
// the part's elements.  Rows of `row_elems` elements never straddle parts.  The parts are an
// even split (the array is at least one row long) unless `part_bytes` gives them (summing to
// count * elem).
wm::allocation make_array(const std::shared_ptr<wm::communicator>& comm, const void* src,
                          std::size_t count, std::size_t elem, std::size_t row_elems,
                          wm::memory_type type, wm::memory_location location, const char* name,
                          const check_part& check = {},
                          const std::vector<std::size_t>& part_bytes = {}) {
  wm::allocation_options opts;
  opts.name = std::string("the graph's ") + name;
  opts.granularity = elem * std::max<std::size_t>(row_elems, 1);
  opts.part_bytes = part_bytes;
  std::size_t bytes =
      part_bytes.empty() ? std::max<std::size_t>(count * elem, opts.granularity) : count * elem;
  auto mem = wm::allocation::create(comm, bytes, type, location, opts);
  wm::part_info mine = mem.local_part();
  std::size_t have = count * elem;
  if (mine.offset < have && mine.bytes > 0) {
    std::size_t n = std::min(mine.bytes, have - mine.offset);
    if (check) check(mine.offset / elem, n / elem);
    wm::copy_bytes(mine.ptr, static_cast<const char*>(src) + mine.offset, n);
  }
  comm->barrier(nullptr);
  return mem;
}

// A digest of a byte range: four interleaved multiply-xor lanes over 8-byte words, several
// GB/s on one core.  It tells apart graphs that differ by accident (another generator seed,
// another file), not deliberate collisions.
std::uint64_t digest(const void* data, std::size_t bytes) {
  constexpr std::uint64_t k = 0x9E3779B97F4A7C15ull;
  std::uint64_t lane[4] = {k, k ^ 1, k ^ 2, k ^ 3};
  const auto* p = static_cast<const unsigned char*>(data);
  std::size_t i = 0;
  for (; i + 32 <= bytes; i += 32) {
    for (std::size_t l = 0; l < 4; ++l) {
      std::uint64_t w;
      std::memcpy(&w, p + i + 8 * l, 8);
      lane[l] = (lane[l] ^ w) * 0xFF51AFD7ED558CCDull;
      lane[l] ^= lane[l] >> 29;
    }
  }
  std::uint64_t h = bytes;
  for (std::size_t l = 0; l < 4; ++l) h = detail::mix64(h ^ lane[l]);
  for (; i < bytes; ++i) h = detail::mix64(h ^ p[i]);
  return h;
}

template <typename T>
std::string digest_text(const std::vector<T>& v) {
  std::ostringstream os;
  os << v.size() << " values, digest 0x" << std::hex << digest(v.data(), v.size() * sizeof(T));
  return os.str();
}

// What every rank must pass to make_graph alike: the host graph (sizes and a digest of each
// array it copies) and the options that decide what is made.
std::vector<std::pair<std::string, std::string>> what_is_made(const host_csr& graph,
                                                              const load_options& placement,
                                                              wm::dtype feature_type) {
  const bool weights = !graph.edge_weights.empty() && placement.load_weights;
  const bool features =
      !graph.node_features.empty() && graph.feature_dim > 0 && placement.load_features;
  std::vector<std::pair<std::string, std::string>> v = {
      {"num_nodes", std::to_string(graph.num_nodes)},
      {"num_edges", std::to_string(graph.num_edges())},
      {"directed", graph.directed ? "true" : "false"},
      {"edge weights made", weights ? "yes" : "no"},
      {"node features made", features ? "yes" : "no"},
  };
  if (features) {
    v.emplace_back("feature_dim", std::to_string(graph.feature_dim));
    v.emplace_back("feature_type", wm::dtype_name(feature_type));
  }
  v.emplace_back("row_offsets", digest_text(graph.row_offsets));
  v.emplace_back("col_indices", digest_text(graph.col_indices));
  if (weights) v.emplace_back("edge_weights", digest_text(graph.edge_weights));
  if (features) v.emplace_back("node_features", digest_text(graph.node_features));
  return v;
}

}  // namespace

csr_graph make_graph(std::shared_ptr<wm::communicator> comm, const host_csr& graph,
                     wm::memory_type type, wm::memory_location location, wm::dtype feature_type) {
  load_options placement;
  placement.type = type;
  placement.location = location;
  return make_graph(std::move(comm), graph, placement, feature_type);
}

csr_graph make_graph(std::shared_ptr<wm::communicator> comm, const host_csr& graph,
                     const load_options& placement, wm::dtype feature_type) {
  const wm::memory_type type = placement.type;
  const wm::memory_location location = placement.location;
  WM_EXPECTS(comm != nullptr, "make_graph: no communicator");
  // The host graph's sizes on every rank (one rank's bad input throws on all), then the same
  // graph and options on every rank: slices of different graphs must never make one CSR.
  wm::bootstrap& bs = comm->get_bootstrap();
  wm::agree(bs, "make_graph", "checking its host graph", [&] {
    WM_EXPECTS(graph.num_nodes < std::numeric_limits<std::uint64_t>::max() &&
                   graph.row_offsets.size() == graph.num_nodes + 1,
               "host_csr has " << graph.row_offsets.size() << " row offsets for " << graph.num_nodes
                               << " nodes");
    WM_EXPECTS(graph.edge_weights.empty() || graph.edge_weights.size() == graph.num_edges(),
               "host_csr has " << graph.edge_weights.size() << " edge weights for "
                               << graph.num_edges() << " edges");
    WM_EXPECTS(
        graph.node_features.empty() ||
            (graph.feature_dim > 0 &&
             graph.num_nodes <= std::numeric_limits<std::uint64_t>::max() / graph.feature_dim &&
             graph.node_features.size() == graph.num_nodes * graph.feature_dim),
        "host_csr has " << graph.node_features.size() << " feature values for " << graph.num_nodes
                        << " nodes x " << graph.feature_dim);
    WM_EXPECTS(feature_type == wm::dtype::float32 || feature_type == wm::dtype::float16 ||
                   feature_type == wm::dtype::bfloat16,
               "node features cannot be stored as " << wm::dtype_name(feature_type));
    return std::string();
  });
  wm::agree_on_values(bs, "make_graph", what_is_made(graph, placement, feature_type));
  csr_graph g;
  g.num_nodes = graph.num_nodes;
  g.num_edges = graph.num_edges();
  g.directed = graph.directed;
  g.col_type = graph.num_nodes < (std::uint64_t{1} << 31) ? wm::dtype::int32 : wm::dtype::int64;
  const std::string source = "the host graph of make_graph";
  // A distributed graph keeps each node's edges on the rank that holds its row offsets
  // (edge_layout.hpp): the edge arrays are cut where the row offsets are.  Every rank holds
  // the whole (agreed) host graph, so each finds the cuts and checks them alike, before
  // anything is allocated.
  const wm::partition row_parts = detail::row_offsets_partition(g.num_nodes, comm->size());
  std::vector<std::uint64_t> edge_cuts;
  if (type == wm::memory_type::distributed) {
    const std::vector<std::uint64_t> nodes = detail::first_nodes(row_parts, g.num_nodes);
    std::vector<std::int64_t> offsets(nodes.size());
    for (std::size_t i = 0; i < nodes.size(); ++i) offsets[i] = graph.row_offsets[nodes[i]];
    try {
      edge_cuts = detail::first_edges(source, g.num_nodes, g.num_edges, nodes, offsets);
    } catch (const wm::logic_error&) {
      // Name the first fault of row_offsets, as the part checks below would have.
      detail::csr_checker whole(source, g.num_nodes, g.num_edges);
      whole.row_offsets(graph.row_offsets.data(), 0, graph.row_offsets.size());
      whole.finish();
      throw;
    }
  }
  auto edge_parts = [&](std::size_t elem) {
    return edge_cuts.empty() ? std::vector<std::size_t>{}
                             : detail::edge_part_bytes(edge_cuts, elem);
  };
  // Each rank checks the part it copies (rule 6), column indices before they are narrowed.
  detail::csr_checker checker(source, g.num_nodes, g.num_edges);
  g.row_offsets = make_array(comm, graph.row_offsets.data(), graph.row_offsets.size(), 8, 1, type,
                             location, "row_offsets", [&](std::uint64_t first, std::size_t count) {
                               checker.row_offsets(graph.row_offsets.data() + first, first, count);
                             });
  WM_EXPECTS(g.row_offsets.get_partition().offsets == row_parts.offsets,
             "make_graph: internal error: row_offsets is not split as edge_layout.hpp assumes");
  const check_part check_cols = [&](std::uint64_t first, std::size_t count) {
    checker.col_indices(graph.col_indices.data() + first, first, count);
  };
  if (g.col_type == wm::dtype::int32) {
    std::vector<std::int32_t> cols(graph.col_indices.begin(), graph.col_indices.end());
    g.col_indices = make_array(comm, cols.data(), cols.size(), 4, 1, type, location, "col_indices",
                               check_cols, edge_parts(4));
  } else {
    g.col_indices = make_array(comm, graph.col_indices.data(), graph.col_indices.size(), 8, 1, type,
                               location, "col_indices", check_cols, edge_parts(8));
  }
  if (!graph.edge_weights.empty() && placement.load_weights) {
    g.edge_weights = make_array(
        comm, graph.edge_weights.data(), graph.edge_weights.size(), 4, 1, type, location,
        "edge_weights",
        [&](std::uint64_t first, std::size_t count) {
          checker.edge_weights(graph.edge_weights.data() + first, first, count);
        },
        edge_parts(4));
  }
  detail::agree_on_findings(comm->get_bootstrap(), checker);
  if (!graph.node_features.empty() && graph.feature_dim > 0 && placement.load_features) {
    g.feature_dim = graph.feature_dim;
    g.feature_type = feature_type;
    std::size_t n = graph.node_features.size();
    std::size_t esz = wm::dtype_size(feature_type);
    std::vector<unsigned char> conv(n * esz);
    for (std::size_t i = 0; i < n; ++i) {
      float v = graph.node_features[i];
      switch (feature_type) {
        case wm::dtype::float32:
          std::memcpy(&conv[i * 4], &v, 4);
          break;
        case wm::dtype::float16: {
          auto h = wm::double_to_half(v);
          std::memcpy(&conv[i * 2], &h, 2);
          break;
        }
        case wm::dtype::bfloat16: {
          auto h = wm::double_to_bfloat16(v);
          std::memcpy(&conv[i * 2], &h, 2);
          break;
        }
        default:
          WM_FAIL(wm::logic_error,
                  "node features cannot be stored as " << wm::dtype_name(feature_type));
      }
    }
    g.node_features = make_array(placement.features_comm ? placement.features_comm : comm,
                                 conv.data(), graph.num_nodes * graph.feature_dim, esz,
                                 graph.feature_dim, placement.features_type.value_or(type),
                                 placement.features_location.value_or(location), "node_features");
  }
  return g;
}

}  // namespace wholestore::graph
