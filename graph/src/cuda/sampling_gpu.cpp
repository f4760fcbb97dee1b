// The GPU sampler's entry point: gpu_sampler, the captured CUDA graphs, the checks and counts
// of a call, the sizing of a hop, and device_block::to_host.  The layout of the sampler is
// described in sampling_impl.hpp.
#include "sampling_impl.hpp"

#include <graph/sampling.hpp>
#include <wholememory/communicator.hpp>
#include <wholememory/cuda_check.hpp>
#include <wholememory/device.hpp>
#include <wholememory/error.hpp>

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

namespace wholestore::graph {

namespace {

template <typename T>
void copy_to_host(std::vector<T>& out, const T* src, std::int64_t count, cudaStream_t stream) {
  out.resize(static_cast<std::size_t>(count));
  if (count > 0) {
    WM_EXPECTS(src != nullptr, "device_block: null array with " << count << " elements");
    WM_CUDA_TRY(cudaMemcpyAsync(out.data(), src, sizeof(T) * static_cast<std::size_t>(count),
                                cudaMemcpyDefault, stream));
  }
}

/// Above this many entries (dst nodes + edge bound) a hop learns its exact counts from the
/// device instead of sizing its buffers and grids by the bound.
constexpr std::int64_t bound_cap = std::int64_t{1} << 24;

/// Captured graphs kept per sampler (shapes of a training loop: the full and the last batch).
constexpr std::size_t max_graphs = 4;

bool same_options(const sample_options& a, const sample_options& b) {
  return a.fanouts == b.fanouts && a.method == b.method && a.edge_ids == b.edge_ids;
}

}  // namespace

block device_block::to_host(cudaStream_t stream) const {
  block b;
  b.num_dst = num_dst;
  copy_to_host(b.src_nodes, src_nodes, num_src, stream);
  if (offsets == nullptr && num_dst == 0) {
    b.offsets.assign(1, 0);  // a default-constructed (empty) block
  } else {
    copy_to_host(b.offsets, offsets, num_dst + 1, stream);
  }
  copy_to_host(b.src_index, src_index, num_edges, stream);
  if (edge_ids != nullptr) copy_to_host(b.edge_ids, edge_ids, num_edges, stream);
  WM_CUDA_TRY(cudaStreamSynchronize(stream));
  return b;
}

bool gpu_sampler::impl::any_rank(bool mine, cudaStream_t stream) {
  long long* any = flag.get<long long>(2, device, stream);
  long long* host_any = host_info + host_words - 1;  // the last word is not an info word
  *host_any = mine ? 1 : 0;
  WM_CUDA_TRY(cudaMemcpyAsync(any, host_any, sizeof(long long), cudaMemcpyHostToDevice, stream));
  graph->row_offsets.comm().allreduce_sum(any, any, 1, wm::dtype::int64, stream);
  graph->row_offsets.comm().synchronize(stream);
  WM_CUDA_TRY(cudaMemcpyAsync(host_any, any, sizeof(long long), cudaMemcpyDeviceToHost, stream));
  WM_CUDA_TRY(cudaStreamSynchronize(stream));
  return *host_any > 0;
}

void gpu_sampler::impl::check_seeds(const std::int64_t* seeds, cudaStream_t stream, int any) {
  const std::int64_t num_nodes = static_cast<std::int64_t>(graph->num_nodes);
  const bool bad_here = host_info[0] != 0;
  const std::int64_t bad_pos =
      bad_here ? static_cast<std::int64_t>(~static_cast<unsigned long long>(host_info[0])) : -1;
  if (distributed) {
    // Every rank learns whether any rank had a bad seed, so that none is left waiting in a
    // collective.
    const bool any_bad = any >= 0 ? any != 0 : any_rank(bad_here, stream);
    if (any_bad && !bad_here) {
      WM_FAIL(wm::logic_error,
              "sample: a seed outside [0, " << num_nodes << ") was passed on another rank");
    }
  }
  if (bad_here) {
    std::int64_t value = 0;
    WM_CUDA_TRY(cudaMemcpyAsync(&value, seeds + bad_pos, sizeof value, cudaMemcpyDefault, stream));
    WM_CUDA_TRY(cudaStreamSynchronize(stream));
    WM_FAIL(wm::logic_error, "sample: seed " << value << " at position " << bad_pos
                                             << " is outside [0, " << num_nodes << ")");
  }
}

void gpu_sampler::impl::check_graph(std::size_t num_hops, cudaStream_t stream, long long any) {
  const std::size_t at = 2 + 3 * num_hops;
  const long long kind = host_info[at], where = host_info[at + 1];
  if (distributed) {
    const bool any_fault = any >= 0 ? any != 0 : any_rank(kind != 0, stream);
    if (any_fault && kind == 0) {
      WM_FAIL(wm::logic_error,
              "sample: the graph is corrupt (another rank met a row_offsets or col_indices value "
              "outside the graph; its memory was changed after loading?)");
    }
  }
  if (kind == gpu::fault_row) {
    WM_FAIL(wm::logic_error, "sample: the graph is corrupt: row_offsets["
                                 << where << "] and row_offsets[" << where + 1
                                 << "] are not a row within [0, num_edges = " << graph->num_edges
                                 << "] (its memory was changed after loading?)");
  }
  if (kind == gpu::fault_column) {
    WM_FAIL(wm::logic_error, "sample: the graph is corrupt: col_indices["
                                 << where << "] is outside [0, num_nodes = " << graph->num_nodes
                                 << ") (its memory was changed after loading?)");
  }
}

gpu_sampler::impl::call_state gpu_sampler::impl::begin_call(
    const std::int64_t* seeds, std::size_t count, const sample_options& options,
    const std::uint64_t* seed_word, cudaStream_t stream, bool capture, bool* bounded) {
  call_state c;
  c.seeds = seeds;
  c.count = count;
  c.options = &options;
  c.seed_word = seed_word;
  c.capture = capture;
  c.bounded = bounded;
  const csr_graph& g = *graph;
  c.num_nodes = static_cast<std::int64_t>(g.num_nodes);
  c.weighted = options.method == sample_method::weighted;
  c.num_hops = static_cast<int>(options.fanouts.size());
  const int num_hops = c.num_hops;
  c.words = 4 + 3 * static_cast<std::size_t>(num_hops);
  // One more host word than info words: check_seeds' scratch.
  c.d_info = device_info(c.words + 1, stream);
  WM_CUDA_TRY(cudaMemsetAsync(c.d_info, 0, c.words * sizeof(long long), stream));
  c.level = c.d_info + 1;
  c.edge_words = c.d_info + 2 + num_hops;
  c.big_words = c.d_info + 2 + 2 * num_hops;
  c.fault = c.d_info + 2 + 3 * num_hops;
  c.num_edges = static_cast<std::int64_t>(g.num_edges);
  if (c.weighted && g.has_weights() && (!distributed || owned.active)) {
    c.degree_bound = weight_stats(stream);
  }
  return c;
}

gpu_sampler::impl::hop_state gpu_sampler::impl::begin_hop(call_state& c, int h,
                                                          const std::int64_t* dst,
                                                          std::int64_t bound, cudaStream_t stream) {
  const sample_options& options = *c.options;
  hop_state hop;
  hop.h = h;
  hop.dst = dst;
  hop.fanout = options.fanouts[static_cast<std::size_t>(h)];
  const int fanout = hop.fanout;
  hop.out = hops[static_cast<std::size_t>(h)].get();
  // Served hops learn their exact count in their exchange of counts (serve_hop).
  hop.served = distributed && owned.active && fanout >= 0;
  if (distributed && !hop.served) {
    c.peer_bound.clear();  // the next served hop counts first
    if (h > 0) fetch_info(c.words, stream);
    bound = host_info[1 + h];
  }
  hop.exact =
      !hop.served && (distributed || fanout < 0 ||
                      bound + bound * static_cast<std::int64_t>(std::max(fanout, 0)) > bound_cap);
  if (hop.exact) *c.bounded = false;
  WM_EXPECTS(!(hop.exact && c.capture), "sample: a hop with exact counts cannot be captured");
  hop.n_dst = gpu::device_count{c.level + h, 0};
  const std::size_t nb = static_cast<std::size_t>(bound);
  hop.bound = bound;
  hop.nb = nb;
  hop.offsets = hop.out->offsets.get<std::int64_t>(nb + 1, device, stream);
  hop.st = start.get<std::int64_t>(nb, device, stream);
  hop.dg = deg.get<std::int64_t>(nb, device, stream);
  hop.cnt = counts.get<std::int64_t>(nb + 1, device, stream);
  hop.race = c.weighted && fanout >= 0;
  hop.big = hop.race ? big_list.get<std::int32_t>(nb, device, stream) : nullptr;
  hop.big_count = reinterpret_cast<unsigned long long*>(c.big_words + h);
  // Race hops of fanout 1..32 spread big nodes over blocks: a bound of their segments.
  hop.segmentable = hop.race && fanout >= 1 && fanout <= warp_size;
  if (hop.segmentable && c.degree_bound > gpu::big_degree) {
    hop.segments = std::min(bound, big_nodes) +
                   static_cast<std::int64_t>(graph->num_edges) / gpu::segment_edges + 1;
  }
  hop.n_edges = hop.offsets + nb;  // on the device
  // Exact hops replace it after the scan (take_exact_counts).
  hop.edge_bound = bound * static_cast<std::int64_t>(std::max(fanout, 0));
  return hop;
}

void gpu_sampler::impl::take_exact_counts(call_state& c, hop_state& hop, cudaStream_t stream) {
  const int h = hop.h;
  const std::size_t words = c.words;
  WM_CUDA_TRY(cudaMemcpyAsync(host_info + 1 + h, c.level + h, sizeof(long long),
                              cudaMemcpyDeviceToHost, stream));
  WM_CUDA_TRY(cudaMemcpyAsync(host_info + words, hop.offsets + hop.bound, sizeof(long long),
                              cudaMemcpyDeviceToHost, stream));
  WM_CUDA_TRY(
      cudaMemcpyAsync(host_info, c.d_info, sizeof(long long), cudaMemcpyDeviceToHost, stream));
  WM_CUDA_TRY(cudaStreamSynchronize(stream));
  const std::int64_t n_exact = host_info[1 + h];
  const std::int64_t e_exact = host_info[words];
  if (!c.checked) {
    check_seeds(c.seeds, stream);
    c.checked = true;
  }
  WM_EXPECTS(n_exact >= 0 && n_exact <= hop.bound,
             "sample: hop " << h << " has " << n_exact << " destinations, bound " << hop.bound);
  WM_EXPECTS(e_exact >= 0 && n_exact + e_exact < std::numeric_limits<std::int32_t>::max(),
             "sample: hop " << h << " has " << n_exact << " destinations and " << e_exact
                            << " edges, more than 32-bit local indices can address");
  hop.bound = n_exact;
  hop.edge_bound = e_exact;
}

void gpu_sampler::impl::end_call(call_state& c, std::vector<device_block>& blocks,
                                 cudaStream_t stream) {
  // The one wait of the call: every count, and the seed check.
  if (c.capture) {
    WM_CUDA_TRY(cudaMemcpyAsync(host_info, c.d_info, sizeof(long long) * c.words,
                                cudaMemcpyDeviceToHost, stream));
    return;
  }
  long long any_fault = -1;
  if (distributed) {
    // Whether any rank met a corrupt row or column, reduced on the device before the one wait
    // (info word `words`, free on the device: the host's extra word is check_seeds' scratch).
    long long* any = c.d_info + c.words;
    WM_CUDA_TRY(cudaMemcpyAsync(any, c.fault, sizeof(long long), cudaMemcpyDeviceToDevice, stream));
    graph->row_offsets.comm().allreduce_sum(any, any, 1, wm::dtype::int64, stream);
    fetch_info(c.words + 1, stream);
    any_fault = host_info[c.words];
  } else {
    fetch_info(c.words, stream);
  }
  finish(blocks, c.checked ? nullptr : c.seeds, stream, any_fault);
}

void gpu_sampler::impl::finish(std::vector<device_block>& blocks, const std::int64_t* seeds,
                               cudaStream_t stream, long long any_fault) {
  if (seeds != nullptr) check_seeds(seeds, stream);
  const std::size_t num_hops = blocks.size();
  check_graph(num_hops, stream, any_fault);
  for (std::size_t h = 0; h < num_hops; ++h) {
    device_block& b = blocks[h];
    b.num_dst = host_info[1 + h];
    b.num_src = host_info[2 + h];
    b.num_edges = host_info[2 + num_hops + h];
  }
}

template <typename K>
void gpu_sampler::impl::capture_graph(const std::int64_t* seeds, std::size_t count,
                                      const sample_options& options,
                                      const std::uint64_t* seed_word) {
  if (capture_stream.value() == nullptr)
    capture_stream = wholememory::cuda_stream(wholememory::stream_flags::non_blocking);
  const std::uint64_t epoch = gpu::buffer_epoch.load();
  captured c;
  c.count = count;
  c.options = options;
  WM_CUDA_TRY(cudaStreamBeginCapture(capture_stream, cudaStreamCaptureModeThreadLocal));
  cudaGraph_t graph = nullptr;
  try {
    bool bounded = false;
    c.blocks = run<K>(seeds, count, options, seed_word, capture_stream, true, &bounded);
  } catch (...) {
    WM_CUDA_WARN(cudaStreamEndCapture(capture_stream, &graph));
    if (graph != nullptr) WM_CUDA_WARN(cudaGraphDestroy(graph));
    throw;
  }
  WM_CUDA_TRY(cudaStreamEndCapture(capture_stream, &graph));
  const cudaError_t inst = cudaGraphInstantiate(&c.exec, graph, 0);
  WM_CUDA_WARN(cudaGraphDestroy(graph));
  WM_CUDA_TRY(inst);
  // The capture must not have moved a buffer (it would hold stale pointers).
  if (gpu::buffer_epoch.load() != epoch) {
    WM_CUDA_WARN(cudaGraphExecDestroy(c.exec));
    return;
  }
  c.epoch = epoch;
  if (graphs.size() >= max_graphs) {
    WM_CUDA_WARN(cudaGraphExecDestroy(graphs.front().exec));
    graphs.erase(graphs.begin());
  }
  graphs.push_back(std::move(c));
}

gpu_sampler::gpu_sampler(const csr_graph& graph) : impl_(std::make_unique<impl>()) {
  impl& s = *impl_;
  s.graph = &graph;
  WM_CUDA_TRY(cudaGetDevice(&s.device));
  WM_EXPECTS(graph.row_offsets && graph.col_indices, "gpu_sampler: the graph has no arrays");
  WM_EXPECTS(graph.num_nodes > 0 || graph.num_edges == 0, "gpu_sampler: edges without nodes");
  WM_EXPECTS(
      graph.col_type == wm::dtype::int32 || graph.col_type == wm::dtype::int64,
      "gpu_sampler: col_indices must be int32 or int64, not " << wm::dtype_name(graph.col_type));
  const wm::memory_type type = graph.type();
  s.distributed = type == wm::memory_type::distributed;
  s.chunked = type == wm::memory_type::chunked;
  if (s.distributed) {
    WM_EXPECTS(graph.row_offsets.comm().get_backend() == wm::backend::nccl,
               "gpu_sampler: distributed memory needs an NCCL communicator");
  } else if (s.chunked) {
    s.ro_ptr = graph.row_offsets.device_view(s.device);
    s.col_ptr = graph.col_indices.device_view(s.device);
    if (graph.has_weights()) s.w_ptr = graph.edge_weights.device_view(s.device);
  } else {
    s.ro_ptr = graph.row_offsets.data();
    s.col_ptr = graph.col_indices.data();
    if (graph.has_weights()) s.w_ptr = graph.edge_weights.data();
  }
  // 32-bit keys hold ids below 2^32 - 1 (all ones marks a free table slot).
  s.wide_keys = graph.num_nodes >= (std::uint64_t{1} << 32) - 1;
  WM_CUDA_TRY(cudaDeviceGetAttribute(&s.num_sms, cudaDevAttrMultiProcessorCount, s.device));
  int per_sm = 0;
  WM_CUDA_TRY(cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxThreadsPerMultiProcessor, s.device));
  s.max_blocks = std::max(1, s.num_sms * (per_sm / block_threads));
  void* staging = nullptr;
  WM_CUDA_TRY(cudaHostAlloc(&staging, sizeof(std::uint64_t), cudaHostAllocDefault));
  s.host_seed = static_cast<std::uint64_t*>(staging);
}

