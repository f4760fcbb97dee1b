/*
 * The GPU sampler's state and the steps of a call (gpu_sampler::impl), declared for the files
 * that define them.  Internal; plain C++.  The layout follows the gather's (src/cuda/ of
 * wholememory): kernels by role in sample_*_kernels.cuh, each expensive instantiation family
 * in its own small .cu:
 *   sampling_gpu.cpp     gpu_sampler::sample, the captured CUDA graphs, the checks and counts
 *                        of a call, device_block::to_host (host code only)
 *   sampling_counts.cu   step 1 (start, degree, count of every dst node) and 2 (offsets)
 *   sampling_fill.cu     step 3 (the sampled positions as edge ids)
 *   sampling_run.cuh     run() and step 4 (relabel), templates on the key width K, compiled
 *                        once per width in sampling_keys32.cu and sampling_keys64.cu
 *
 * A hop runs: dst_info (start, degree and count of positions of every dst node,
 * detail::max_sample_count), for weighted hops the count of positive weights (a warp per node;
 * nodes above big_degree edges get several blocks; skipped when every weight of the graph is
 * positive, the degrees being those counts), an exclusive scan into the block's offsets, fill
 * (a tile of 4, 8 or 16 lanes per node for small uniform fanouts, else a warp; weighted nodes
 * above big_degree edges raced in segments of segment_edges edges, a block each, then merged)
 * writing the global edge ids of the sampled positions, then the relabel:
 *   entries   = the dst nodes (positions 0..n_dst-1), then the neighbors in edge order;
 *   insert    = every entry's node id goes into an open-addressing table whose slot keeps the
 *               smallest position holding that id (atomicMin), so the first occurrence wins
 *               whatever the thread order; slot[x] remembers where entry x landed;
 *   scan      = exclusive sum of "x is the first occurrence of a neighbor not among the dst
 *               nodes" gives new nodes their rank in order of first position;
 *   assign    = local id of every entry (src_index) and src_nodes, from the table.
 * The counts of a hop (dst nodes, edges) live on the device; kernels read them there and run
 * grid-stride loops sized by host-side upper bounds, so hops need no host round trip.
 */
#pragma once

#include "sample_shared.hpp"

#include <graph/sampling.hpp>
#include <wholememory/cuda_check.hpp>
#include <wholememory/cuda_stream.hpp>
#include <wholememory/device_buffer.hpp>
#include <wholememory/error.hpp>
#include <wholememory/ptr_gen.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

namespace wholestore::graph {

namespace wm = ::wholememory;
using gpu::warp_size;

namespace gpu {

// The relabel table and its new-node flags (sample_relabel_kernels.cuh); the owner's reader
// of its rows (sample_common.cuh).
template <typename K>
struct key_table;
struct ro_owned;
template <typename K>
struct new_node_flag;

constexpr int block_threads = 256;

/// Bumped whenever a sampler buffer moves: CUDA graphs captured before hold stale pointers.
inline std::atomic<std::uint64_t> buffer_epoch{0};

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

}  // namespace gpu

using gpu::block_threads;
using gpu::scratch;

/// Row offsets read through a PtrGen: continuous (a plain pointer) or chunked memory.
using ro_direct = wm::PtrGen<const std::int64_t, const std::int64_t>;
using ro_chunked = wm::PtrGen<const wm::chunked_view, const std::int64_t>;

struct gpu_sampler::impl {
  const csr_graph* graph = nullptr;
  int device = 0;
  int max_blocks = 1;  // grid-stride kernels: resident blocks of block_threads on the device
  int num_sms = 1;
  bool distributed = false;
  bool chunked = false;
  const void* ro_ptr = nullptr;  // continuous: data(); chunked: device view
  const void* col_ptr = nullptr;
  const void* w_ptr = nullptr;
  bool wide_keys = false;  // 64-bit keys (num_nodes >= 2^32 - 1)
  // weight_stats, at the first weighted call (of the own rows for a served distributed graph):
  std::int64_t max_degree = -1;  // the largest degree,
  std::int64_t big_nodes = 0;    // the number of nodes above gpu::big_degree edges
  bool all_positive = false;     // and whether every weight is > 0 (no counting pass needed)

