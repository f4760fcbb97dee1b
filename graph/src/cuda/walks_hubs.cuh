// node2vec's neighborship lookup on the GPU (both walkers): sorted int64 copies of the lists
// of nodes with many neighbors ("hubs"), so that "is x a neighbor of v" is a binary search
// there instead of a scan.  Built once per walker: for the whole graph (walks_gpu.cu) or for
// one rank's own part of a distributed graph (walks_distributed.cu).  Internal.
#pragma once

#include <graph/detail/walk_step.hpp>
#include <wholememory/cuda_check.hpp>
#include <wholememory/device_buffer.hpp>

#include <cuda_runtime.h>
#include <cub/device/device_scan.cuh>
#include <cub/device/device_segmented_sort.cuh>

#include <algorithm>
#include <cstdint>

namespace wholestore::graph::detail {

namespace hubs {
constexpr int threads = 256;
inline unsigned grid(std::size_t n) {
  return static_cast<unsigned>(
      std::clamp<std::size_t>((n + threads - 1) / threads, 1, std::size_t{1} << 20));
}
}  // namespace hubs

/// Whether sorted[b, b + len) (clipped to `entries`) holds v.
__device__ inline bool sorted_list_holds(const std::int64_t* sorted, std::int64_t entries,
                                         std::int64_t b, std::int64_t len, std::int64_t v) {
  std::int64_t lo = b, hi = b + len;
  if (hi > entries) hi = entries;  // only a graph changed after the copy gets here
  const std::int64_t stop = hi;
  while (lo < hi) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    if (sorted[mid] < v) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo < stop && sorted[lo] == v;
}

/// The lookup for walk_step: a binary search in a hub's sorted copy, a scan of the list itself
/// for other nodes.
struct hub_lists {
  const std::int64_t* begin = nullptr;  ///< per node; -1: no copy (or no copies at all: null)
  const std::int64_t* sorted = nullptr;
  std::int64_t entries = 0;

  template <typename Col>
  __device__ bool operator()(const Col& col, std::int64_t node, std::int64_t first,
                             std::int64_t end, std::int64_t v) const {
    const std::int64_t b = begin != nullptr ? begin[node] : -1;
    if (b < 0) return scan_neighbors{}(col, node, first, end, v);
    return sorted_list_holds(sorted, entries, b, end - first, v);
  }
};

/// Per node: its degree when it is a hub (>= min_degree neighbors), else 0; entry n is 0.  A
/// row outside the CSR's rules sets `fault` (no copy is made then).
template <typename Row>
__global__ void hub_lengths(Row row, std::uint64_t n, std::uint64_t num_edges,
                            std::int64_t min_degree, std::int64_t* len, unsigned long long* fault) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t v = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; v <= n;
       v += stride) {
    if (v == n) {
      len[v] = 0;
      continue;
    }
    const std::int64_t first = *row.At(v), end = *row.At(v + 1);
    if (first < 0 || end < first || static_cast<std::uint64_t>(end) > num_edges) {
      *fault = 1;
      len[v] = 0;
      continue;
    }
    len[v] = end - first >= min_degree ? end - first : 0;
  }
}

/// A warp per hub: copies its list to out[begin[v] ...] as int64 (a neighbor id outside the
/// graph sets `fault`).
template <typename Row, typename Col>
__global__ void copy_hub_lists(Row row, Col col, std::uint64_t n, std::uint64_t num_nodes,
                               const std::int64_t* len, const std::int64_t* begin,
                               std::int64_t* out, unsigned long long* fault) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  const std::size_t warps = static_cast<std::size_t>(gridDim.x) * blockDim.x / 32;
  for (std::size_t v = (static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
       v < n; v += warps) {
    if (len[v] == 0) continue;
    const std::int64_t first = *row.At(v);
    for (std::int64_t j = lane; j < len[v]; j += 32) {
      const auto x = static_cast<std::int64_t>(*col.At(first + j));
      if (x < 0 || static_cast<std::uint64_t>(x) >= num_nodes) *fault = 1;
      out[begin[v] + j] = x;
    }
  }
}

/// begin[v] = -1 for the nodes without a copy.
__global__ inline void mark_non_hubs(const std::int64_t* len, std::uint64_t n,
                                     std::int64_t* begin) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t v = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; v < n;
       v += stride)
    if (len[v] == 0) begin[v] = -1;
}

enum class sorted_lists { built, none, corrupt };