gpu_sampler::~gpu_sampler() = default;

bool gpu_sampler::served_by_owners() const { return impl_->owned.active; }

std::uint64_t gpu_sampler::padded_hops() const { return impl_->owned.padded_hops; }

std::vector<device_block> gpu_sampler::sample(const std::int64_t* seeds, std::size_t count,
                                              const sample_options& options, cudaStream_t stream) {
  impl& s = *impl_;
  for (std::size_t h = 0; h < options.fanouts.size(); ++h) {
    WM_EXPECTS(options.fanouts[h] >= -1,
               "sample: fanout " << options.fanouts[h] << " of hop " << h << " is below -1");
  }
  if (options.method == sample_method::weighted) {
    WM_EXPECTS(s.graph->has_weights(), "sample: weighted sampling needs edge weights");
  }
  WM_EXPECTS(count == 0 || seeds != nullptr, "sample: null seeds with " << count << " seeds");
  wm::device_guard guard(s.device);
  // The sampler works from its own copy of the seeds and the random seed, where a captured
  // graph reads them.
  std::int64_t* own = s.seeds_copy.get<std::int64_t>(count + 1, s.device, stream);
  if (count > 0) {
    WM_CUDA_TRY(
        cudaMemcpyAsync(own, seeds, count * sizeof(std::int64_t), cudaMemcpyDefault, stream));
  }
  auto* seed_word = reinterpret_cast<std::uint64_t*>(own + count);
  *s.host_seed = options.random_seed;  // the previous call's copy has completed: calls wait
  WM_CUDA_TRY(cudaMemcpyAsync(seed_word, s.host_seed, sizeof(std::uint64_t), cudaMemcpyHostToDevice,
                              stream));
  for (impl::captured& c : s.graphs) {
    if (c.count != count || !same_options(c.options, options)) continue;
    if (c.epoch != gpu::buffer_epoch.load()) break;  // buffers moved since: capture again
    WM_CUDA_TRY(cudaGraphLaunch(c.exec, stream));
    WM_CUDA_TRY(cudaStreamSynchronize(stream));
    std::vector<device_block> blocks = c.blocks;
    s.finish(blocks, s.host_info[0] != 0 ? seeds : nullptr, stream);
    return blocks;
  }
  bool bounded = false;
  std::vector<device_block> blocks =
      s.wide_keys
          ? s.run<unsigned long long>(own, count, options, seed_word, stream, false, &bounded)
          : s.run<unsigned int>(own, count, options, seed_word, stream, false, &bounded);
  // Debug builds capture too: their launch checks skip the wait while the stream captures.
  if (bounded && count > 0 && !options.fanouts.empty() && s.graph->num_nodes > 0) {
    // Drop graphs of this shape captured before a buffer moved.
    for (auto it = s.graphs.begin(); it != s.graphs.end();) {
      if (it->count == count && same_options(it->options, options)) {
        WM_CUDA_WARN(cudaGraphExecDestroy(it->exec));
        it = s.graphs.erase(it);
      } else {
        ++it;
      }
    }
    if (s.wide_keys) {
      s.capture_graph<unsigned long long>(own, count, options, seed_word);
    } else {
      s.capture_graph<unsigned int>(own, count, options, seed_word);
    }
  }
  return blocks;
}

}  // namespace wholestore::graph