  /// Distributed graphs whose parts keep every node's edges with the node (csr_graph.hpp):
  /// the hops of fanout >= 0 are served by the owners of their dst nodes, one exchange of
  /// requests and one of replies per hop (sampling_owner.cu).  The layout is checked at the
  /// first call from what every rank holds, so every rank reaches the same verdict.
  struct owned_layout {
    bool checked = false;
    bool active = false;
    int ranks = 0;
    wm::device_buffer node_begin;  // first row_offsets entry of every part, ranks + 1
    // This rank's rows: entries [first, end) of row_offsets at ro_part; its edges
    // [edge_begin, edge_end), the whole of its column and weight parts.
    const std::int64_t* ro_part = nullptr;
    std::int64_t first = 0, end = 0, edge_begin = 0, edge_end = 0;
    const void* col_part = nullptr;
    const float* w_part = nullptr;
    long long* host_meta = nullptr;        // pinned: what every rank sends and receives, 8 * ranks
    std::vector<std::int64_t> host_begin;  // node_begin on the host
    /// The most bytes a padded hop may exchange per rank and direction (0: every hop counts
    /// first); the same on every rank (setup_owned checks it).
    std::int64_t pad_limit = 0;
    std::uint64_t padded_hops = 0;  // served hops sized by bounds so far
    scratch words, req_ids, req_pos, in_ids, serve_offsets, reply_out, reply_in, origin, req_seeds;
  };
  owned_layout owned;

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
  wholememory::cuda_stream capture_stream = nullptr;  // made at the first capture

  /// What the hops of one run share: its options, where the counts live on the device (the
  /// info words' layout is described at `info`) and whether the seeds were checked yet.
  struct call_state {
    const std::int64_t* seeds = nullptr;  // the sampler's copy
    std::size_t count = 0;
    const sample_options* options = nullptr;
    const std::uint64_t* seed_word = nullptr;
    bool capture = false;  // the stream is capturing a graph
    bool* bounded = nullptr;
    std::int64_t num_nodes = 0;
    std::int64_t num_edges = 0;
    bool weighted = false;
    int num_hops = 0;
    std::size_t words = 0;  // info words
    long long* d_info = nullptr;
    long long* level = nullptr;       // d_info + 1: dst counts of the hops, then the src count
    long long* edge_words = nullptr;  // edge counts of the hops
    long long* big_words = nullptr;   // big-node counts of the hops
    long long* fault = nullptr;       // the graph fault (two words)
    /// The largest degree of a weighted call (weight_stats; of the own rows for served hops),
    /// else 0.
    std::int64_t degree_bound = 0;
    bool checked = false;  // the seeds were checked (check_seeds)
    /// Served hops: every rank's bound of the dst nodes of the next hop, the same on every
    /// rank (from the exact counts of the last exchange of counts); empty when not known.
    std::vector<std::int64_t> peer_bound;
  };

