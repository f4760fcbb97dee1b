// gpu_walker: one thread per walk (grid-stride), the step logic of detail/walk_step.hpp, rows
// and neighbors read through PtrGen (plain pointers for continuous memory, the device copy of
// the chunked view otherwise).  Faults (a row or neighbor outside the graph) set a flag that
// the host reads after the walks.
#include "../walks_common.hpp"
#include "walks_distributed.hpp"

#include <graph/detail/walk_step.hpp>
#include <graph/walks.hpp>
#include <wholememory/cuda_check.hpp>
#include <wholememory/device.hpp>
#include <wholememory/error.hpp>
#include <wholememory/ptr_gen.hpp>

#include <cuda_runtime.h>
#include <cub/device/device_scan.cuh>
#include <cub/device/device_segmented_sort.cuh>

#include <algorithm>

namespace wholestore::graph {

namespace wm = wholememory;

namespace {

constexpr int block_threads = 256;
constexpr unsigned long long no_bad_start = ~0ull;

unsigned grid_for(std::size_t n) {
  return static_cast<unsigned>(
      std::clamp<std::size_t>((n + block_threads - 1) / block_threads, 1, std::size_t{1} << 20));
}

__global__ void check_starts(const std::int64_t* starts, std::size_t count, std::uint64_t num_nodes,
                             unsigned long long* bad) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    const std::int64_t v = starts[i];
    if (v < 0 || static_cast<std::uint64_t>(v) >= num_nodes) {
      atomicMin(bad, static_cast<unsigned long long>(i));
    }
  }
}

/// node2vec's neighborship lookup on the GPU: a binary search in the sorted copy of a hub's
/// list (gpu_walker::build_hub_lists), a scan of the list itself for other nodes.
struct hub_lists {
  const std::int64_t* begin = nullptr;  ///< per node; -1: no copy (or no copies at all: null)
  const std::int64_t* sorted = nullptr;
  std::int64_t entries = 0;

  template <typename Col>
  __device__ bool operator()(const Col& col, std::int64_t node, std::int64_t first,
                             std::int64_t end, std::int64_t v) const {
    const std::int64_t b = begin != nullptr ? begin[node] : -1;
    if (b < 0) return detail::scan_neighbors{}(col, node, first, end, v);
    std::int64_t lo = b, hi = b + (end - first);
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
__global__ void mark_non_hubs(const std::int64_t* len, std::uint64_t n, std::int64_t* begin) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t v = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; v < n;
       v += stride)
    if (len[v] == 0) begin[v] = -1;
}

template <typename Row, typename Col, typename Member>
__global__ void __launch_bounds__(block_threads)
    walk_kernel(Row row, Col col, Member member, const std::int64_t* starts, std::size_t count,
                detail::walk_rule rule, std::uint64_t seed, std::uint64_t first_walk, int length,
                std::uint64_t num_nodes, std::uint64_t num_edges, std::int64_t* out,
                unsigned long long* fault) {
  const std::size_t width = static_cast<std::size_t>(length) + 1;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    std::int64_t* w = out + i * width;
    const std::int64_t start = starts[i];
    const std::uint64_t key = detail::walk_key(seed, first_walk + i, start);
    std::int64_t prev = -1, cur = start;
    w[0] = cur;
    std::size_t s = 1;
    for (; s < width; ++s) {
      const std::int64_t next =
          detail::walk_step(rule, key, static_cast<std::uint32_t>(s - 1), prev, cur, row, col,
                            num_nodes, num_edges, member);
      if (next == detail::walk_fault) *fault = 1;
      if (next < 0) break;
      w[s] = next;
      prev = cur;
      cur = next;
    }
    for (; s < width; ++s) w[s] = -1;
  }
}

template <typename Row, typename Col, typename Member>
void launch(Row row, Col col, const Member& hubs, const csr_graph& g, const std::int64_t* starts,
            std::size_t count, const walk_options& o, std::int64_t* out, unsigned long long* fault,
            cudaStream_t stream) {
  walk_kernel<<<grid_for(count), block_threads, 0, stream>>>(
      row, col, hubs, starts, count, detail::make_walk_rule(o.p, o.q), o.seed, o.first_walk,
      o.length, g.num_nodes, g.num_edges, out, fault);
  WM_CUDA_CHECK_LAUNCH(stream);
}

