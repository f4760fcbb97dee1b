/*
 * The sampler's run() and the steps that depend on the key width K of the relabel table
 * (sampling_impl.hpp): the unique seeds of hop 0 and step 4 of every hop.  Included only by
 * sampling_keys32.cu (K = unsigned int, graphs below 2^32 - 1 nodes) and sampling_keys64.cu
 * (K = unsigned long long), which instantiate run<K>; the other steps are compiled once, in
 * sampling_counts.cu (with the rank scan of relabel, which does not depend on K),
 * sampling_fill.cu and sampling_gpu.cpp.
 */
#pragma once

#include "sample_relabel_kernels.cuh"
#include "sampling_impl.hpp"

#include <graph/sampling.hpp>
#include <wholememory/cuda_check.hpp>
#include <wholememory/error.hpp>
#include <wholememory/gather.hpp>

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

namespace wholestore::graph {

template <typename K>
std::vector<device_block> gpu_sampler::impl::run(const std::int64_t* seeds, std::size_t count,
                                                 const sample_options& options,
                                                 const std::uint64_t* seed_word,
                                                 cudaStream_t stream, bool capture, bool* bounded) {
  *bounded = !distributed;
  if (distributed && !owned.checked) setup_owned(stream);
  call_state c = begin_call(seeds, count, options, seed_word, stream, capture, bounded);
  const std::int64_t* uniq = unique_seeds<K>(c, stream);
  // A served first hop checks the seeds in its exchange of counts.
  const bool first_served =
      distributed && owned.active && c.num_hops > 0 && options.fanouts[0] >= 0;
  if ((distributed && !first_served) || c.num_hops == 0 || c.num_nodes == 0) {
    fetch_info(c.words, stream);
    check_seeds(seeds, stream);
    c.checked = true;
  }

  while (hops.size() < static_cast<std::size_t>(c.num_hops)) {
    hops.push_back(std::make_unique<hop_buffers>());
  }
  std::vector<device_block> blocks;
  const std::int64_t* dst = uniq;
  // The counts of a hop live on the device (level[h], and the edge total at offsets[bound]);
  // the host knows bounds of them and sizes buffers and grids by those.  Hops whose edge
  // bound is unknown (fanout -1) or too large, and the hops of distributed memory that are
  // not served by the owners (their gathers take host counts), fetch the exact counts
  // instead; served hops learn theirs in their exchange of counts.
  std::int64_t bound = static_cast<std::int64_t>(count);
  for (int h = 0; h < c.num_hops; ++h) {
    hop_state hop = begin_hop(c, h, dst, bound, stream);
    if (hop.served) {
      serve_hop(c, hop, stream);
    } else {
      read_destinations(c, hop, stream);
      scan_offsets(c, hop, stream);
      if (hop.exact) take_exact_counts(c, hop, stream);
      sample_edges(c, hop, stream);
    }
    blocks.push_back(relabel_hop<K>(c, hop, stream));
    dst = blocks.back().src_nodes;
    bound = std::min(hop.bound + hop.edge_bound, c.num_nodes);
  }
  end_call(c, blocks, stream);
  return blocks;
}

template <typename K>
const std::int64_t* gpu_sampler::impl::unique_seeds(const call_state& c, cudaStream_t stream) {
  const std::size_t count = c.count;
  const std::int64_t num_nodes = c.num_nodes;
  // Hop 0 destinations: the unique seeds, in order of first occurrence.  An out-of-range
  // seed became node 0, so nothing reads outside the graph before the check.
  const std::int64_t n_seeds = static_cast<std::int64_t>(count);
  WM_EXPECTS(n_seeds < std::numeric_limits<std::int32_t>::max(),
             "sample: " << n_seeds << " seeds are more than a batch can hold");
  std::int64_t* uniq = seeds_unique.get<std::int64_t>(count, device, stream);
  gpu::key_table<K> t = fresh_table<K>(n_seeds, stream);
  std::uint32_t* sl = slot.get<std::uint32_t>(count, device, stream);
  if (n_seeds > 0) {
    gpu::seed_insert_kernel<K><<<grid(n_seeds), block_threads, 0, stream>>>(
        c.seeds, n_seeds, num_nodes, t, sl, reinterpret_cast<unsigned long long*>(c.d_info));
    WM_CUDA_CHECK_LAUNCH(stream);
  }
  const gpu::new_node_flag<K> f{t, sl, gpu::device_count{nullptr, 0}, nullptr, n_seeds};
  relabel<K>(f, n_seeds, nullptr, uniq, c.level, nullptr, stream);
  return uniq;
}

template <typename K>
device_block gpu_sampler::impl::relabel_hop(const call_state& c, hop_state& hop,
                                            cudaStream_t stream) {
  const csr_graph& g = *graph;
  const sample_options& options = *c.options;
  const int h = hop.h;
  hop_buffers& out = *hop.out;
  const std::int64_t bound = hop.bound;
  const std::int64_t edge_bound = hop.edge_bound;
  const std::size_t ne = static_cast<std::size_t>(edge_bound);
  const std::int64_t* offsets = hop.offsets;
  std::int64_t* eids = hop.eids;
  const std::int64_t entries = bound + edge_bound;
  const std::size_t nt = static_cast<std::size_t>(entries);
  std::int64_t* src_nodes = out.src_nodes.get<std::int64_t>(nt, device, stream);
  std::int32_t* src_index = out.src_index.get<std::int32_t>(ne, device, stream);
  const std::int64_t* gathered = hop.gathered;
  if (distributed && gathered == nullptr) {
    std::int64_t* gc = gathered_cols.get<std::int64_t>(ne, device, stream);
    wm::wm_tensor t{&g.col_indices, g.col_type, g.num_edges, 1, 1, 0};
    wm::gather(t, wm::index_array{eids, wm::dtype::int64, ne},
               wm::dense_matrix{gc, wm::dtype::int64, ne, 1, 1}, stream);
    gathered = gc;
  }
  gpu::key_table<K> t = fresh_table<K>(entries, stream);
  std::uint32_t* sl = slot.get<std::uint32_t>(nt, device, stream);
  insert_entries<K>(c, hop, gathered, t, sl, stream);
  const gpu::new_node_flag<K> f{t, sl, hop.n_dst, hop.n_edges, 0};
  relabel<K>(f, entries, src_index, src_nodes, c.level + h + 1, c.edge_words + h, stream);

  device_block b;
  b.src_nodes = src_nodes;
  b.offsets = offsets;
  b.src_index = src_index;
  b.edge_ids = options.edge_ids ? eids : nullptr;
  return b;
}

template <typename K>
void gpu_sampler::impl::insert_entries(const call_state& c, const hop_state& hop,
                                       const std::int64_t* gathered, gpu::key_table<K> t,
                                       std::uint32_t* sl, cudaStream_t stream) {
  const csr_graph& g = *graph;
  const std::int64_t num_nodes = c.num_nodes;
  long long* fault = c.fault;
  const std::int64_t* dst = hop.dst;
  const std::int64_t* eids = hop.eids;
  const gpu::device_count n_dst = hop.n_dst;
  const std::int64_t* n_edges = hop.n_edges;
  const std::int64_t entries = hop.bound + hop.edge_bound;
  const unsigned ig = grid(entries);
  if (distributed) {
    gpu::entry_insert_kernel<K><<<ig, block_threads, 0, stream>>>(
        dst, eids, gathered, ro_direct(static_cast<const std::int64_t*>(nullptr)), n_dst, n_edges,
        t, sl, num_nodes, fault);
  } else if (g.col_type == wm::dtype::int32) {
    if (chunked) {
      using cg = wm::PtrGen<const wm::chunked_view, const std::int32_t>;
      gpu::entry_insert_kernel<K><<<ig, block_threads, 0, stream>>>(
          dst, eids, gathered, cg(static_cast<const wm::chunked_view*>(col_ptr)), n_dst, n_edges, t,
          sl, num_nodes, fault);
    } else {
      using cg = wm::PtrGen<const std::int32_t, const std::int32_t>;
      gpu::entry_insert_kernel<K><<<ig, block_threads, 0, stream>>>(
          dst, eids, gathered, cg(static_cast<const std::int32_t*>(col_ptr)), n_dst, n_edges, t, sl,
          num_nodes, fault);
    }
  } else {
    if (chunked) {
      using cg = wm::PtrGen<const wm::chunked_view, const std::int64_t>;
      gpu::entry_insert_kernel<K><<<ig, block_threads, 0, stream>>>(
          dst, eids, gathered, cg(static_cast<const wm::chunked_view*>(col_ptr)), n_dst, n_edges, t,
          sl, num_nodes, fault);
    } else {
      using cg = wm::PtrGen<const std::int64_t, const std::int64_t>;
      gpu::entry_insert_kernel<K><<<ig, block_threads, 0, stream>>>(
          dst, eids, gathered, cg(static_cast<const std::int64_t*>(col_ptr)), n_dst, n_edges, t, sl,
          num_nodes, fault);
    }
  }
  WM_CUDA_CHECK_LAUNCH(stream);
}

template <typename K>
void gpu_sampler::impl::relabel(const gpu::new_node_flag<K>& f, std::int64_t entries_bound,
                                std::int32_t* src_index, std::int64_t* src_nodes,
                                long long* num_src, long long* edges_out, cudaStream_t stream) {
  const std::size_t items = static_cast<std::size_t>(entries_bound) + 1;
  std::int32_t* rk = rank.get<std::int32_t>(items, device, stream);
  // The flags go through memory: a scan that computed them while loading would wait on two
  // dependent random reads per item.
  std::int32_t* flags = new_flags.get<std::int32_t>(items, device, stream);
  gpu::mark_new_kernel<K>
      <<<grid(entries_bound + 1), block_threads, 0, stream>>>(f, entries_bound, flags);
  WM_CUDA_CHECK_LAUNCH(stream);
  scan_new_flags(flags, rk, entries_bound, stream);
  gpu::assign_kernel<K><<<grid(entries_bound), block_threads, 0, stream>>>(
      f, rk, entries_bound, src_index, src_nodes, num_src, edges_out);
  WM_CUDA_CHECK_LAUNCH(stream);
}

}  // namespace wholestore::graph