/// The sorted copies of the lists of the n nodes of (row, col) with at least min_degree
/// neighbors: `begin` (n + 1 entries, -1 for the others) and `sorted`, replaced only when
/// built.  `none`: no hub, or the copies would take over a quarter of the free memory (the
/// walks scan then); `corrupt`: a row or neighbor outside the CSR's rules (no copy; the walk
/// reports it).  num_edges bounds the rows, num_nodes the neighbor ids.  `fault`: a device
/// word of scratch.  Waits for `stream`.
template <typename Row, typename Col>
sorted_lists build_sorted_lists(Row row, Col col, std::uint64_t n, std::uint64_t num_edges,
                                std::uint64_t num_nodes, std::int64_t min_degree, int device,
                                unsigned long long* fault, cudaStream_t stream,
                                wholememory::device_buffer& begin_out,
                                wholememory::device_buffer& sorted_out) {
  if (n == 0 || num_edges == 0) return sorted_lists::none;
  WM_CUDA_TRY(cudaMemsetAsync(fault, 0, sizeof(unsigned long long), stream));
  wholememory::device_buffer len((n + 1) * sizeof(std::int64_t), device);
  wholememory::device_buffer begin((n + 1) * sizeof(std::int64_t), device);
  auto* lens = len.data_as<std::int64_t>();
  auto* begins = begin.data_as<std::int64_t>();
  hub_lengths<<<hubs::grid(n + 1), hubs::threads, 0, stream>>>(row, n, num_edges, min_degree, lens,
                                                               fault);
  WM_CUDA_CHECK_LAUNCH(stream);
  std::size_t temp_bytes = 0;
  WM_CUDA_TRY(cub::DeviceScan::ExclusiveSum(nullptr, temp_bytes, lens, begins,
                                            static_cast<std::int64_t>(n + 1), stream));
  wholememory::device_buffer temp(std::max<std::size_t>(temp_bytes, 1), device);
  WM_CUDA_TRY(cub::DeviceScan::ExclusiveSum(temp.data(), temp_bytes, lens, begins,
                                            static_cast<std::int64_t>(n + 1), stream));
  unsigned long long host_fault = 0;
  std::int64_t entries = 0;
  WM_CUDA_TRY(
      cudaMemcpyAsync(&entries, begins + n, sizeof(entries), cudaMemcpyDeviceToHost, stream));
  WM_CUDA_TRY(
      cudaMemcpyAsync(&host_fault, fault, sizeof(host_fault), cudaMemcpyDeviceToHost, stream));
  WM_CUDA_TRY(cudaStreamSynchronize(stream));
  if (host_fault != 0) return sorted_lists::corrupt;
  std::size_t free_bytes = 0, total_bytes = 0;
  WM_CUDA_TRY(cudaMemGetInfo(&free_bytes, &total_bytes));
  const auto bytes = static_cast<std::size_t>(entries) * sizeof(std::int64_t);
  if (entries == 0 || 2 * bytes > free_bytes / 4) return sorted_lists::none;
  wholememory::device_buffer unsorted(bytes, device), sorted(bytes, device);
  copy_hub_lists<<<hubs::grid(n * 32), hubs::threads, 0, stream>>>(
      row, col, n, num_nodes, lens, begins, unsorted.data_as<std::int64_t>(), fault);
  WM_CUDA_CHECK_LAUNCH(stream);
  std::size_t sort_bytes = 0;
  const auto segments = static_cast<std::int64_t>(n);
  WM_CUDA_TRY(cub::DeviceSegmentedSort::SortKeys(
      nullptr, sort_bytes, unsorted.data_as<std::int64_t>(), sorted.data_as<std::int64_t>(),
      entries, segments, begins, begins + 1, stream));
  wholememory::device_buffer sort_temp(std::max<std::size_t>(sort_bytes, 1), device);
  WM_CUDA_TRY(cub::DeviceSegmentedSort::SortKeys(
      sort_temp.data(), sort_bytes, unsorted.data_as<std::int64_t>(),
      sorted.data_as<std::int64_t>(), entries, segments, begins, begins + 1, stream));
  mark_non_hubs<<<hubs::grid(n), hubs::threads, 0, stream>>>(lens, n, begins);
  WM_CUDA_CHECK_LAUNCH(stream);
  WM_CUDA_TRY(
      cudaMemcpyAsync(&host_fault, fault, sizeof(host_fault), cudaMemcpyDeviceToHost, stream));
  WM_CUDA_TRY(cudaStreamSynchronize(stream));
  if (host_fault != 0) return sorted_lists::corrupt;  // a neighbor id outside the graph
  begin_out = std::move(begin);
  sorted_out = std::move(sorted);
  return sorted_lists::built;
}

}  // namespace wholestore::graph::detail
