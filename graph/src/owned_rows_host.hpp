// A rank's own rows of a distributed graph whose edges follow its nodes (csr_graph.hpp), read
// on the CPU, and the exchange the CPU paths that serve requests by owner use
// (sampling_host.cpp, walks_host.cpp).  Internal.
#pragma once

#include "edge_layout.hpp"

#include <graph/csr_graph.hpp>
#include <wholememory/communicator.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace wholestore::graph::detail {

namespace wm = ::wholememory;

/// This rank's own rows of a distributed graph whose edges follow its nodes: its entries
/// [first, end) of row_offsets and its edges [edge_begin, edge_end), the whole of its column
/// and weight parts, so the row of its last node ends where its edges end.
struct own_parts {
  std::vector<std::int64_t> node_begin;  // rank r's nodes are [node_begin[r], node_begin[r + 1])
  int ranks = 0;
  const std::int64_t* ro = nullptr;
  std::int64_t first = 0, end = 0, edge_begin = 0, edge_end = 0;
  const void* col = nullptr;
  bool wide = false;  // int64 columns
  const float* w = nullptr;

  explicit own_parts(const csr_graph& g) {
    ranks = g.row_offsets.comm().size();
    const std::vector<std::uint64_t> nodes =
        first_nodes(g.row_offsets.get_partition(), g.num_nodes);
    node_begin.assign(nodes.begin(), nodes.end());
    const wm::part_info rows = g.row_offsets.local_part();
    ro = static_cast<const std::int64_t*>(rows.ptr);
    first = static_cast<std::int64_t>(rows.offset / sizeof(std::int64_t));
    end = static_cast<std::int64_t>((rows.offset + rows.bytes) / sizeof(std::int64_t));
    const wm::part_info cols = g.col_indices.local_part();
    const std::size_t elem = wm::dtype_size(g.col_type);
    col = cols.ptr;
    wide = g.col_type == wm::dtype::int64;
    edge_begin = static_cast<std::int64_t>(cols.offset / elem);
    edge_end = static_cast<std::int64_t>((cols.offset + cols.bytes) / elem);
    if (g.has_weights()) w = static_cast<const float*>(g.edge_weights.local_part().ptr);
  }
  /// The rank holding node v's row: the last part starting at or before v (an empty part
  /// shares its start with the next one, which owns the node).
  int owner_of(std::int64_t v) const {
    const auto it = std::upper_bound(node_begin.begin(), node_begin.begin() + ranks, v);
    return static_cast<int>(it - node_begin.begin()) - 1;
  }
  /// Node v's row [s, e) when v is one of this rank's nodes and the row lies within its edges;
  /// false otherwise (a corrupt graph).
  bool row(std::int64_t v, std::int64_t& s, std::int64_t& e) const {
    if (v < first || v >= end) return false;
    s = ro[v - first];
    e = v + 1 < end ? ro[v + 1 - first] : edge_end;
    return s >= edge_begin && e >= s && e <= edge_end;
  }
  std::int64_t column(std::int64_t x) const {
    const std::int64_t at = x - edge_begin;
    return wide ? static_cast<const std::int64_t*>(col)[at]
                : static_cast<const std::int32_t*>(col)[at];
  }
  float weight(std::int64_t x) const { return w[x - edge_begin]; }
  /// Asks the cache for node v's row offsets (v one of this rank's nodes).
  void prefetch_row(std::int64_t v) const { __builtin_prefetch(ro + (v - first)); }
  /// Asks the cache for the column of edge x (one of this rank's edges).
  void prefetch_column(std::int64_t x) const {
    const std::int64_t at = x - edge_begin;
    __builtin_prefetch(wide ? static_cast<const void*>(static_cast<const std::int64_t*>(col) + at)
                            : static_cast<const void*>(static_cast<const std::int32_t*>(col) + at));
  }
};

/// Collective: out[displs[r] ..] receives what every rank r sends here; counts in elements.
inline void exchange(wm::communicator& comm, const std::int64_t* send,
                     const std::vector<std::size_t>& send_counts,
                     const std::vector<std::size_t>& send_displs, std::int64_t* recv,
                     const std::vector<std::size_t>& recv_counts,
                     const std::vector<std::size_t>& recv_displs, std::size_t width = 1) {
  auto times = [width](const std::vector<std::size_t>& v) {
    std::vector<std::size_t> out(v);
    for (std::size_t& x : out) x *= width;
    return out;
  };
  comm.alltoallv(send, times(send_counts).data(), times(send_displs).data(), recv,
                 times(recv_counts).data(), times(recv_displs).data(), wm::dtype::int64, nullptr);
}

}  // namespace wholestore::graph::detail
