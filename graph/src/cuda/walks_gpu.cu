// gpu_walker: one thread per walk (grid-stride), the step logic of detail/walk_step.hpp, rows
// and neighbors read through PtrGen (plain pointers for continuous memory, the device copy of
// the chunked view otherwise).  Faults (a row or neighbor outside the graph) set a flag that
// the host reads after the walks.
#include "../walks_common.hpp"
#include "walks_distributed.hpp"
#include "walks_hubs.cuh"

#include <graph/detail/walk_step.hpp>
#include <graph/walks.hpp>
#include <wholememory/cuda_check.hpp>
#include <wholememory/device.hpp>
#include <wholememory/error.hpp>
#include <wholememory/ptr_gen.hpp>

#include <cuda_runtime.h>

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
                                 distributed_scratch_, question_scratch_,
                                 {hub_begin_, hub_sorted_, hubs_tried_}, stream);
    return;
  }
  if (host[0] != no_bad_start) {
    WM_FAIL(wm::logic_error, op << ": start node " << value << " at position " << host[0]
                                << " is outside the graph of " << g.num_nodes << " nodes");
  }
  const bool second_order = detail::make_walk_rule(options.p, options.q).second_order;
  if (second_order && !hubs_tried_) build_hub_lists(stream);
  detail::hub_lists hubs;
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
  auto* fault = flags_.data_as<unsigned long long>() + 1;
  with_graph_arrays(g, device_, [&](auto row, auto col) {
    // A corrupt row or neighbor: no copy now (the walk reports it); the next call tries again.
    hubs_tried_ = detail::build_sorted_lists(row, col, g.num_nodes, g.num_edges, g.num_nodes,
                                             hub_degree, device_, fault, stream, hub_begin_,
                                             hub_sorted_) != detail::sorted_lists::corrupt;
  });
}

}  // namespace wholestore::graph
