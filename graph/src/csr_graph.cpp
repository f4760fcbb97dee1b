// csr_graph: copying host graphs into WholeMemory.  Loading from files is in load_graph.cpp.
#include <graph/csr_graph.hpp>

#include "csr_check.hpp"

#include <wholememory/convert.hpp>
#include <wholememory/device.hpp>
#include <wholememory/error.hpp>

#include <algorithm>
#include <cstring>
#include <functional>
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

// Elements [first, first + count) of an array: the part a rank copies.
using check_part = std::function<void(std::uint64_t first, std::size_t count)>;

// Collective: an array of `count` elements of `elem` bytes each, every rank writing its own
// part from `src` (the whole array, identical on all ranks), after `check` (when given) saw
// the part's elements.  Rows of `row_elems` elements never straddle parts.
wm::wholememory make_array(const std::shared_ptr<wm::communicator>& comm, const void* src,
                           std::size_t count, std::size_t elem, std::size_t row_elems,
                           wm::memory_type type, wm::memory_location location,
                           const check_part& check = {}) {
  wm::allocation_options opts;
  opts.granularity = elem * std::max<std::size_t>(row_elems, 1);
  std::size_t bytes = std::max<std::size_t>(count * elem, opts.granularity);
  auto mem = wm::wholememory::create(comm, bytes, type, location, opts);
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
  WM_EXPECTS(graph.row_offsets.size() == graph.num_nodes + 1,
             "host_csr has " << graph.row_offsets.size() << " row offsets for " << graph.num_nodes
                             << " nodes");
  WM_EXPECTS(graph.edge_weights.empty() || graph.edge_weights.size() == graph.num_edges(),
             "host_csr edge_weights size does not match the edge count");
  csr_graph g;
  g.num_nodes = graph.num_nodes;
  g.num_edges = graph.num_edges();
  g.directed = graph.directed;
  g.col_type = graph.num_nodes < (std::uint64_t{1} << 31) ? wm::dtype::int32 : wm::dtype::int64;
  // Each rank checks the part it copies, column indices before they are narrowed.
  detail::csr_checker checker("the host graph of make_graph", g.num_nodes, g.num_edges);
  g.row_offsets = make_array(comm, graph.row_offsets.data(), graph.row_offsets.size(), 8, 1, type,
                             location, [&](std::uint64_t first, std::size_t count) {
                               checker.row_offsets(graph.row_offsets.data() + first, first, count);
                             });
  const check_part check_cols = [&](std::uint64_t first, std::size_t count) {
    checker.col_indices(graph.col_indices.data() + first, first, count);
  };
  if (g.col_type == wm::dtype::int32) {
    std::vector<std::int32_t> cols(graph.col_indices.begin(), graph.col_indices.end());
    g.col_indices = make_array(comm, cols.data(), cols.size(), 4, 1, type, location, check_cols);
  } else {
    g.col_indices = make_array(comm, graph.col_indices.data(), graph.col_indices.size(), 8, 1, type,
                               location, check_cols);
  }
  detail::agree_on_findings(comm->get_bootstrap(), checker);
  if (!graph.edge_weights.empty() && placement.load_weights) {
    g.edge_weights = make_array(comm, graph.edge_weights.data(), graph.edge_weights.size(), 4, 1,
                                type, location);
  }
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
    g.node_features = make_array(comm, conv.data(), graph.num_nodes * graph.feature_dim, esz,
                                 graph.feature_dim, placement.features_type.value_or(type),
                                 placement.features_location.value_or(location));
  }
  return g;
}

}  // namespace wholestore::graph
