// Steps 1 and 2 of a sampler hop (sampling_impl.hpp): start, degree and count of every dst
// node, the positive weights of weighted hops, the offsets scan; the rank scan of the relabel
// (step 4, the same for both key widths); and the graph's weight statistics.  Kernels in
// sample_count_kernels.cuh.
#include "sample_count_kernels.cuh"
#include "sampling_impl.hpp"

#include <graph/sampling.hpp>
#include <wholememory/cuda_check.hpp>
#include <wholememory/error.hpp>
#include <wholememory/gather.hpp>

#include <cuda_runtime.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>
#include <cub/device/device_scan.cuh>

#include <algorithm>
#include <cstdint>
#include <limits>

namespace wholestore::graph {

template <typename W>
void gpu_sampler::impl::count_weighted(gpu::device_count n_dst, std::int64_t bound,
                                       std::int64_t degree_bound, W w, std::int32_t* big,
                                       unsigned long long* big_count, cudaStream_t stream) {
  if (bound == 0) return;  // no nodes (an owner asked for none): no grid of width 0
  std::int64_t* st = start.get<std::int64_t>(0, device, stream);
  std::int64_t* dg = deg.get<std::int64_t>(0, device, stream);
  std::int64_t* cnt = counts.get<std::int64_t>(0, device, stream);
  gpu::count_weighted_kernel<<<grid(bound, warp_size), block_threads, 0, stream>>>(
      st, dg, n_dst, w, cnt, big, big_count);
  WM_CUDA_CHECK_LAUNCH(stream);
  if (degree_bound <= gpu::big_degree) return;
  const std::int64_t chunks =
      std::min<std::int64_t>(256, (degree_bound + gpu::count_chunk - 1) / gpu::count_chunk);
  const dim3 blocks(static_cast<unsigned>(std::min<std::int64_t>(bound, num_sms)),
                    static_cast<unsigned>(chunks));
  gpu::count_big_kernel<<<blocks, gpu::count_big_threads, 0, stream>>>(big, big_count, st, dg, w,
                                                                       cnt);
  WM_CUDA_CHECK_LAUNCH(stream);
}

gpu::ro_owned gpu_sampler::impl::owned_rows() const {
  return gpu::ro_owned{owned.ro_part, owned.first, owned.end, owned.edge_begin, owned.edge_end};
}

std::int64_t gpu_sampler::impl::weight_stats(cudaStream_t stream) {
  if (max_degree >= 0) return max_degree;
  auto* words = reinterpret_cast<unsigned long long*>(flag.get<long long>(3, device, stream));
  WM_CUDA_TRY(cudaMemsetAsync(words, 0, 3 * sizeof(unsigned long long), stream));
  const auto num_edges = static_cast<std::int64_t>(graph->num_edges);
  if (owned.active) {
    // A served distributed graph: the own rows and edges, which its owner side reads.
    const std::int64_t rows = std::max<std::int64_t>(
        0, std::min<std::int64_t>(owned.end, graph->num_nodes) - owned.first);
    if (rows > 0) {
      gpu::owned_degree_stats_kernel<<<grid(rows), block_threads, 0, stream>>>(
          owned_rows(), owned.first, rows, words);
      WM_CUDA_CHECK_LAUNCH(stream);
    }
    const std::int64_t ne = owned.edge_end - owned.edge_begin;
    if (ne > 0) {
      using wg = wm::PtrGen<const float, const float>;
      gpu::count_nonpositive_kernel<<<grid(ne), block_threads, 0, stream>>>(wg(owned.w_part), ne,
                                                                            words + 2);
      WM_CUDA_CHECK_LAUNCH(stream);
    }
  } else {
    const std::int64_t n = static_cast<std::int64_t>(graph->num_nodes);
    if (chunked) {
      gpu::degree_stats_kernel<<<grid(n), block_threads, 0, stream>>>(
          ro_chunked(static_cast<const wm::chunked_view*>(ro_ptr)), n, num_edges, words);
    } else {
      gpu::degree_stats_kernel<<<grid(n), block_threads, 0, stream>>>(
          ro_direct(static_cast<const std::int64_t*>(ro_ptr)), n, num_edges, words);
    }
    WM_CUDA_CHECK_LAUNCH(stream);
    if (chunked) {
      using wg = wm::PtrGen<const wm::chunked_view, const float>;
      gpu::count_nonpositive_kernel<<<grid(num_edges), block_threads, 0, stream>>>(
          wg(static_cast<const wm::chunked_view*>(w_ptr)), num_edges, words + 2);
    } else {
      using wg = wm::PtrGen<const float, const float>;
      gpu::count_nonpositive_kernel<<<grid(num_edges), block_threads, 0, stream>>>(
          wg(static_cast<const float*>(w_ptr)), num_edges, words + 2);
    }
    WM_CUDA_CHECK_LAUNCH(stream);
  }
  unsigned long long values[3] = {0, 0, 0};
  WM_CUDA_TRY(cudaMemcpyAsync(values, words, sizeof values, cudaMemcpyDeviceToHost, stream));
  WM_CUDA_TRY(cudaStreamSynchronize(stream));
  max_degree = static_cast<std::int64_t>(values[0]);
  big_nodes = static_cast<std::int64_t>(values[1]);
  all_positive = values[2] == 0;
  return max_degree;
}

void gpu_sampler::impl::read_destinations(const call_state& c, hop_state& hop,
                                          cudaStream_t stream) {
  const csr_graph& g = *graph;
  const sample_options& options = *c.options;
  const std::size_t words = c.words;
  const std::int64_t num_edges = c.num_edges;
  long long* fault = c.fault;
  const std::int64_t degree_bound = c.degree_bound;
  const std::int64_t* dst = hop.dst;
  const int fanout = hop.fanout;
  const std::int64_t bound = hop.bound;
  const std::size_t nb = hop.nb;
  const gpu::device_count n_dst = hop.n_dst;
  std::int64_t* st = hop.st;
  std::int64_t* dg = hop.dg;
  std::int64_t* cnt = hop.cnt;
  const bool race = hop.race;
  const bool segmentable = hop.segmentable;
  std::int32_t* big = hop.big;
  unsigned long long* big_count = hop.big_count;
  // 1. start, degree and count of every dst node.
  if (hop.owner_side) {
    // The owner's rows, read from its own parts (when every weight there is positive, the
    // counts are the degrees).
    const bool counted_by_degree = race && all_positive;
    gpu::dst_info_kernel<<<grid(bound + 1), block_threads, 0, stream>>>(
        dst, n_dst, bound, owned_rows(), options.method, fanout, st, dg, cnt,
        counted_by_degree ? big : nullptr, big_count, num_edges, fault);
    WM_CUDA_CHECK_LAUNCH(stream);
    if (race && !counted_by_degree) {
      count_weighted(n_dst, bound, degree_bound,
                     gpu::direct_weights<gpu::owned_part<float>>{{owned.w_part, owned.edge_begin}},
                     big, big_count, stream);
    }
  } else if (distributed) {
    std::int64_t* idx = row_idx.get<std::int64_t>(2 * nb, device, stream);
    std::int64_t* r2 = ro2.get<std::int64_t>(2 * nb, device, stream);
    if (bound > 0) {
      gpu::row_index_kernel<<<grid(bound), block_threads, 0, stream>>>(dst, bound, idx);
      WM_CUDA_CHECK_LAUNCH(stream);
    }
    wm::wm_tensor t{&g.row_offsets, wm::dtype::int64, g.num_nodes + 1, 1, 1, 0};
    wm::gather(t, wm::index_array{idx, wm::dtype::int64, 2 * nb},
               wm::dense_matrix{r2, wm::dtype::int64, 2 * nb, 1, 1}, stream);
    gpu::dst_info_kernel<<<grid(bound + 1), block_threads, 0, stream>>>(
        dst, n_dst, bound, gpu::ro_gathered{r2}, options.method, fanout, st, dg, cnt, nullptr,
        nullptr, num_edges, fault);
    WM_CUDA_CHECK_LAUNCH(stream);
    if (race) {
      // Weights of every frontier edge: scan the degrees, then gather them.
      std::int64_t* base = wbase.get<std::int64_t>(nb + 1, device, stream);
      auto degrees = thrust::make_transform_iterator(
          thrust::counting_iterator<std::int64_t>(0),
          gpu::capped_count{dg, std::numeric_limits<std::int64_t>::max(), bound});
      std::size_t bytes = 0;
      WM_CUDA_TRY(cub::DeviceScan::ExclusiveSum(nullptr, bytes, degrees, base, bound + 1, stream));
      WM_CUDA_TRY(cub::DeviceScan::ExclusiveSum(cub(bytes, stream), bytes, degrees, base, bound + 1,
                                                stream));
      WM_CUDA_TRY(cudaMemcpyAsync(host_info + words, base + bound, sizeof(long long),
                                  cudaMemcpyDeviceToHost, stream));
      WM_CUDA_TRY(cudaStreamSynchronize(stream));
      const std::size_t frontier = static_cast<std::size_t>(host_info[words]);
      std::int64_t* fidx = widx.get<std::int64_t>(frontier, device, stream);
      float* fw = wbuf.get<float>(frontier, device, stream);
      if (bound > 0) {
        gpu::frontier_edges_kernel<<<grid(bound, warp_size), block_threads, 0, stream>>>(
            st, dg, base, bound, fidx);
        WM_CUDA_CHECK_LAUNCH(stream);
      }
      wm::wm_tensor wt{&g.edge_weights, wm::dtype::float32, g.num_edges, 1, 1, 0};
      wm::gather(wt, wm::index_array{fidx, wm::dtype::int64, frontier},
                 wm::dense_matrix{fw, wm::dtype::float32, frontier, 1, 1}, stream);
      hop.wb = fw;
      hop.wbs = base;
      count_weighted(n_dst, bound, static_cast<std::int64_t>(frontier),
                     gpu::gathered_weights{hop.wb, hop.wbs}, big, big_count, stream);
      const auto fe = static_cast<std::int64_t>(frontier);
      if (segmentable && fe > gpu::big_degree) {
        hop.segments = std::min(bound, fe / (gpu::big_degree + 1)) + fe / gpu::segment_edges + 1;
      }
    }
  } else {
    // Every weight positive: the positive-weight counts are the degrees, no counting pass.
    const bool counted_by_degree = race && all_positive;
    std::int32_t* info_big = counted_by_degree ? big : nullptr;
    if (chunked) {
      gpu::dst_info_kernel<<<grid(bound + 1), block_threads, 0, stream>>>(
          dst, n_dst, bound,
          gpu::ro_direct<ro_chunked>{ro_chunked(static_cast<const wm::chunked_view*>(ro_ptr))},
          options.method, fanout, st, dg, cnt, info_big, big_count, num_edges, fault);
    } else {
      gpu::dst_info_kernel<<<grid(bound + 1), block_threads, 0, stream>>>(
          dst, n_dst, bound,
          gpu::ro_direct<ro_direct>{ro_direct(static_cast<const std::int64_t*>(ro_ptr))},
          options.method, fanout, st, dg, cnt, info_big, big_count, num_edges, fault);
    }
    WM_CUDA_CHECK_LAUNCH(stream);
    if (race && !counted_by_degree) {
      if (chunked) {
        using wg = wm::PtrGen<const wm::chunked_view, const float>;
        count_weighted(n_dst, bound, degree_bound,
                       gpu::direct_weights<wg>{wg(static_cast<const wm::chunked_view*>(w_ptr))},
                       big, big_count, stream);
      } else {
        using wg = wm::PtrGen<const float, const float>;
        count_weighted(n_dst, bound, degree_bound,
                       gpu::direct_weights<wg>{wg(static_cast<const float*>(w_ptr))}, big,
                       big_count, stream);
      }
    }
  }
}

void gpu_sampler::impl::scan_offsets(const call_state& /*c*/, hop_state& hop, cudaStream_t stream) {
  const int fanout = hop.fanout;
  const std::int64_t bound = hop.bound;
  const bool race = hop.race;
  std::int64_t* cnt = hop.cnt;
  std::int64_t* offsets = hop.offsets;
  // Weighted: positive weights, capped by the fanout.
  const std::int64_t cap = race ? fanout : std::numeric_limits<std::int64_t>::max();
  auto capped = thrust::make_transform_iterator(thrust::counting_iterator<std::int64_t>(0),
                                                gpu::capped_count{cnt, cap, bound + 1});
  std::size_t bytes = 0;
  WM_CUDA_TRY(cub::DeviceScan::ExclusiveSum(nullptr, bytes, capped, offsets, bound + 1, stream));
  WM_CUDA_TRY(
      cub::DeviceScan::ExclusiveSum(cub(bytes, stream), bytes, capped, offsets, bound + 1, stream));
}

void gpu_sampler::impl::scan_new_flags(const std::int32_t* flags, std::int32_t* rk,
                                       std::int64_t entries_bound, cudaStream_t stream) {
  std::size_t bytes = 0;
  WM_CUDA_TRY(cub::DeviceScan::ExclusiveSum(nullptr, bytes, flags, rk, entries_bound + 1, stream));
  WM_CUDA_TRY(cub::DeviceScan::ExclusiveSum(cub(bytes, stream), bytes, flags, rk, entries_bound + 1,
                                            stream));
}

}  // namespace wholestore::graph