  /// One hop in flight: its sizes, its per-node arrays and what its steps hand on.
  struct hop_state {
    int h = 0;
    int fanout = 0;
    hop_buffers* out = nullptr;
    const std::int64_t* dst = nullptr;  // the dst nodes: the unique seeds or the last src_nodes
    /// The number of dst nodes: a bound, made exact by take_exact_counts.
    std::int64_t bound = 0;
    /// The bound the per-node arrays and the offsets scan are sized by (bound before
    /// take_exact_counts); the edge total is at offsets[nb].
    std::size_t nb = 0;
    bool exact = false;  // the hop fetches its exact counts (take_exact_counts)
    /// Distributed, owned layout: the owners of the dst nodes sample them (serve_hop); the
    /// neighbors come back in `gathered`, in edge order.
    bool served = false;
    /// The owner's side of a served hop: dst are the requests this rank received, read from
    /// its own parts (owned_layout).
    bool owner_side = false;
    const std::int64_t* gathered = nullptr;
    /// The owner's side of a served hop: every request's random seed (its requester's); null
    /// elsewhere (the call's seed).
    const std::uint64_t* node_seeds = nullptr;
    bool race = false;  // weighted with a fanout: the race of detail::select_weighted
    /// Race hops of fanout 1..32 spread big nodes over blocks (segments).
    bool segmentable = false;
    gpu::device_count n_dst{nullptr, 0};
    std::int64_t* offsets = nullptr;
    std::int64_t* st = nullptr;   // start of every dst node's edges
    std::int64_t* dg = nullptr;   // degree of every dst node
    std::int64_t* cnt = nullptr;  // positions (weighted: positive weights) of every dst node
    std::int32_t* big = nullptr;  // race hops: the listed big nodes
    unsigned long long* big_count = nullptr;
    const std::int64_t* n_edges = nullptr;  // the edge total, on the device (offsets + nb)
    // Distributed race hops: the frontier's weights gathered, node i's at wb[wbs[i] + p].
    const float* wb = nullptr;
    const std::int64_t* wbs = nullptr;
    std::int64_t segments = 0;     // a bound of the segments of big nodes (0: none)
    std::int64_t edge_bound = 0;   // edges: a bound, exact for exact hops
    std::int64_t* eids = nullptr;  // the sampled edge ids (step 3)
    std::int64_t* tm = nullptr;    // their positions, for the fills that sort through memory
  };

  ~impl() {
    for (captured& c : graphs) WM_CUDA_WARN(cudaGraphExecDestroy(c.exec));
    capture_stream.reset();
    if (host_seed != nullptr) WM_CUDA_WARN(cudaFreeHost(host_seed));
    if (host_info != nullptr) WM_CUDA_WARN(cudaFreeHost(host_info));
    if (owned.host_meta != nullptr) WM_CUDA_WARN(cudaFreeHost(owned.host_meta));
  }

  unsigned grid(std::int64_t items, int per_item = 1) const {
    const std::int64_t blocks = (items * per_item + block_threads - 1) / block_threads;
    return static_cast<unsigned>(
        std::max<std::int64_t>(1, std::min<std::int64_t>(blocks, max_blocks)));
  }

  void* cub(std::size_t bytes, cudaStream_t stream) {
    return cub_temp.reserve(bytes, device, stream);
  }