/// Calls f(row, col) with the graph's PtrGens on `device`.
template <typename F>
void with_graph_arrays(const csr_graph& g, int device, F&& f) {
  auto typed = [&](auto col_tag) {
    using ColT = decltype(col_tag);
    if (g.type() == wm::memory_type::continuous) {
      f(wm::PtrGen<const std::int64_t, const std::int64_t>(
            static_cast<const std::int64_t*>(g.row_offsets.data())),
        wm::PtrGen<const ColT, const ColT>(static_cast<const ColT*>(g.col_indices.data())));
    } else {
      f(wm::PtrGen<const wm::chunked_view, const std::int64_t>(g.row_offsets.device_view(device)),
        wm::PtrGen<const wm::chunked_view, const ColT>(g.col_indices.device_view(device)));
    }
  };
  if (g.col_type == wm::dtype::int32) {
    typed(std::int32_t{});
  } else {
    typed(std::int64_t{});
  }
}

}  // namespace

gpu_walker::gpu_walker(const csr_graph& graph) : graph_(&graph) {
  device_ = wm::current_device();
  flags_ = wm::device_buffer(2 * sizeof(unsigned long long), device_);
}

void gpu_walker::walk(const std::int64_t* starts, std::size_t count, const walk_options& options,
                      std::int64_t* out, cudaStream_t stream) {
  const char* op = "gpu_walker::walk";
  const csr_graph& g = *graph_;
  const bool distributed = g.type() == wm::memory_type::distributed;
  detail::check_walk_call(g, count, options, starts, out, op);
  if (count == 0 && !distributed) return;
  wm::device_guard guard(device_);
  auto* flags = flags_.data_as<unsigned long long>();
  WM_CUDA_TRY(cudaMemsetAsync(flags, 0xff, sizeof(unsigned long long), stream));
  WM_CUDA_TRY(cudaMemsetAsync(flags + 1, 0, sizeof(unsigned long long), stream));
  check_starts<<<grid_for(count), block_threads, 0, stream>>>(starts, count, g.num_nodes, flags);
  WM_CUDA_CHECK_LAUNCH(stream);
  unsigned long long host[2] = {0, 0};
  WM_CUDA_TRY(cudaMemcpyAsync(host, flags, sizeof(host), cudaMemcpyDeviceToHost, stream));
  WM_CUDA_TRY(cudaStreamSynchronize(stream));
  std::int64_t value = 0;
  if (host[0] != no_bad_start) {
    WM_CUDA_TRY(cudaMemcpy(&value, starts + host[0], sizeof(value), cudaMemcpyDefault));
  }
  if (distributed) {  // every rank learns of a bad start on any rank (collective)
    const std::int64_t bad = host[0] != no_bad_start ? static_cast<std::int64_t>(host[0]) : -1;
    detail::walk_distributed_gpu(g, starts, count, options, out, bad, value, device_,
                                 distributed_scratch_, question_scratch_, stream);
    return;
  }
  if (host[0] != no_bad_start) {
    WM_FAIL(wm::logic_error, op << ": start node " << value << " at position " << host[0]
                                << " is outside the graph of " << g.num_nodes << " nodes");
  }
  const bool second_order = detail::make_walk_rule(options.p, options.q).second_order;
  if (second_order && !hubs_tried_) build_hub_lists(stream);
  hub_lists hubs;
  const auto hub_entries = static_cast<std::int64_t>(hub_sorted_.size() / sizeof(std::int64_t));
  if (second_order && hub_entries > 0) {
    hubs.begin = hub_begin_.data_as<std::int64_t>();
    hubs.sorted = hub_sorted_.data_as<std::int64_t>();
    hubs.entries = hub_entries;
  }
  // First-order walks never ask for neighborship: they keep the kernel without the lookup
  // (the one with it cost DeepWalk about 5% in registers).
  with_graph_arrays(g, device_, [&](auto row, auto col) {
    if (second_order) {
      launch(row, col, hubs, g, starts, count, options, out, flags + 1, stream);
    } else {
      launch(row, col, detail::scan_neighbors{}, g, starts, count, options, out, flags + 1, stream);
    }
  });
  WM_CUDA_TRY(cudaMemcpyAsync(host, flags, sizeof(host), cudaMemcpyDeviceToHost, stream));
  WM_CUDA_TRY(cudaStreamSynchronize(stream));
  if (host[1] != 0) WM_FAIL(wm::logic_error, detail::corrupt_graph_message(op));
}

