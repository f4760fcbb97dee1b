// The GPU sampler: gpu_sampler and device_block::to_host.  Kernels in sampling_kernels.cuh.
#include "sampling_kernels.cuh"

#include <graph/sampling.hpp>
#include <wholememory/communicator.hpp>
#include <wholememory/cuda_check.hpp>
#include <wholememory/device_buffer.hpp>
#include <wholememory/error.hpp>
#include <wholememory/gather.hpp>

#include <cuda_runtime.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>
#include <cub/device/device_scan.cuh>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

namespace wholestore::graph {

namespace wm = ::wholememory;
using gpu::kWarp;

namespace {

constexpr int kThreads = 256;

/// Bumped whenever a sampler buffer moves: CUDA graphs captured before hold stale pointers.
std::atomic<std::uint64_t> buffer_epoch{0};

/// Grow-only device scratch.  Growing waits for `stream` first: the old buffer may still be
/// read by work queued before.
class scratch {
 public:
  void* reserve(std::size_t bytes, int device, cudaStream_t stream) {
    bytes = std::max<std::size_t>(bytes, 16);
    if (bytes > buffer_.size()) {
      ++buffer_epoch;
      const std::size_t want = std::max(bytes, buffer_.size() + buffer_.size() / 2);
      if (!buffer_.empty()) WM_CUDA_TRY(cudaStreamSynchronize(stream));
      buffer_.reset();
      buffer_ = wm::device_buffer(want, device);
    }
    return buffer_.data();
  }
  template <typename T>
  T* get(std::size_t count, int device, cudaStream_t stream) {
    return static_cast<T*>(reserve(count * sizeof(T), device, stream));
  }