  long long* device_info(std::size_t words, cudaStream_t stream) {
    if (words > host_words) {
      ++gpu::buffer_epoch;
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

  /// Throws when host_info[0] names a bad seed (on any rank, for distributed memory; `any`:
  /// whether any rank has one, when already known, else -1 and an allreduce finds out).
  void check_seeds(const std::int64_t* seeds, cudaStream_t stream, int any = -1);
  /// Distributed graphs: whether any rank reports `mine` true (an allreduce over the graph's
  /// communicator and one wait), so that no rank is left waiting in a collective.
  bool any_rank(bool mine, cudaStream_t stream);
  /// Throws when host_info's fault words name a corrupt row or column index (on every rank,
  /// for distributed memory).
  /// `any`: whether any rank met a fault, when already known (end_call's reduction), else -1
  /// and an allreduce finds out.
  void check_graph(std::size_t num_hops, cudaStream_t stream, long long any = -1);
  /// Scans the new-node flags of `entries_bound` entries and assigns local ids.
  template <typename K>
  void relabel(const gpu::new_node_flag<K>& f, std::int64_t entries_bound, std::int32_t* src_index,
               std::int64_t* src_nodes, long long* num_src, long long* edges_out,
               cudaStream_t stream);
  /// rk = the exclusive scan of flags[0, entries_bound] (relabel's new-node ranks; compiled
  /// once, in sampling_counts.cu).
  void scan_new_flags(const std::int32_t* flags, std::int32_t* rk, std::int64_t entries_bound,
                      cudaStream_t stream);
  /// The sample of `seeds` (count of them).  `capture`: the stream is capturing a graph, so
  /// the final copy of the counts is queued without a wait and the blocks keep no counts.
  /// *bounded tells whether every hop was sized by bounds (no wait before the end).
  /// Compiled once per key width: sampling_keys32.cu, sampling_keys64.cu.
  template <typename K>
  std::vector<device_block> run(const std::int64_t* seeds, std::size_t count,
                                const sample_options& options, const std::uint64_t* seed_word,
                                cudaStream_t stream, bool capture, bool* bounded);
  /// Counts of the blocks from host_info, after the final copy; throws for a bad seed.
  void finish(std::vector<device_block>& blocks, const std::int64_t* seeds, cudaStream_t stream,
              long long any_fault = -1);
  template <typename K>
  void capture_graph(const std::int64_t* seeds, std::size_t count, const sample_options& options,
                     const std::uint64_t* seed_word);
  template <typename W>
  void fill(const std::int64_t* dst, gpu::device_count n_dst, std::int64_t bound,
            const std::int64_t* offsets, const sample_options& options, gpu::seed_ref seed_word,
            int hop, W w, const std::int32_t* big, const unsigned long long* big_count,
            std::int64_t segment_bound, std::int64_t* eid_out, std::int64_t* tmp_out,
            cudaStream_t stream);
  template <typename W>
  void count_weighted(gpu::device_count n_dst, std::int64_t bound, std::int64_t degree_bound, W w,
                      std::int32_t* big, unsigned long long* big_count, cudaStream_t stream);
  /// The reader of this rank's own rows of a served distributed graph (sampling_counts.cu).
  gpu::ro_owned owned_rows() const;
  /// The graph's largest degree (returned), its nodes above gpu::big_degree edges and whether
  /// every weight is positive, found once (one pass over row offsets and weights, one wait).
  std::int64_t weight_stats(cudaStream_t stream);
  /// Distributed graphs, at the first call (collective): whether every rank asks for owners
  /// (owners_wanted) and the parts keep every node's edges with it, and this rank's rows if so
  /// (sampling_owner.cu).
  void setup_owned(cudaStream_t stream);
  /// WHOLESTORE_SAMPLE_BY_OWNER: 1 when unset or "1" (served hops, each request drawn with its
  /// requester's seed), 0 when "0" (hops through the gathers), -1 for any other value
  /// (setup_owned throws on every rank after its allgather).
  static int owners_wanted();
  /// WHOLESTORE_SAMPLE_PAD_KIB in bytes: the most a padded served hop exchanges per rank and
  /// direction (unset: default_pad_kib; 0: none), -1 for a value that is not a whole number
  /// from 0 to max_pad_kib.
  static std::int64_t pad_wanted();
  static constexpr std::int64_t default_pad_kib = 32768, max_pad_kib = 4194304;
  /// A served hop: the dst nodes bucketed by owner and sent to it, every owner samples its
  /// requests from its own parts (steps 1-3 with owner_side), the neighbors come back and land
  /// in edge order (hop.offsets, hop.gathered, hop.eids) (sampling_owner.cu).  The exchanges
  /// are sized by an exchange of counts (one wait), or, when every rank's bound is known
  /// (c.peer_bound) and the padded exchanges fit pad_limit, by the bounds (padded_hop).
  void serve_hop(call_state& c, hop_state& hop, cudaStream_t stream);
  /// A served hop sized by bounds: no wait.  Returns false (nothing done) when it does not
  /// apply; the verdict is the same on every rank.
  bool padded_hop(call_state& c, hop_state& hop, cudaStream_t stream);
  /// What a served hop's exchange of counts settles: the dst ids in bucket order and their
  /// positions in the hop, the requests sent to and received from every rank (elements), and
  /// their totals n (this rank's dst nodes) and m (the requests it serves).
  struct served_counts {
    std::int64_t* ids = nullptr;
    std::int64_t* positions = nullptr;
    std::vector<std::size_t> send, send_displs, recv, recv_displs;
    std::int64_t n = 0, m = 0;
    std::uint64_t* seeds = nullptr;  // every received request's random seed (its requester's)
  };
  /// Steps 1-2 of a served hop: buckets the dst nodes by owner and exchanges the counts and
  /// flags with every rank (the one wait); checks the seeds (first hop) and the hop's size on
  /// every rank at once.
  served_counts exchange_counts(call_state& c, const hop_state& hop, cudaStream_t stream);
  /// Step 4 of a served hop, on the owner: steps 1-3 of the hop on the m requests `in_ids`,
  /// read from the own parts, packed as records of `width` words (count, k columns, k edge
  /// ids when asked for); returns them.
  /// `m`: the count, or a device count of at most `bound` requests; `origin` (may be null):
  /// request j's record goes to slot origin[j] of the reply instead of slot j.
  /// `seeds`: every request's random seed, its requester's.
  const std::int64_t* serve_requests(const call_state& c, int h, int k, const std::int64_t* in_ids,
                                     const std::uint64_t* seeds, gpu::device_count m,
                                     std::int64_t bound, const std::int64_t* origin,
                                     std::int64_t width, cudaStream_t stream);

  // ---- the steps of run(), in order ----------------------------------------------------------

  /// The call's info words zeroed on the device, and the weight statistics of a weighted call
  /// (sampling_gpu.cpp).
  call_state begin_call(const std::int64_t* seeds, std::size_t count, const sample_options& options,
                        const std::uint64_t* seed_word, cudaStream_t stream, bool capture,
                        bool* bounded);
  /// Hop 0's dst nodes: the unique seeds, in order of first occurrence, with their count in
  /// level[0] (sampling_run.cuh).
  template <typename K>
  const std::int64_t* unique_seeds(const call_state& c, cudaStream_t stream);
  /// Sizes hop h for `bound` dst nodes (distributed hops that are not served: the exact count,
  /// fetched) and takes its arrays (sampling_gpu.cpp).
  hop_state begin_hop(call_state& c, int h, const std::int64_t* dst, std::int64_t bound,
                      cudaStream_t stream);
  /// Step 1: start, degree and count of every dst node; weighted hops count positive weights
  /// (sampling_counts.cu).
  void read_destinations(const call_state& c, hop_state& hop, cudaStream_t stream);
  /// Step 2: the offsets, the scan of the counts (sampling_counts.cu).
  void scan_offsets(const call_state& c, hop_state& hop, cudaStream_t stream);
  /// Exact hops: the dst and edge counts fetched from the device, one wait; checks the seeds
  /// if not done yet (sampling_gpu.cpp).
  void take_exact_counts(call_state& c, hop_state& hop, cudaStream_t stream);
  /// Step 3: the sampled positions as global edge ids (sampling_fill.cu).
  void sample_edges(const call_state& c, hop_state& hop, cudaStream_t stream);
  /// Step 4: the relabel, entries the dst nodes, then the neighbors in edge order; returns the
  /// hop's block (sampling_run.cuh).
  template <typename K>
  device_block relabel_hop(const call_state& c, hop_state& hop, cudaStream_t stream);
  /// Step 4's table insertion of every entry, reading the neighbors through the graph's
  /// column type and memory (sampling_run.cuh).
  template <typename K>
  void insert_entries(const call_state& c, const hop_state& hop, const std::int64_t* gathered,
                      gpu::key_table<K> t, std::uint32_t* sl, cudaStream_t stream);
  /// The one wait of a call: every count, and the seed check; a capture only queues the copy
  /// (sampling_gpu.cpp).
  void end_call(call_state& c, std::vector<device_block>& blocks, cudaStream_t stream);
};

// run() is compiled once per key width (sampling_keys32.cu, sampling_keys64.cu).
extern template std::vector<device_block> gpu_sampler::impl::run<unsigned int>(
    const std::int64_t*, std::size_t, const sample_options&, const std::uint64_t*, cudaStream_t,
    bool, bool*);
extern template std::vector<device_block> gpu_sampler::impl::run<unsigned long long>(
    const std::int64_t*, std::size_t, const sample_options&, const std::uint64_t*, cudaStream_t,
    bool, bool*);

}  // namespace wholestore::graph