void gpu_walker::build_hub_lists(cudaStream_t stream) {
  const csr_graph& g = *graph_;
  const std::uint64_t n = g.num_nodes;
  if (n == 0 || g.num_edges == 0) {
    hubs_tried_ = true;
    return;
  }
  auto* fault = flags_.data_as<unsigned long long>() + 1;
  WM_CUDA_TRY(cudaMemsetAsync(fault, 0, sizeof(unsigned long long), stream));
  wm::device_buffer len((n + 1) * sizeof(std::int64_t), device_);
  wm::device_buffer begin((n + 1) * sizeof(std::int64_t), device_);
  auto* lens = len.data_as<std::int64_t>();
  auto* begins = begin.data_as<std::int64_t>();
  with_graph_arrays(g, device_, [&](auto row, auto) {
    hub_lengths<<<grid_for(n + 1), block_threads, 0, stream>>>(row, n, g.num_edges, hub_degree,
                                                               lens, fault);
  });
  WM_CUDA_CHECK_LAUNCH(stream);
  std::size_t temp_bytes = 0;
  WM_CUDA_TRY(cub::DeviceScan::ExclusiveSum(nullptr, temp_bytes, lens, begins,
                                            static_cast<std::int64_t>(n + 1), stream));
  wm::device_buffer temp(std::max<std::size_t>(temp_bytes, 1), device_);
  WM_CUDA_TRY(cub::DeviceScan::ExclusiveSum(temp.data(), temp_bytes, lens, begins,
                                            static_cast<std::int64_t>(n + 1), stream));
  unsigned long long host_fault = 0;
  std::int64_t entries = 0;
  WM_CUDA_TRY(
      cudaMemcpyAsync(&entries, begins + n, sizeof(entries), cudaMemcpyDeviceToHost, stream));
  WM_CUDA_TRY(
      cudaMemcpyAsync(&host_fault, fault, sizeof(host_fault), cudaMemcpyDeviceToHost, stream));
  WM_CUDA_TRY(cudaStreamSynchronize(stream));
  // A corrupt row: no copy now (the walk reports it); the next call tries again.
  if (host_fault != 0) return;
  std::size_t free_bytes = 0, total_bytes = 0;
  WM_CUDA_TRY(cudaMemGetInfo(&free_bytes, &total_bytes));
  const auto bytes = static_cast<std::size_t>(entries) * sizeof(std::int64_t);
  if (entries == 0 || 2 * bytes > free_bytes / 4) {
    hubs_tried_ = true;  // no hubs, or too many to copy: the walks scan
    return;
  }
  wm::device_buffer unsorted(bytes, device_), sorted(bytes, device_);
  with_graph_arrays(g, device_, [&](auto row, auto col) {
    copy_hub_lists<<<grid_for(n * 32), block_threads, 0, stream>>>(
        row, col, n, g.num_nodes, lens, begins, unsorted.data_as<std::int64_t>(), fault);
  });
  WM_CUDA_CHECK_LAUNCH(stream);
  std::size_t sort_bytes = 0;
  const auto segments = static_cast<std::int64_t>(n);
  WM_CUDA_TRY(cub::DeviceSegmentedSort::SortKeys(
      nullptr, sort_bytes, unsorted.data_as<std::int64_t>(), sorted.data_as<std::int64_t>(),
      entries, segments, begins, begins + 1, stream));
  wm::device_buffer sort_temp(std::max<std::size_t>(sort_bytes, 1), device_);
  WM_CUDA_TRY(cub::DeviceSegmentedSort::SortKeys(
      sort_temp.data(), sort_bytes, unsorted.data_as<std::int64_t>(),
      sorted.data_as<std::int64_t>(), entries, segments, begins, begins + 1, stream));
  mark_non_hubs<<<grid_for(n), block_threads, 0, stream>>>(lens, n, begins);
  WM_CUDA_CHECK_LAUNCH(stream);
  WM_CUDA_TRY(
      cudaMemcpyAsync(&host_fault, fault, sizeof(host_fault), cudaMemcpyDeviceToHost, stream));
  WM_CUDA_TRY(cudaStreamSynchronize(stream));
  if (host_fault != 0) return;  // a neighbor id outside the graph: as a corrupt row
  hub_begin_ = std::move(begin);
  hub_sorted_ = std::move(sorted);
  hubs_tried_ = true;
}

}  // namespace wholestore::graph
