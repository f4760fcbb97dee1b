// Step 3 of a sampler hop (sampling_impl.hpp): the sampled positions of every dst node as
// global edge ids, with the weight reader of the graph's memory.  Kernels in
// sample_fill_kernels.cuh.
#include "sample_fill_kernels.cuh"
#include "sampling_impl.hpp"

#include <graph/sampling.hpp>
#include <wholememory/cuda_check.hpp>
#include <wholememory/error.hpp>

#include <cuda_runtime.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>
#include <cub/device/device_scan.cuh>

#include <algorithm>
#include <cstdint>

namespace wholestore::graph {

template <typename W>
void gpu_sampler::impl::fill(const std::int64_t* dst, gpu::device_count n_dst, std::int64_t bound,
                             const std::int64_t* offsets, const sample_options& options,
                             gpu::seed_ref seed_word, int hop, W w, const std::int32_t* big,
                             const unsigned long long* big_count, std::int64_t segment_bound,
                             std::int64_t* eid_out, std::int64_t* tmp_out, cudaStream_t stream) {
  if (bound == 0) return;
  const int fanout = options.fanouts[static_cast<std::size_t>(hop)];
  const std::int64_t* st = start.get<std::int64_t>(0, device, stream);
  const std::int64_t* dg = deg.get<std::int64_t>(0, device, stream);
  const std::int64_t* np = counts.get<std::int64_t>(0, device, stream);
  if (options.method != sample_method::weighted && fanout >= 0 && fanout <= 16) {
    if (fanout <= 4) {
      gpu::fill_small_kernel<4><<<grid(bound, 4), block_threads, 0, stream>>>(
          dst, st, dg, offsets, n_dst, options.method, fanout, seed_word, hop, eid_out);
    } else if (fanout <= 8) {
      gpu::fill_small_kernel<8><<<grid(bound, 8), block_threads, 0, stream>>>(
          dst, st, dg, offsets, n_dst, options.method, fanout, seed_word, hop, eid_out);
    } else {
      gpu::fill_small_kernel<16><<<grid(bound, 16), block_threads, 0, stream>>>(
          dst, st, dg, offsets, n_dst, options.method, fanout, seed_word, hop, eid_out);
    }
    WM_CUDA_CHECK_LAUNCH(stream);
    return;
  }
  static_assert(block_threads == gpu::fill_threads, "fill_kernel is bounded for this block size");
  gpu::fill_kernel<W><<<grid(bound, warp_size), block_threads, 0, stream>>>(
      dst, st, dg, np, offsets, n_dst, options.method, fanout, seed_word, hop, w, eid_out, tmp_out);
  WM_CUDA_CHECK_LAUNCH(stream);
  if (big == nullptr) return;
  const bool segmented = segment_bound > 0;
  const unsigned blocks = static_cast<unsigned>(std::min<std::int64_t>(bound, 4 * num_sms));
  gpu::fill_big_kernel<W><<<blocks, gpu::fill_big_threads, 0, stream>>>(
      dst, st, dg, np, offsets, big, big_count, fanout, seed_word, hop, w, segmented, eid_out,
      tmp_out);
  WM_CUDA_CHECK_LAUNCH(stream);
  if (!segmented) return;
  // Big nodes raced by segments of gpu::segment_edges edges, a block each, then merged.
  std::int64_t* base =
      seg_base.get<std::int64_t>(static_cast<std::size_t>(bound) + 1, device, stream);
  auto segments = thrust::make_transform_iterator(thrust::counting_iterator<std::int64_t>(0),
                                                  gpu::big_segments{big, big_count, dg});
  std::size_t bytes = 0;
  WM_CUDA_TRY(cub::DeviceScan::ExclusiveSum(nullptr, bytes, segments, base, bound + 1, stream));
  WM_CUDA_TRY(
      cub::DeviceScan::ExclusiveSum(cub(bytes, stream), bytes, segments, base, bound + 1, stream));
  auto* cand = static_cast<gpu::race_entry*>(candidates.reserve(
      static_cast<std::size_t>(segment_bound) * warp_size * sizeof(gpu::race_entry), device,
      stream));
  const unsigned seg_blocks =
      static_cast<unsigned>(std::min<std::int64_t>(segment_bound, 8 * num_sms));
  gpu::race_segments_kernel<W><<<seg_blocks, gpu::fill_big_threads, 0, stream>>>(
      dst, st, dg, np, big, big_count, base, fanout, seed_word, hop, w, cand);
  WM_CUDA_CHECK_LAUNCH(stream);
  gpu::merge_segments_kernel<<<grid(bound, warp_size), block_threads, 0, stream>>>(
      st, np, offsets, big, big_count, base, fanout, cand, eid_out, tmp_out);
  WM_CUDA_CHECK_LAUNCH(stream);
}

void gpu_sampler::impl::sample_edges(const call_state& c, hop_state& hop, cudaStream_t stream) {
  const sample_options& options = *c.options;
  const gpu::seed_ref seed_word{c.seed_word, hop.node_seeds};
  const int h = hop.h;
  const std::int64_t* dst = hop.dst;
  const gpu::device_count n_dst = hop.n_dst;
  const std::int64_t bound = hop.bound;
  const std::int64_t* offsets = hop.offsets;
  const bool race = hop.race;
  std::int32_t* big = hop.big;
  unsigned long long* big_count = hop.big_count;
  const float* wb = hop.wb;
  const std::int64_t* wbs = hop.wbs;
  const std::int64_t segments = hop.segments;
  const std::size_t ne = static_cast<std::size_t>(hop.edge_bound);
  // The owner's side of a served hop has no block of its own: its edge ids travel back.
  std::int64_t* eids = options.edge_ids && !hop.owner_side
                           ? hop.out->edge_ids.get<std::int64_t>(ne, device, stream)
                           : eid.get<std::int64_t>(ne, device, stream);
  std::int64_t* tm = tmp.get<std::int64_t>(ne, device, stream);
  if (race) {
    if (hop.owner_side) {
      fill(dst, n_dst, bound, offsets, options, seed_word, h,
           gpu::direct_weights<gpu::owned_part<float>>{{owned.w_part, owned.edge_begin}}, big,
           big_count, segments, eids, tm, stream);
    } else if (distributed) {
      fill(dst, n_dst, bound, offsets, options, seed_word, h, gpu::gathered_weights{wb, wbs}, big,
           big_count, segments, eids, tm, stream);
    } else if (chunked) {
      using wg = wm::PtrGen<const wm::chunked_view, const float>;
      fill(dst, n_dst, bound, offsets, options, seed_word, h,
           gpu::direct_weights<wg>{wg(static_cast<const wm::chunked_view*>(w_ptr))}, big, big_count,
           segments, eids, tm, stream);
    } else {
      using wg = wm::PtrGen<const float, const float>;
      fill(dst, n_dst, bound, offsets, options, seed_word, h,
           gpu::direct_weights<wg>{wg(static_cast<const float*>(w_ptr))}, big, big_count, segments,
           eids, tm, stream);
    }
  } else {
    // Weights are never read: any accessor type will do.
    fill(dst, n_dst, bound, offsets, options, seed_word, h, gpu::gathered_weights{nullptr, nullptr},
         nullptr, nullptr, 0, eids, tm, stream);
  }
  hop.eids = eids;
  hop.tm = tm;
}

}  // namespace wholestore::graph