 private:
  wm::device_buffer buffer_;
};

template <typename T>
void copy_to_host(std::vector<T>& out, const T* src, std::int64_t count, cudaStream_t stream) {
  out.resize(static_cast<std::size_t>(count));
  if (count > 0) {
    WM_EXPECTS(src != nullptr, "device_block: null array with " << count << " elements");
    WM_CUDA_TRY(cudaMemcpyAsync(out.data(), src, sizeof(T) * static_cast<std::size_t>(count),
                                cudaMemcpyDefault, stream));
  }
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

struct gpu_sampler::impl {
  const csr_graph* graph = nullptr;
  int device = 0;
  int max_blocks = 1;  // grid-stride kernels: resident blocks of kThreads on the device
  int num_sms = 1;
  bool distributed = false;
  bool chunked = false;
  const void* ro_ptr = nullptr;  // continuous: data(); chunked: device view
  const void* col_ptr = nullptr;
  const void* w_ptr = nullptr;
  bool wide_keys = false;        // 64-bit keys (num_nodes >= 2^32 - 1)
  std::int64_t max_degree = -1;  // weight_stats, at the first weighted call (not distributed):
  std::int64_t big_nodes = 0;    // with the number of nodes above gpu::kBigDegree edges
  bool all_positive = false;     // and whether every weight is > 0 (no counting pass needed)

  // Per-hop outputs, kept until the next call.
  struct hop_buffers {
    scratch src_nodes, offsets, src_index, edge_ids;
  };
  std::vector<std::unique_ptr<hop_buffers>> hops;
  scratch seeds_unique;
  // Shared scratch.
  scratch table, slot, new_flags, rank, start, deg, counts, eid, tmp, cub_temp, big_list;
  scratch seg_base, candidates;
  scratch ro2, row_idx, wbase, wbuf, widx, gathered_cols, flag;
  // The call's counts, on the device and (after a fetch) in pinned host memory:
  // [0] ~first bad seed position (0: none), [1 + h] the dst count of hop h (h = hops: the last
  // src count), [2 + hops + h] the edge count of hop h, [2 + 2 hops + h] its big-node count,
  // [2 + 3 hops] and [3 + 3 hops] the graph fault (gpu::record_fault; 0: none).
  scratch info;
  long long* host_info = nullptr;
  std::size_t host_words = 0;
  scratch seeds_copy;  // the call's seeds, then its random seed: captured graphs read them here
  std::uint64_t* host_seed = nullptr;  // pinned staging of the random seed

  // Calls whose every hop is sized by bounds issue the same work for the same (batch size,
  // options): after the first such call the work is captured once as a CUDA graph and
  // replayed, which saves the launch costs of its ~10 kernels per hop.
  struct captured {
    std::size_t count = 0;
    sample_options options;
    std::uint64_t epoch = 0;
    cudaGraphExec_t exec = nullptr;
    std::vector<device_block> blocks;  // pointers; counts filled per replay
  };
  std::vector<captured> graphs;
  cudaStream_t capture_stream = nullptr;

  ~impl() {
    for (captured& c : graphs) WM_CUDA_WARN(cudaGraphExecDestroy(c.exec));
    if (capture_stream != nullptr) WM_CUDA_WARN(cudaStreamDestroy(capture_stream));
    if (host_seed != nullptr) WM_CUDA_WARN(cudaFreeHost(host_seed));
    if (host_info != nullptr) WM_CUDA_WARN(cudaFreeHost(host_info));
  }

  unsigned grid(std::int64_t items, int per_item = 1) const {
    const std::int64_t blocks = (items * per_item + kThreads - 1) / kThreads;
    return static_cast<unsigned>(
        std::max<std::int64_t>(1, std::min<std::int64_t>(blocks, max_blocks)));
  }

  void* cub(std::size_t bytes, cudaStream_t stream) {
    return cub_temp.reserve(bytes, device, stream);
  }

  long long* device_info(std::size_t words, cudaStream_t stream) {
    if (words > host_words) {
      ++buffer_epoch;
      WM_CUDA_TRY(cudaStreamSynchronize(stream));
      if (host_info != nullptr) WM_CUDA_TRY(cudaFreeHost(host_info));
      host_info = nullptr;
      host_words = 0;
      void* host = nullptr;
      WM_CUDA_TRY(cudaHostAlloc(&host, words * sizeof(long long), cudaHostAllocDefault));
      host_info = static_cast<long long*>(host);
      host_words = words;
    }
    return info.get<long long>(words, device, stream);
  }

  /// Copies the first `words` info words to the host and waits for the stream.
  void fetch_info(std::size_t words, cudaStream_t stream) {
    WM_CUDA_TRY(cudaMemcpyAsync(host_info, info.get<long long>(words, device, stream),
                                sizeof(long long) * words, cudaMemcpyDeviceToHost, stream));
    WM_CUDA_TRY(cudaStreamSynchronize(stream));
  }

  /// An empty table with room for `entries` keys (load at most 2/3).
  template <typename K>
  gpu::key_table<K> fresh_table(std::int64_t entries, cudaStream_t stream) {
    std::size_t cap = 1024;
    const std::size_t want =
        static_cast<std::size_t>(entries) + static_cast<std::size_t>(entries) / 2;
    while (cap <= want) cap *= 2;
    const std::size_t bytes = cap * (sizeof(K) + sizeof(unsigned));
    char* base = static_cast<char*>(table.reserve(bytes, device, stream));
    WM_CUDA_TRY(cudaMemsetAsync(base, 0xFF, bytes, stream));
    return {reinterpret_cast<K*>(base), reinterpret_cast<unsigned*>(base + cap * sizeof(K)),
            static_cast<std::uint32_t>(cap - 1)};
  }

  /// Throws when host_info[0] names a bad seed (on any rank, for distributed memory).
  void check_seeds(const std::int64_t* seeds, cudaStream_t stream);
  /// Distributed graphs: whether any rank reports `mine` true (an allreduce over the graph's
  /// communicator and one wait), so that no rank is left waiting in a collective.
  bool any_rank(bool mine, cudaStream_t stream);
  /// Throws when host_info's fault words name a corrupt row or column index (on every rank,
  /// for distributed memory).
  void check_graph(std::size_t num_hops, cudaStream_t stream);
  /// Scans the new-node flags of `entries_bound` entries and assigns local ids.
  template <typename K>
  void relabel(const gpu::new_node_flag<K>& f, std::int64_t entries_bound, std::int32_t* src_index,
               std::int64_t* src_nodes, long long* num_src, long long* edges_out,
               cudaStream_t stream);
  /// The sample of `seeds` (count of them).  `capture`: the stream is capturing a graph, so
  /// the final copy of the counts is queued without a wait and the blocks keep no counts.
  /// *bounded tells whether every hop was sized by bounds (no wait before the end).
  template <typename K>
  std::vector<device_block> run(const std::int64_t* seeds, std::size_t count,
                                const sample_options& options, const std::uint64_t* seed_word,
                                cudaStream_t stream, bool capture, bool* bounded);
  /// Counts of the blocks from host_info, after the final copy; throws for a bad seed.
  void finish(std::vector<device_block>& blocks, const std::int64_t* seeds, cudaStream_t stream);
  template <typename K>
  void capture_graph(const std::int64_t* seeds, std::size_t count, const sample_options& options,
                     const std::uint64_t* seed_word);
  template <typename W>
  void fill(const std::int64_t* dst, gpu::device_count n_dst, std::int64_t bound,
            const std::int64_t* offsets, const sample_options& options,
            const std::uint64_t* seed_word, int hop, W w, const std::int32_t* big,
            const unsigned long long* big_count, std::int64_t segment_bound, std::int64_t* eid_out,
            std::int64_t* tmp_out, cudaStream_t stream);
  template <typename W>
  void count_weighted(gpu::device_count n_dst, std::int64_t bound, std::int64_t degree_bound, W w,
                      std::int32_t* big, unsigned long long* big_count, cudaStream_t stream);
  /// The graph's largest degree (returned), its nodes above gpu::kBigDegree edges and whether
  /// every weight is positive, found once (one pass over row offsets and weights, one wait).
  std::int64_t weight_stats(cudaStream_t stream);
};

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

void gpu_sampler::impl::check_seeds(const std::int64_t* seeds, cudaStream_t stream) {
  const std::int64_t num_nodes = static_cast<std::int64_t>(graph->num_nodes);
  const bool bad_here = host_info[0] != 0;
  const std::int64_t bad_pos =
      bad_here ? static_cast<std::int64_t>(~static_cast<unsigned long long>(host_info[0])) : -1;
  if (distributed) {
    // Every rank learns whether any rank had a bad seed, so that none is left waiting in a
    // collective.
    if (any_rank(bad_here, stream) && !bad_here) {
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

void gpu_sampler::impl::check_graph(std::size_t num_hops, cudaStream_t stream) {
  const std::size_t at = 2 + 3 * num_hops;
  const long long kind = host_info[at], where = host_info[at + 1];
  if (distributed) {
    if (any_rank(kind != 0, stream) && kind == 0) {
      WM_FAIL(wm::logic_error,
              "sample: the graph is corrupt (another rank met a row_offsets or col_indices value "
              "outside the graph; its memory was changed after loading?)");
    }
  }
  if (kind == gpu::kFaultRow) {
    WM_FAIL(wm::logic_error, "sample: the graph is corrupt: row_offsets["
                                 << where << "] and row_offsets[" << where + 1
                                 << "] are not a row within [0, num_edges = " << graph->num_edges
                                 << "] (its memory was changed after loading?)");
  }
  if (kind == gpu::kFaultColumn) {
    WM_FAIL(wm::logic_error, "sample: the graph is corrupt: col_indices["
                                 << where << "] is outside [0, num_nodes = " << graph->num_nodes
                                 << ") (its memory was changed after loading?)");
  }
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
      <<<grid(entries_bound + 1), kThreads, 0, stream>>>(f, entries_bound, flags);
  WM_CUDA_CHECK_LAUNCH(stream);
  std::size_t bytes = 0;
  WM_CUDA_TRY(cub::DeviceScan::ExclusiveSum(nullptr, bytes, flags, rk, entries_bound + 1, stream));
  WM_CUDA_TRY(cub::DeviceScan::ExclusiveSum(cub(bytes, stream), bytes, flags, rk, entries_bound + 1,
                                            stream));
  gpu::assign_kernel<K><<<grid(entries_bound), kThreads, 0, stream>>>(
      f, rk, entries_bound, src_index, src_nodes, num_src, edges_out);
  WM_CUDA_CHECK_LAUNCH(stream);
}

template <typename W>
void gpu_sampler::impl::count_weighted(gpu::device_count n_dst, std::int64_t bound,
                                       std::int64_t degree_bound, W w, std::int32_t* big,
                                       unsigned long long* big_count, cudaStream_t stream) {
  std::int64_t* st = start.get<std::int64_t>(0, device, stream);
  std::int64_t* dg = deg.get<std::int64_t>(0, device, stream);
  std::int64_t* cnt = counts.get<std::int64_t>(0, device, stream);
  gpu::count_weighted_kernel<<<grid(bound, kWarp), kThreads, 0, stream>>>(st, dg, n_dst, w, cnt,
                                                                          big, big_count);
  WM_CUDA_CHECK_LAUNCH(stream);
  if (degree_bound <= gpu::kBigDegree) return;
  const std::int64_t chunks =
      std::min<std::int64_t>(256, (degree_bound + gpu::kCountChunk - 1) / gpu::kCountChunk);
  const dim3 blocks(static_cast<unsigned>(std::min<std::int64_t>(bound, num_sms)),
                    static_cast<unsigned>(chunks));
  gpu::count_big_kernel<<<blocks, gpu::kBigThreads, 0, stream>>>(big, big_count, st, dg, w, cnt);
  WM_CUDA_CHECK_LAUNCH(stream);
}

template <typename W>
void gpu_sampler::impl::fill(const std::int64_t* dst, gpu::device_count n_dst, std::int64_t bound,
                             const std::int64_t* offsets, const sample_options& options,
                             const std::uint64_t* seed_word, int hop, W w, const std::int32_t* big,
                             const unsigned long long* big_count, std::int64_t segment_bound,
                             std::int64_t* eid_out, std::int64_t* tmp_out, cudaStream_t stream) {
  if (bound == 0) return;
  const int fanout = options.fanouts[static_cast<std::size_t>(hop)];
  const std::int64_t* st = start.get<std::int64_t>(0, device, stream);
  const std::int64_t* dg = deg.get<std::int64_t>(0, device, stream);
  const std::int64_t* np = counts.get<std::int64_t>(0, device, stream);
  if (options.method != sample_method::weighted && fanout >= 0 && fanout <= 16) {
    if (fanout <= 4) {
      gpu::fill_small_kernel<4><<<grid(bound, 4), kThreads, 0, stream>>>(
          dst, st, dg, offsets, n_dst, options.method, fanout, seed_word, hop, eid_out);
    } else if (fanout <= 8) {
      gpu::fill_small_kernel<8><<<grid(bound, 8), kThreads, 0, stream>>>(
          dst, st, dg, offsets, n_dst, options.method, fanout, seed_word, hop, eid_out);
    } else {
      gpu::fill_small_kernel<16><<<grid(bound, 16), kThreads, 0, stream>>>(
          dst, st, dg, offsets, n_dst, options.method, fanout, seed_word, hop, eid_out);
    }
    WM_CUDA_CHECK_LAUNCH(stream);
    return;
  }
  gpu::fill_kernel<W><<<grid(bound, kWarp), kThreads, 0, stream>>>(
      dst, st, dg, np, offsets, n_dst, options.method, fanout, seed_word, hop, w, eid_out, tmp_out);
  WM_CUDA_CHECK_LAUNCH(stream);
  if (big == nullptr) return;
  const bool segmented = segment_bound > 0;
  const unsigned blocks = static_cast<unsigned>(std::min<std::int64_t>(bound, 4 * num_sms));
  gpu::fill_big_kernel<W><<<blocks, gpu::kBigFillThreads, 0, stream>>>(
      dst, st, dg, np, offsets, big, big_count, fanout, seed_word, hop, w, segmented, eid_out,
      tmp_out);
  WM_CUDA_CHECK_LAUNCH(stream);
  if (!segmented) return;
  // Big nodes raced by segments of gpu::kSegment edges, a block each, then merged.
  std::int64_t* base =
      seg_base.get<std::int64_t>(static_cast<std::size_t>(bound) + 1, device, stream);
  auto segments = thrust::make_transform_iterator(thrust::counting_iterator<std::int64_t>(0),
                                                  gpu::big_segments{big, big_count, dg});
  std::size_t bytes = 0;
  WM_CUDA_TRY(cub::DeviceScan::ExclusiveSum(nullptr, bytes, segments, base, bound + 1, stream));
  WM_CUDA_TRY(
      cub::DeviceScan::ExclusiveSum(cub(bytes, stream), bytes, segments, base, bound + 1, stream));
  auto* cand = static_cast<gpu::race_entry*>(candidates.reserve(
      static_cast<std::size_t>(segment_bound) * kWarp * sizeof(gpu::race_entry), device, stream));
  const unsigned seg_blocks =
      static_cast<unsigned>(std::min<std::int64_t>(segment_bound, 8 * num_sms));
  gpu::race_segments_kernel<W><<<seg_blocks, gpu::kBigFillThreads, 0, stream>>>(
      dst, st, dg, np, big, big_count, base, fanout, seed_word, hop, w, cand);
  WM_CUDA_CHECK_LAUNCH(stream);
  gpu::merge_segments_kernel<<<grid(bound, kWarp), kThreads, 0, stream>>>(
      st, np, offsets, big, big_count, base, fanout, cand, eid_out, tmp_out);
  WM_CUDA_CHECK_LAUNCH(stream);
}

namespace {

using ro_direct = wm::PtrGen<const std::int64_t, const std::int64_t>;
using ro_chunked = wm::PtrGen<const wm::chunked_view, const std::int64_t>;

/// Above this many entries (dst nodes + edge bound) a hop learns its exact counts from the
/// device instead of sizing its buffers and grids by the bound.
constexpr std::int64_t kBoundCap = std::int64_t{1} << 24;

/// Captured graphs kept per sampler (shapes of a training loop: the full and the last batch).
constexpr std::size_t kMaxGraphs = 4;

bool same_options(const sample_options& a, const sample_options& b) {
  return a.fanouts == b.fanouts && a.method == b.method && a.edge_ids == b.edge_ids;
}

}  // namespace

std::int64_t gpu_sampler::impl::weight_stats(cudaStream_t stream) {
  if (max_degree >= 0) return max_degree;
  auto* words = reinterpret_cast<unsigned long long*>(flag.get<long long>(3, device, stream));
  WM_CUDA_TRY(cudaMemsetAsync(words, 0, 3 * sizeof(unsigned long long), stream));
  const std::int64_t n = static_cast<std::int64_t>(graph->num_nodes);
  if (chunked) {
    gpu::degree_stats_kernel<<<grid(n), kThreads, 0, stream>>>(
        ro_chunked(static_cast<const wm::chunked_view*>(ro_ptr)), n,
        static_cast<std::int64_t>(graph->num_edges), words);
  } else {
    gpu::degree_stats_kernel<<<grid(n), kThreads, 0, stream>>>(
        ro_direct(static_cast<const std::int64_t*>(ro_ptr)), n,
        static_cast<std::int64_t>(graph->num_edges), words);
  }
  WM_CUDA_CHECK_LAUNCH(stream);
  const std::int64_t ne = static_cast<std::int64_t>(graph->num_edges);
  if (chunked) {
    using wg = wm::PtrGen<const wm::chunked_view, const float>;
    gpu::count_nonpositive_kernel<<<grid(ne), kThreads, 0, stream>>>(
        wg(static_cast<const wm::chunked_view*>(w_ptr)), ne, words + 2);
  } else {
    using wg = wm::PtrGen<const float, const float>;
    gpu::count_nonpositive_kernel<<<grid(ne), kThreads, 0, stream>>>(
        wg(static_cast<const float*>(w_ptr)), ne, words + 2);
  }
  WM_CUDA_CHECK_LAUNCH(stream);
  unsigned long long values[3] = {0, 0, 0};
  WM_CUDA_TRY(cudaMemcpyAsync(values, words, sizeof values, cudaMemcpyDeviceToHost, stream));
  WM_CUDA_TRY(cudaStreamSynchronize(stream));
  max_degree = static_cast<std::int64_t>(values[0]);
  big_nodes = static_cast<std::int64_t>(values[1]);
  all_positive = values[2] == 0;
  return max_degree;
}

template <typename K>
std::vector<device_block> gpu_sampler::impl::run(const std::int64_t* seeds, std::size_t count,
                                                 const sample_options& options,
                                                 const std::uint64_t* seed_word,
                                                 cudaStream_t stream, bool capture, bool* bounded) {
  *bounded = !distributed;
  const csr_graph& g = *graph;
  const std::int64_t num_nodes = static_cast<std::int64_t>(g.num_nodes);
  const bool weighted = options.method == sample_method::weighted;
  const int num_hops = static_cast<int>(options.fanouts.size());
  const std::size_t words = 4 + 3 * static_cast<std::size_t>(num_hops);
  // One more host word than info words: check_seeds' scratch.
  long long* d_info = device_info(words + 1, stream);
  WM_CUDA_TRY(cudaMemsetAsync(d_info, 0, words * sizeof(long long), stream));
  long long* level = d_info + 1;
  long long* edge_words = d_info + 2 + num_hops;
  long long* big_words = d_info + 2 + 2 * num_hops;
  long long* fault = d_info + 2 + 3 * num_hops;
  const auto num_edges = static_cast<std::int64_t>(g.num_edges);
  const std::int64_t degree_bound =
      weighted && !distributed && g.has_weights() ? weight_stats(stream) : 0;

  // Hop 0 destinations: the unique seeds, in order of first occurrence.  An out-of-range
  // seed became node 0, so nothing reads outside the graph before the check.
  const std::int64_t n_seeds = static_cast<std::int64_t>(count);
  WM_EXPECTS(n_seeds < std::numeric_limits<std::int32_t>::max(),
             "sample: " << n_seeds << " seeds are more than a batch can hold");
  std::int64_t* uniq = seeds_unique.get<std::int64_t>(count, device, stream);
  {
    gpu::key_table<K> t = fresh_table<K>(n_seeds, stream);
    std::uint32_t* sl = slot.get<std::uint32_t>(count, device, stream);
    if (n_seeds > 0) {
      gpu::seed_insert_kernel<K><<<grid(n_seeds), kThreads, 0, stream>>>(
          seeds, n_seeds, num_nodes, t, sl, reinterpret_cast<unsigned long long*>(d_info));
      WM_CUDA_CHECK_LAUNCH(stream);
    }
    const gpu::new_node_flag<K> f{t, sl, gpu::device_count{nullptr, 0}, nullptr, n_seeds};
    relabel<K>(f, n_seeds, nullptr, uniq, level, nullptr, stream);
  }
  bool checked = false;
  if (distributed || num_hops == 0 || num_nodes == 0) {
    fetch_info(words, stream);
    check_seeds(seeds, stream);
    checked = true;
  }

  while (hops.size() < static_cast<std::size_t>(num_hops)) {
    hops.push_back(std::make_unique<hop_buffers>());
  }
  std::vector<device_block> blocks;
  const std::int64_t* dst = uniq;
  // The counts of a hop live on the device (level[h], and the edge total at offsets[bound]);
  // the host knows bounds of them and sizes buffers and grids by those.  Hops whose edge
  // bound is unknown (fanout -1) or too large, and every hop of distributed memory (its
  // gathers take host counts), fetch the exact counts instead.
  std::int64_t bound = n_seeds;
  for (int h = 0; h < num_hops; ++h) {
    const int fanout = options.fanouts[static_cast<std::size_t>(h)];
    hop_buffers& out = *hops[static_cast<std::size_t>(h)];
    if (distributed) {
      if (h > 0) fetch_info(words, stream);
      bound = host_info[1 + h];
    }
    const bool exact = distributed || fanout < 0 ||
                       bound + bound * static_cast<std::int64_t>(std::max(fanout, 0)) > kBoundCap;
    if (exact) *bounded = false;
    WM_EXPECTS(!(exact && capture), "sample: a hop with exact counts cannot be captured");
    const gpu::device_count n_dst{level + h, 0};
    const std::size_t nb = static_cast<std::size_t>(bound);
    std::int64_t* offsets = out.offsets.get<std::int64_t>(nb + 1, device, stream);
    std::int64_t* st = start.get<std::int64_t>(nb, device, stream);
    std::int64_t* dg = deg.get<std::int64_t>(nb, device, stream);
    std::int64_t* cnt = counts.get<std::int64_t>(nb + 1, device, stream);
    const bool race = weighted && fanout >= 0;
    std::int32_t* big = race ? big_list.get<std::int32_t>(nb, device, stream) : nullptr;
    auto* big_count = reinterpret_cast<unsigned long long*>(big_words + h);
    const float* wb = nullptr;
    const std::int64_t* wbs = nullptr;
    // Race hops of fanout 1..32 spread big nodes over blocks: a bound of their segments.
    const bool segmentable = race && fanout >= 1 && fanout <= kWarp;
    std::int64_t segments = 0;
    if (segmentable && degree_bound > gpu::kBigDegree) {
      segments =
          std::min(bound, big_nodes) + static_cast<std::int64_t>(g.num_edges) / gpu::kSegment + 1;
    }

    // 1. start, degree and count of every dst node.
    if (distributed) {
      std::int64_t* idx = row_idx.get<std::int64_t>(2 * nb, device, stream);
      std::int64_t* r2 = ro2.get<std::int64_t>(2 * nb, device, stream);
      if (bound > 0) {
        gpu::row_index_kernel<<<grid(bound), kThreads, 0, stream>>>(dst, bound, idx);
        WM_CUDA_CHECK_LAUNCH(stream);
      }
      wm::wm_tensor t{&g.row_offsets, wm::dtype::int64, g.num_nodes + 1, 1, 1, 0};
      wm::gather(t, wm::index_array{idx, wm::dtype::int64, 2 * nb},
                 wm::dense_matrix{r2, wm::dtype::int64, 2 * nb, 1, 1}, stream);
      gpu::dst_info_kernel<<<grid(bound + 1), kThreads, 0, stream>>>(
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
        WM_CUDA_TRY(
            cub::DeviceScan::ExclusiveSum(nullptr, bytes, degrees, base, bound + 1, stream));
        WM_CUDA_TRY(cub::DeviceScan::ExclusiveSum(cub(bytes, stream), bytes, degrees, base,
                                                  bound + 1, stream));
        WM_CUDA_TRY(cudaMemcpyAsync(host_info + words, base + bound, sizeof(long long),
                                    cudaMemcpyDeviceToHost, stream));
        WM_CUDA_TRY(cudaStreamSynchronize(stream));
        const std::size_t frontier = static_cast<std::size_t>(host_info[words]);
        std::int64_t* fidx = widx.get<std::int64_t>(frontier, device, stream);
        float* fw = wbuf.get<float>(frontier, device, stream);
        if (bound > 0) {
          gpu::frontier_edges_kernel<<<grid(bound, kWarp), kThreads, 0, stream>>>(st, dg, base,
                                                                                  bound, fidx);
          WM_CUDA_CHECK_LAUNCH(stream);
        }
        wm::wm_tensor wt{&g.edge_weights, wm::dtype::float32, g.num_edges, 1, 1, 0};
        wm::gather(wt, wm::index_array{fidx, wm::dtype::int64, frontier},
                   wm::dense_matrix{fw, wm::dtype::float32, frontier, 1, 1}, stream);
        wb = fw;
        wbs = base;
        count_weighted(n_dst, bound, static_cast<std::int64_t>(frontier),
                       gpu::gathered_weights{wb, wbs}, big, big_count, stream);
        const auto fe = static_cast<std::int64_t>(frontier);
        if (segmentable && fe > gpu::kBigDegree) {
          segments = std::min(bound, fe / (gpu::kBigDegree + 1)) + fe / gpu::kSegment + 1;
        }
      }
    } else {
      // Every weight positive: the positive-weight counts are the degrees, no counting pass.
      const bool counted_by_degree = race && all_positive;
      std::int32_t* info_big = counted_by_degree ? big : nullptr;
      if (chunked) {
        gpu::dst_info_kernel<<<grid(bound + 1), kThreads, 0, stream>>>(
            dst, n_dst, bound,
            gpu::ro_direct<ro_chunked>{ro_chunked(static_cast<const wm::chunked_view*>(ro_ptr))},
            options.method, fanout, st, dg, cnt, info_big, big_count, num_edges, fault);
      } else {
        gpu::dst_info_kernel<<<grid(bound + 1), kThreads, 0, stream>>>(
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

    // 2. offsets: the scan of the counts (weighted: positive weights, capped by the fanout).
    {
      const std::int64_t cap = race ? fanout : std::numeric_limits<std::int64_t>::max();
      auto capped = thrust::make_transform_iterator(thrust::counting_iterator<std::int64_t>(0),
                                                    gpu::capped_count{cnt, cap, bound + 1});
      std::size_t bytes = 0;
      WM_CUDA_TRY(
          cub::DeviceScan::ExclusiveSum(nullptr, bytes, capped, offsets, bound + 1, stream));
      WM_CUDA_TRY(cub::DeviceScan::ExclusiveSum(cub(bytes, stream), bytes, capped, offsets,
                                                bound + 1, stream));
    }
    std::int64_t edge_bound = bound * static_cast<std::int64_t>(std::max(fanout, 0));
    if (exact) {
      WM_CUDA_TRY(cudaMemcpyAsync(host_info + 1 + h, level + h, sizeof(long long),
                                  cudaMemcpyDeviceToHost, stream));
      WM_CUDA_TRY(cudaMemcpyAsync(host_info + words, offsets + bound, sizeof(long long),
                                  cudaMemcpyDeviceToHost, stream));
      WM_CUDA_TRY(
          cudaMemcpyAsync(host_info, d_info, sizeof(long long), cudaMemcpyDeviceToHost, stream));
      WM_CUDA_TRY(cudaStreamSynchronize(stream));
      const std::int64_t n_exact = host_info[1 + h];
      const std::int64_t e_exact = host_info[words];
      if (!checked) {
        check_seeds(seeds, stream);
        checked = true;
      }
      WM_EXPECTS(n_exact >= 0 && n_exact <= bound,
                 "sample: hop " << h << " has " << n_exact << " destinations, bound " << bound);
      WM_EXPECTS(e_exact >= 0 && n_exact + e_exact < std::numeric_limits<std::int32_t>::max(),
                 "sample: hop " << h << " has " << n_exact << " destinations and " << e_exact
                                << " edges, more than 32-bit local indices can address");
      bound = n_exact;
      edge_bound = e_exact;
    }
    const std::size_t ne = static_cast<std::size_t>(edge_bound);
    const std::int64_t* n_edges = offsets + static_cast<std::size_t>(nb);  // on the device

    // 3. the sampled positions as global edge ids.
    std::int64_t* eids = options.edge_ids ? out.edge_ids.get<std::int64_t>(ne, device, stream)
                                          : eid.get<std::int64_t>(ne, device, stream);
    std::int64_t* tm = tmp.get<std::int64_t>(ne, device, stream);
    if (race) {
      if (distributed) {
        fill(dst, n_dst, bound, offsets, options, seed_word, h, gpu::gathered_weights{wb, wbs}, big,
             big_count, segments, eids, tm, stream);
      } else if (chunked) {
        using wg = wm::PtrGen<const wm::chunked_view, const float>;
        fill(dst, n_dst, bound, offsets, options, seed_word, h,
             gpu::direct_weights<wg>{wg(static_cast<const wm::chunked_view*>(w_ptr))}, big,
             big_count, segments, eids, tm, stream);
      } else {
        using wg = wm::PtrGen<const float, const float>;
        fill(dst, n_dst, bound, offsets, options, seed_word, h,
             gpu::direct_weights<wg>{wg(static_cast<const float*>(w_ptr))}, big, big_count,
             segments, eids, tm, stream);
      }
    } else {
      // Weights are never read: any accessor type will do.
      fill(dst, n_dst, bound, offsets, options, seed_word, h,
           gpu::gathered_weights{nullptr, nullptr}, nullptr, nullptr, 0, eids, tm, stream);
    }

    // 4. relabel: entries are the dst nodes, then the neighbors in edge order.
    const std::int64_t entries = bound + edge_bound;
    const std::size_t nt = static_cast<std::size_t>(entries);
    std::int64_t* src_nodes = out.src_nodes.get<std::int64_t>(nt, device, stream);
    std::int32_t* src_index = out.src_index.get<std::int32_t>(ne, device, stream);
    const std::int64_t* gathered = nullptr;
    if (distributed) {
      std::int64_t* gc = gathered_cols.get<std::int64_t>(ne, device, stream);
      wm::wm_tensor t{&g.col_indices, g.col_type, g.num_edges, 1, 1, 0};
      wm::gather(t, wm::index_array{eids, wm::dtype::int64, ne},
                 wm::dense_matrix{gc, wm::dtype::int64, ne, 1, 1}, stream);
      gathered = gc;
    }
    gpu::key_table<K> t = fresh_table<K>(entries, stream);
    std::uint32_t* sl = slot.get<std::uint32_t>(nt, device, stream);
    const unsigned ig = grid(entries);
    if (distributed) {
      gpu::entry_insert_kernel<K><<<ig, kThreads, 0, stream>>>(
          dst, eids, gathered, ro_direct(static_cast<const std::int64_t*>(nullptr)), n_dst, n_edges,
          t, sl, num_nodes, fault);
    } else if (g.col_type == wm::dtype::int32) {
      if (chunked) {
        using cg = wm::PtrGen<const wm::chunked_view, const std::int32_t>;
        gpu::entry_insert_kernel<K><<<ig, kThreads, 0, stream>>>(
            dst, eids, gathered, cg(static_cast<const wm::chunked_view*>(col_ptr)), n_dst, n_edges,
            t, sl, num_nodes, fault);
      } else {
        using cg = wm::PtrGen<const std::int32_t, const std::int32_t>;
        gpu::entry_insert_kernel<K><<<ig, kThreads, 0, stream>>>(
            dst, eids, gathered, cg(static_cast<const std::int32_t*>(col_ptr)), n_dst, n_edges, t,
            sl, num_nodes, fault);
      }
    } else {
      if (chunked) {
        using cg = wm::PtrGen<const wm::chunked_view, const std::int64_t>;
        gpu::entry_insert_kernel<K><<<ig, kThreads, 0, stream>>>(
            dst, eids, gathered, cg(static_cast<const wm::chunked_view*>(col_ptr)), n_dst, n_edges,
            t, sl, num_nodes, fault);
      } else {
        using cg = wm::PtrGen<const std::int64_t, const std::int64_t>;
        gpu::entry_insert_kernel<K><<<ig, kThreads, 0, stream>>>(
            dst, eids, gathered, cg(static_cast<const std::int64_t*>(col_ptr)), n_dst, n_edges, t,
            sl, num_nodes, fault);
      }
    }
    WM_CUDA_CHECK_LAUNCH(stream);
    const gpu::new_node_flag<K> f{t, sl, n_dst, n_edges, 0};
    relabel<K>(f, entries, src_index, src_nodes, level + h + 1, edge_words + h, stream);

    device_block b;
    b.src_nodes = src_nodes;
    b.offsets = offsets;
    b.src_index = src_index;
    b.edge_ids = options.edge_ids ? eids : nullptr;
    blocks.push_back(b);
    dst = src_nodes;
    bound = std::min(entries, num_nodes);
  }
  // The one wait of the call: every count, and the seed check.
  if (capture) {
    WM_CUDA_TRY(cudaMemcpyAsync(host_info, d_info, sizeof(long long) * words,
                                cudaMemcpyDeviceToHost, stream));
    return blocks;
  }
  fetch_info(words, stream);
  if (!checked)
    finish(blocks, seeds, stream);
  else
    finish(blocks, nullptr, stream);
  return blocks;
}

void gpu_sampler::impl::finish(std::vector<device_block>& blocks, const std::int64_t* seeds,
                               cudaStream_t stream) {
  if (seeds != nullptr) check_seeds(seeds, stream);
  const std::size_t num_hops = blocks.size();
  check_graph(num_hops, stream);
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
  if (capture_stream == nullptr) {
    WM_CUDA_TRY(cudaStreamCreateWithFlags(&capture_stream, cudaStreamNonBlocking));
  }
  const std::uint64_t epoch = buffer_epoch.load();
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
  if (buffer_epoch.load() != epoch) {
    WM_CUDA_WARN(cudaGraphExecDestroy(c.exec));
    return;
  }
  c.epoch = epoch;
  if (graphs.size() >= kMaxGraphs) {
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
  s.max_blocks = std::max(1, s.num_sms * (per_sm / kThreads));
  void* staging = nullptr;
  WM_CUDA_TRY(cudaHostAlloc(&staging, sizeof(std::uint64_t), cudaHostAllocDefault));
  s.host_seed = static_cast<std::uint64_t*>(staging);
}

gpu_sampler::~gpu_sampler() = default;

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
    if (c.epoch != buffer_epoch.load()) break;  // buffers moved since: capture again
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
