// Served hops of distributed graphs whose parts keep every node's edges with the node
// (sampling_impl.hpp, owned_layout): a rank sends each dst node to its owner, the owner samples
// it from its own parts with the kernels continuous memory uses (steps 1-3, owner_side), and
// the neighbors come back in fixed records.  Per hop: one exchange of counts (the hop's one
// wait), one of requests, one of replies.  The random draws depend on (seed, hop, node) only,
// so the sample is the one continuous memory gives, bit for bit.
#include "sample_common.cuh"
#include "sampling_impl.hpp"

#include <graph/csr_graph.hpp>
#include <graph/sampling.hpp>
#include <wholememory/bootstrap.hpp>
#include <wholememory/communicator.hpp>
#include <wholememory/cuda_check.hpp>
#include <wholememory/error.hpp>

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

namespace wholestore::graph {
namespace gpu {
namespace {

constexpr int bucket_threads = 256;

/// The owner of node v: the last part whose first row_offsets entry is <= v (an empty part
/// shares its start with the next one, which owns the node).
__device__ __forceinline__ int owner_of(const std::int64_t* node_begin, int ranks, std::int64_t v) {
  int lo = 0, hi = ranks - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (node_begin[mid] <= v) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

/// counts[r] += the dst nodes owned by rank r: tallies per block in shared memory, one add per
/// warp and owner.
__global__ void count_owners_kernel(const std::int64_t* dst, device_count n_dst,
                                    const std::int64_t* node_begin, int ranks,
                                    unsigned long long* counts) {
  extern __shared__ unsigned long long tally[];
  for (int r = threadIdx.x; r < ranks; r += blockDim.x) tally[r] = 0;
  __syncthreads();
  const std::int64_t n = n_dst.get();
  for (std::int64_t i = thread_id(); i < n; i += thread_count()) {
    const int o = owner_of(node_begin, ranks, dst[i]);
    const unsigned same = __match_any_sync(__activemask(), o);
    if ((threadIdx.x % warp_size) == __ffs(same) - 1) {
      atomicAdd(tally + o, static_cast<unsigned long long>(__popc(same)));
    }
  }
  __syncthreads();
  for (int r = threadIdx.x; r < ranks; r += blockDim.x) {
    if (tally[r] != 0) atomicAdd(counts + r, tally[r]);
  }
}

/// Flags of the exchange of counts: a bad seed, a hop too large for 32-bit local ids.
constexpr std::int64_t flag_bad_seed = 1;
constexpr std::int64_t flag_too_large = 2;

/// What this rank tells every rank r: meta[4r] = the requests it sends to r, meta[4r + 1] =
/// its flags (a bad seed: the call's first info word, null after the seed check; too large:
/// n dst nodes of up to k edges each reach 2^31 - 1 entries, or n is above the hop's bound),
/// meta[4r + 2] = n, its dst nodes (every rank's bound of the next hop follows from them),
/// meta[4r + 3] = its random seed (the owner draws this rank's requests with it); starts[r] =
/// the first slot of rank r's bucket.
__global__ void owner_meta_kernel(const unsigned long long* counts, int ranks, const long long* bad,
                                  device_count n_dst, int k, std::int64_t bound,
                                  const std::uint64_t* seed, std::int64_t* meta,
                                  unsigned long long* starts) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  const std::int64_t n = n_dst.get();
  std::int64_t flag = bad != nullptr && *bad != 0 ? flag_bad_seed : 0;
  if (n > bound || n + n * k >= 2147483647LL) flag |= flag_too_large;
  unsigned long long sum = 0;
  for (int r = 0; r < ranks; ++r) {
    starts[r] = sum;
    sum += counts[r];
    meta[4 * r] = static_cast<std::int64_t>(counts[r]);
    meta[4 * r + 1] = flag;
    meta[4 * r + 2] = n;
    meta[4 * r + 3] = static_cast<std::int64_t>(*seed);
  }
}

/// The owner's side of a counted hop: seeds[q] = the random seed of request q's rank (the
/// requests arrive rank by rank, meta[4r] of them from rank r, with its seed at meta[4r + 3]).
__global__ void request_seeds_kernel(const std::int64_t* meta, int ranks, std::int64_t requests,
                                     std::uint64_t* seeds) {
  for (std::int64_t q = thread_id(); q < requests; q += thread_count()) {
    std::int64_t first = 0;
    int r = 0;
    while (r + 1 < ranks && first + meta[4 * r] <= q) first += meta[4 * r++];
    seeds[q] = static_cast<std::uint64_t>(meta[4 * r + 3]);
  }
}

/// The layout of a padded hop's exchanges, the same on every rank (kernel parameter).  The
/// requests from rank r to owner o take 2 + S(r, o) words, the count, rank r's random seed,
/// then the ids, where S(r, o) = min(rank r's bound, the nodes of o's part); the replies
/// S(r, o) records.
constexpr int max_pad_ranks = 64;
struct pad_plan {
  int ranks = 0;
  /// This rank as requester: Σ S(me, o') over o' < o (o = 0..ranks); owner o's region of the
  /// requests starts at word mine[o] + 2 o, its replies at record mine[o].
  std::int64_t mine[max_pad_ranks + 1] = {};
  /// This rank as owner: Σ S(r', me) over r' < r; rank r's requests arrive at word
  /// theirs[r] + 2 r, its replies leave from record theirs[r].
  std::int64_t theirs[max_pad_ranks + 1] = {};
};

/// The region r of `at` (at[0] = 0 <= ... <= at[ranks]) that holds slot t.
__device__ __forceinline__ int region_of(const std::int64_t* at, int ranks, std::int64_t t) {
  int r = 0;
  while (r + 1 < ranks && at[r + 1] <= t) ++r;
  return r;
}

/// A padded hop's request headers (every owner's count and this rank's random seed) and where
/// each bucket starts.
__global__ void pad_starts_kernel(const unsigned long long* counts, const std::uint64_t* seed,
                                  pad_plan plan, std::int64_t* requests,
                                  unsigned long long* starts) {
  for (int o = static_cast<int>(thread_id()); o < plan.ranks;
       o += static_cast<int>(thread_count())) {
    const std::int64_t at = plan.mine[o] + 2 * o;
    requests[at] = static_cast<std::int64_t>(counts[o]);
    requests[at + 1] = static_cast<std::int64_t>(*seed);
    starts[o] = static_cast<unsigned long long>(at + 2);
  }
}

/// The owner's received padded requests, compacted: request q (rank by rank) is in_ids[q],
/// drawn with seeds[q] (its rank's), its reply goes to record origin[q]; *served = their
/// number.
__global__ void compact_requests_kernel(const std::int64_t* received, pad_plan plan,
                                        std::int64_t* in_ids, std::uint64_t* seeds,
                                        std::int64_t* origin, long long* served) {
  const int ranks = plan.ranks;
  const std::int64_t total = plan.theirs[ranks];
  if (thread_id() == 0) {
    long long sum = 0;
    for (int r = 0; r < ranks; ++r) sum += received[plan.theirs[r] + 2 * r];
    *served = sum;
  }
  for (std::int64_t t = thread_id(); t < total; t += thread_count()) {
    const int r = region_of(plan.theirs, ranks, t);
    const std::int64_t j = t - plan.theirs[r];
    const std::int64_t* region = received + plan.theirs[r] + 2 * r;
    if (j >= region[0]) continue;
    std::int64_t q = j;
    for (int x = 0; x < r; ++x) q += received[plan.theirs[x] + 2 * x];
    in_ids[q] = region[2 + j];
    seeds[q] = static_cast<std::uint64_t>(region[1]);
    origin[q] = t;
  }
}

/// The requester's side of a padded hop: counts[positions[b]] = the count of the reply to
/// request b (slot j of owner o's bucket, record mine[o] + j), and counts[i] = 0 from the
/// hop's dst count to its bound (the scan's tail).
__global__ void place_padded_counts_kernel(device_count n_dst, std::int64_t bound, pad_plan plan,
                                           const unsigned long long* per_owner,
                                           const std::int64_t* positions, const std::int64_t* reply,
                                           std::int64_t width, std::int64_t* counts) {
  const std::int64_t n = n_dst.get();
  const std::int64_t records = plan.mine[plan.ranks];
  for (std::int64_t u = thread_id(); u <= bound + records; u += thread_count()) {
    if (u <= bound) {
      if (u >= n) counts[u] = 0;
      continue;
    }
    const std::int64_t rec = u - bound - 1;
    const int o = region_of(plan.mine, plan.ranks, rec);
    const std::int64_t j = rec - plan.mine[o];
    if (j >= static_cast<std::int64_t>(per_owner[o])) continue;
    counts[positions[plan.mine[o] + 2 * o + 2 + j]] = reply[rec * width];
  }
}

/// The requester's side of a padded hop: record rec's columns (and edge ids) at the offsets of
/// its dst node, in edge order.
__global__ void place_padded_columns_kernel(int k, pad_plan plan,
                                            const unsigned long long* per_owner,
                                            const std::int64_t* positions,
                                            const std::int64_t* reply, std::int64_t width,
                                            const std::int64_t* offsets, std::int64_t* cols,
                                            std::int64_t* eids) {
  const std::int64_t records = plan.mine[plan.ranks];
  for (std::int64_t x = thread_id(); x < records * k; x += thread_count()) {
    const std::int64_t rec = x / k;
    const int p = static_cast<int>(x - rec * k);
    const int o = region_of(plan.mine, plan.ranks, rec);
    const std::int64_t j = rec - plan.mine[o];
    if (j >= static_cast<std::int64_t>(per_owner[o])) continue;
    const std::int64_t* r = reply + rec * width;
    if (p >= r[0]) continue;
    const std::int64_t at = offsets[positions[plan.mine[o] + 2 * o + 2 + j]] + p;
    cols[at] = r[1 + p];
    if (eids != nullptr) eids[at] = r[1 + k + p];
  }
}

/// Every dst node's id and position in its owner's bucket.  Within a bucket the order is the
/// atomics'; replies are placed by position, so it never shows in the sample.
__global__ void __launch_bounds__(bucket_threads)
    bucket_kernel(const std::int64_t* dst, device_count n_dst, const std::int64_t* node_begin,
                  int ranks, const unsigned long long* starts, unsigned long long* cursor,
                  std::int64_t* ids, std::int64_t* positions) {
  extern __shared__ unsigned long long shared_words[];
  unsigned long long* tally = shared_words;
  unsigned long long* base = shared_words + ranks;
  for (int r = threadIdx.x; r < ranks; r += blockDim.x) tally[r] = 0;
  __syncthreads();
  const std::int64_t n = n_dst.get();
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const bool active = i < n;
  int o = 0;
  std::int64_t v = 0;
  unsigned long long mine = 0;
  if (active) {
    v = dst[i];
    o = owner_of(node_begin, ranks, v);
    const unsigned same = __match_any_sync(__activemask(), o);
    const int lane = static_cast<int>(threadIdx.x % warp_size);
    const int leader = __ffs(same) - 1;
    unsigned long long at = 0;
    if (lane == leader) at = atomicAdd(tally + o, static_cast<unsigned long long>(__popc(same)));
    at = __shfl_sync(same, at, leader);
    mine = at + static_cast<unsigned long long>(__popc(same & ((1u << lane) - 1u)));
  }
  __syncthreads();
  for (int r = threadIdx.x; r < ranks; r += blockDim.x) {
    base[r] = tally[r] != 0 ? atomicAdd(cursor + r, tally[r]) : 0;
  }
  __syncthreads();
  if (active) {
    const unsigned long long slot = starts[o] + base[o] + mine;
    ids[slot] = v;
    positions[slot] = i;
  }
}

/// The owner's replies, one record of `width` words per request j (at record origin[j] when
/// given, else j; `bound` >= the device count of requests): the count c, then the first c of
/// k columns (node ids), then (with edge ids) the first c of k edge ids.  A column outside
/// the graph is recorded as a corrupt column and sent as node 0.
template <typename T>
__global__ void pack_replies_kernel(device_count requests, std::int64_t bound,
                                    const std::int64_t* origin, const std::int64_t* offsets,
                                    const std::int64_t* eids, owned_part<T> col, int k,
                                    bool with_eids, std::int64_t num_nodes, long long* fault,
                                    std::int64_t* reply) {
  const std::int64_t width = 1 + k + (with_eids ? k : 0);
  const std::int64_t per = k + 1;
  const std::int64_t m = requests.get();
  for (std::int64_t x = thread_id(); x < bound * per; x += thread_count()) {
    const std::int64_t j = x / per;
    if (j >= m) continue;
    const int t = static_cast<int>(x - j * per);
    const std::int64_t o = offsets[j], c = offsets[j + 1] - o;
    std::int64_t* r = reply + (origin != nullptr ? origin[j] : j) * width;
    if (t == 0) {
      r[0] = c;
      continue;
    }
    const int p = t - 1;
    if (p >= c) continue;
    const std::int64_t e = eids[o + p];
    std::int64_t id = static_cast<std::int64_t>(*col.At(e));
    if (id < 0 || id >= num_nodes) {
      record_fault(fault, fault_column, e);
      id = 0;
    }
    r[1 + p] = id;
    if (with_eids) r[1 + k + p] = e;
  }
}

/// counts[positions[b]] = record b's count; counts[n] = 0 (the scan's last item).
__global__ void place_counts_kernel(std::int64_t n, const std::int64_t* positions,
                                    const std::int64_t* reply, std::int64_t width,
                                    std::int64_t* counts) {
  for (std::int64_t b = thread_id(); b <= n; b += thread_count()) {
    if (b == n) {
      counts[n] = 0;
    } else {
      counts[positions[b]] = reply[b * width];
    }
  }
}

/// Record b's columns (and edge ids) at the offsets of its dst node, in edge order.
__global__ void place_columns_kernel(std::int64_t n, int k, const std::int64_t* positions,
                                     const std::int64_t* reply, std::int64_t width,
                                     const std::int64_t* offsets, std::int64_t* cols,
                                     std::int64_t* eids) {
  for (std::int64_t x = thread_id(); x < n * k; x += thread_count()) {
    const std::int64_t b = x / k;
    const int p = static_cast<int>(x - b * k);
    const std::int64_t* r = reply + b * width;
    if (p >= r[0]) continue;
    const std::int64_t o = offsets[positions[b]] + p;
    cols[o] = r[1 + p];
    if (eids != nullptr) eids[o] = r[1 + k + p];
  }
}

}  // namespace
}  // namespace gpu

int gpu_sampler::impl::owners_wanted() {
  const char* text = std::getenv("WHOLESTORE_SAMPLE_BY_OWNER");
  if (text == nullptr || std::string(text) == "1") return 1;
  return std::string(text) == "0" ? 0 : -1;
}

std::int64_t gpu_sampler::impl::pad_wanted() {
  const char* text = std::getenv("WHOLESTORE_SAMPLE_PAD_KIB");
  if (text == nullptr) return default_pad_kib << 10;
  const std::string value(text);
  if (value.empty() || value.size() > 7 ||
      !std::all_of(value.begin(), value.end(), [](char ch) { return ch >= '0' && ch <= '9'; })) {
    return -1;
  }
  const std::int64_t kib = std::stoll(value);
  return kib <= max_pad_kib ? kib << 10 : -1;
}

void gpu_sampler::impl::setup_owned(cudaStream_t stream) {
  const csr_graph& g = *graph;
  wm::communicator& comm = g.row_offsets.comm();
  const int ranks = comm.size();
  const auto R = static_cast<std::size_t>(ranks);
  // Every rank's settings, so that all take the same path or all throw here.
  const std::int64_t wanted[2] = {owners_wanted(), pad_wanted()};
  std::vector<std::int64_t> settings(2 * R);
  comm.get_bootstrap().allgather(wanted, settings.data(), sizeof(wanted));
  for (std::size_t r = 0; r < R; ++r) {
    if (settings[2 * r] == -1) {
      const char* text = wanted[0] < 0 ? std::getenv("WHOLESTORE_SAMPLE_BY_OWNER") : nullptr;
      WM_FAIL(wm::logic_error,
              "WHOLESTORE_SAMPLE_BY_OWNER must be 0 or 1; rank "
                  << r << " has another value"
                  << (text != nullptr ? std::string(" (here: '") + text + "')" : ""));
    }
  }
  for (std::size_t r = 0; r < R; ++r) {
    if (settings[2 * r + 1] < 0 || settings[2 * r + 1] != settings[1]) {
      const char* text = std::getenv("WHOLESTORE_SAMPLE_PAD_KIB");
      WM_FAIL(wm::logic_error,
              "WHOLESTORE_SAMPLE_PAD_KIB must be a whole number from 0 to "
                  << max_pad_kib << " and the same on every rank; rank " << r
                  << (settings[2 * r + 1] < 0 ? " has an invalid value" : " differs from rank 0")
                  << (text != nullptr ? std::string(" (here: '") + text + "')" : ""));
    }
  }
  owned.checked = true;
  owned.pad_limit = settings[1];
  bool every_rank_wants = true;
  for (std::size_t r = 0; r < R; ++r) every_rank_wants &= settings[2 * r] == 1;
  // Collective, the same answer on every rank (csr_graph.hpp).
  if (!every_rank_wants || !edges_follow_nodes(g)) return;

  // This rank's parts: its row offsets' entries [first, end), and its edges, which are exactly
  // its nodes' (so the entry at `end`, the next part's first, is where its edges end).
  const wm::part_info rows = g.row_offsets.local_part();
  const wm::part_info col = g.col_indices.local_part();
  const std::size_t col_elem = wm::dtype_size(g.col_type);
  owned.ranks = ranks;
  owned.ro_part = static_cast<const std::int64_t*>(rows.ptr);
  owned.first = static_cast<std::int64_t>(rows.offset / sizeof(std::int64_t));
  owned.end = static_cast<std::int64_t>((rows.offset + rows.bytes) / sizeof(std::int64_t));
  owned.col_part = col.ptr;
  owned.edge_begin = static_cast<std::int64_t>(col.offset / col_elem);
  owned.edge_end = static_cast<std::int64_t>((col.offset + col.bytes) / col_elem);
  if (g.has_weights()) owned.w_part = static_cast<const float*>(g.edge_weights.local_part().ptr);
  if (owned.host_meta == nullptr) {
    void* host = nullptr;
    WM_CUDA_TRY(cudaHostAlloc(&host, sizeof(long long) * 8 * static_cast<std::size_t>(ranks),
                              cudaHostAllocDefault));
    owned.host_meta = static_cast<long long*>(host);
  }
  // The first row offsets entry of every part, for the kernels that find a node's owner.
  std::vector<std::int64_t> begin(static_cast<std::size_t>(ranks) + 1);
  for (int r = 0; r < ranks; ++r) {
    begin[r] = static_cast<std::int64_t>(g.row_offsets.part(r).offset / sizeof(std::int64_t));
  }
  begin[ranks] = static_cast<std::int64_t>(g.num_nodes) + 1;
  owned.host_begin = begin;
  owned.node_begin = wm::device_buffer(begin.size() * sizeof(std::int64_t), device);
  WM_CUDA_TRY(cudaMemcpyAsync(owned.node_begin.data(), begin.data(),
                              begin.size() * sizeof(std::int64_t), cudaMemcpyHostToDevice, stream));
  WM_CUDA_TRY(cudaStreamSynchronize(stream));
  owned.active = true;
}

gpu_sampler::impl::served_counts gpu_sampler::impl::exchange_counts(call_state& c,
                                                                    const hop_state& hop,
                                                                    cudaStream_t stream) {
  wm::communicator& comm = graph->row_offsets.comm();
  const int ranks = owned.ranks;
  const auto R = static_cast<std::size_t>(ranks);
  const int k = hop.fanout;
  const std::int64_t bound = hop.bound;
  const auto* node_begin = static_cast<const std::int64_t*>(owned.node_begin.data());
  // Words: counts | starts | cursor | meta sent | meta received (R, R, R, 4R, 4R).
  auto* words = owned.words.get<unsigned long long>(11 * R, device, stream);
  unsigned long long* per_owner = words;
  unsigned long long* starts = words + R;
  unsigned long long* cursor = words + 2 * R;
  auto* meta_send = reinterpret_cast<std::int64_t*>(words + 3 * R);
  std::int64_t* meta_recv = meta_send + 4 * R;
  WM_CUDA_TRY(cudaMemsetAsync(words, 0, 3 * R * sizeof(unsigned long long), stream));
  served_counts x;
  const std::size_t nb = static_cast<std::size_t>(bound);
  x.ids = owned.req_ids.get<std::int64_t>(nb, device, stream);
  x.positions = owned.req_pos.get<std::int64_t>(nb, device, stream);
  if (bound > 0) {
    gpu::
        count_owners_kernel<<<grid(bound), block_threads, R * sizeof(unsigned long long), stream>>>(
            hop.dst, hop.n_dst, node_begin, ranks, per_owner);
    WM_CUDA_CHECK_LAUNCH(stream);
  }
  gpu::owner_meta_kernel<<<1, 1, 0, stream>>>(per_owner, ranks, c.checked ? nullptr : c.d_info,
                                              hop.n_dst, k, bound, c.seed_word, meta_send, starts);
  WM_CUDA_CHECK_LAUNCH(stream);
  if (bound > 0) {
    const auto blocks =
        static_cast<unsigned>((bound + gpu::bucket_threads - 1) / gpu::bucket_threads);
    gpu::bucket_kernel<<<blocks, gpu::bucket_threads, 2 * R * sizeof(unsigned long long), stream>>>(
        hop.dst, hop.n_dst, node_begin, ranks, starts, cursor, x.ids, x.positions);
    WM_CUDA_CHECK_LAUNCH(stream);
  }

  // The counts, both ways: the hop's one wait.
  std::vector<std::size_t> four(R, 4), four_displs(R);
  for (std::size_t r = 0; r < R; ++r) four_displs[r] = 4 * r;
  comm.alltoallv(meta_send, four.data(), four_displs.data(), meta_recv, four.data(),
                 four_displs.data(), wm::dtype::int64, stream);
  WM_CUDA_TRY(cudaMemcpyAsync(owned.host_meta, meta_send, 8 * R * sizeof(long long),
                              cudaMemcpyDeviceToHost, stream));
  if (!c.checked) {
    WM_CUDA_TRY(
        cudaMemcpyAsync(host_info, c.d_info, sizeof(long long), cudaMemcpyDeviceToHost, stream));
  }
  comm.synchronize(stream);
  WM_CUDA_TRY(cudaStreamSynchronize(stream));
  x.send.assign(R, 0);
  x.send_displs.assign(R, 0);
  x.recv.assign(R, 0);
  x.recv_displs.assign(R, 0);
  bool any_bad = false;
  int too_large = -1;
  c.peer_bound.assign(R, 0);
  for (std::size_t r = 0; r < R; ++r) {
    x.send[r] = static_cast<std::size_t>(owned.host_meta[4 * r]);
    x.recv[r] = static_cast<std::size_t>(owned.host_meta[4 * R + 4 * r]);
    const std::int64_t flags = owned.host_meta[4 * R + 4 * r + 1];
    c.peer_bound[r] = owned.host_meta[4 * R + 4 * r + 2];  // rank r's dst nodes, exact
    any_bad |= (flags & gpu::flag_bad_seed) != 0;
    if ((flags & gpu::flag_too_large) != 0 && too_large < 0) too_large = static_cast<int>(r);
  }
  // Every rank learned every rank's flags in the same exchange: all throw here, or none.
  if (!c.checked) {
    check_seeds(c.seeds, stream, any_bad ? 1 : 0);
    c.checked = true;
  }
  WM_EXPECTS(too_large < 0, "sample: hop " << hop.h << " on rank " << too_large
                                           << " has more destinations and edges (fanout " << k
                                           << ") than 32-bit local indices can address");
  for (std::size_t r = 1; r < R; ++r) {
    x.send_displs[r] = x.send_displs[r - 1] + x.send[r - 1];
    x.recv_displs[r] = x.recv_displs[r - 1] + x.recv[r - 1];
  }
  x.n = static_cast<std::int64_t>(x.send_displs[R - 1] + x.send[R - 1]);
  x.m = static_cast<std::int64_t>(x.recv_displs[R - 1] + x.recv[R - 1]);
  // Every request's random seed, its requester's, from the received meta.
  x.seeds = owned.req_seeds.get<std::uint64_t>(static_cast<std::size_t>(x.m), device, stream);
  if (x.m > 0) {
    gpu::request_seeds_kernel<<<grid(x.m), block_threads, 0, stream>>>(meta_recv, ranks, x.m,
                                                                       x.seeds);
    WM_CUDA_CHECK_LAUNCH(stream);
  }
  return x;
}

const std::int64_t* gpu_sampler::impl::serve_requests(const call_state& c, int h, int k,
                                                      const std::int64_t* in_ids,
                                                      const std::uint64_t* seeds,
                                                      gpu::device_count m, std::int64_t bound,
                                                      const std::int64_t* origin,
                                                      std::int64_t width, cudaStream_t stream) {
  const csr_graph& g = *graph;
  const bool with_eids = c.options->edge_ids;
  hop_state sv;
  sv.h = h;
  sv.fanout = k;
  sv.owner_side = true;
  sv.dst = in_ids;
  sv.node_seeds = seeds;
  sv.n_dst = m;
  sv.bound = bound;
  sv.nb = static_cast<std::size_t>(bound);
  sv.offsets = owned.serve_offsets.get<std::int64_t>(sv.nb + 1, device, stream);
  sv.st = start.get<std::int64_t>(sv.nb, device, stream);
  sv.dg = deg.get<std::int64_t>(sv.nb, device, stream);
  sv.cnt = counts.get<std::int64_t>(sv.nb + 1, device, stream);
  sv.race = c.weighted;
  sv.big = sv.race ? big_list.get<std::int32_t>(sv.nb, device, stream) : nullptr;
  sv.big_count = reinterpret_cast<unsigned long long*>(c.big_words + h);
  sv.segmentable = sv.race && k >= 1 && k <= warp_size;
  if (sv.segmentable && c.degree_bound > gpu::big_degree) {
    // Every rank may ask for the same big node: at most `ranks` requests of each, holding at
    // most `ranks` times the own edges, and at most m times the largest degree.
    const std::int64_t own_edges = owned.edge_end - owned.edge_begin;
    const std::int64_t asked_edges = std::min(owned.ranks * own_edges, bound * c.degree_bound);
    sv.segments = std::min(bound, owned.ranks * big_nodes) + asked_edges / gpu::segment_edges + 1;
  }
  sv.n_edges = sv.offsets + bound;
  sv.edge_bound = bound * k;
  read_destinations(c, sv, stream);
  scan_offsets(c, sv, stream);
  sample_edges(c, sv, stream);
  std::int64_t* reply =
      owned.reply_out.get<std::int64_t>(static_cast<std::size_t>(bound * width), device, stream);
  if (bound > 0) {
    const unsigned blocks = grid(bound * (k + 1));
    const auto num_nodes = static_cast<std::int64_t>(g.num_nodes);
    if (g.col_type == wm::dtype::int32) {
      const gpu::owned_part<std::int32_t> col{static_cast<const std::int32_t*>(owned.col_part),
                                              owned.edge_begin};
      gpu::pack_replies_kernel<<<blocks, block_threads, 0, stream>>>(
          m, bound, origin, sv.offsets, sv.eids, col, k, with_eids, num_nodes, c.fault, reply);
    } else {
      const gpu::owned_part<std::int64_t> col{static_cast<const std::int64_t*>(owned.col_part),
                                              owned.edge_begin};
      gpu::pack_replies_kernel<<<blocks, block_threads, 0, stream>>>(
          m, bound, origin, sv.offsets, sv.eids, col, k, with_eids, num_nodes, c.fault, reply);
    }
    WM_CUDA_CHECK_LAUNCH(stream);
  }
  return reply;
}

bool gpu_sampler::impl::padded_hop(call_state& c, hop_state& hop, cudaStream_t stream) {
  const int ranks = owned.ranks;
  if (c.peer_bound.size() != static_cast<std::size_t>(ranks) || owned.pad_limit <= 0 ||
      ranks > gpu::max_pad_ranks) {
    return false;
  }
  const auto R = static_cast<std::size_t>(ranks);
  const int k = hop.fanout;
  const bool with_eids = c.options->edge_ids;
  const std::int64_t width = 1 + k + (with_eids ? k : 0);
  const int me = graph->row_offsets.comm().rank();
  // S(r, o): what rank r may ask of owner o.  Every rank computes every S from the same
  // numbers, so all reach the same verdict below.
  auto S = [&](std::size_t r, std::size_t o) {
    return std::min(c.peer_bound[r], owned.host_begin[o + 1] - owned.host_begin[o]);
  };
  constexpr std::int64_t index_limit = 2147483647LL;
  for (std::size_t r = 0; r < R; ++r) {
    std::int64_t asked = 0, served = 0;
    for (std::size_t o = 0; o < R; ++o) {
      asked += S(r, o);
      served += S(o, r);
    }
    // The replies are the larger exchange; both ways bounded by pad_limit, and the owner's
    // and requester's arrays within 32-bit local ids.
    if (std::max(asked, served) * width * 8 > owned.pad_limit) return false;
    if (served + served * k >= index_limit) return false;
    if (c.peer_bound[r] + c.peer_bound[r] * k >= index_limit) return false;
  }
  WM_EXPECTS(c.peer_bound[static_cast<std::size_t>(me)] == hop.bound,
             "sample: hop " << hop.h << ": rank " << me << "'s bound " << hop.bound
                            << " differs from the one the other ranks know");
  gpu::pad_plan plan;
  plan.ranks = ranks;
  for (std::size_t x = 0; x < R; ++x) {
    plan.mine[x + 1] = plan.mine[x] + S(static_cast<std::size_t>(me), x);
    plan.theirs[x + 1] = plan.theirs[x] + S(x, static_cast<std::size_t>(me));
  }
  const std::int64_t asked = plan.mine[R], served = plan.theirs[R];
  wm::communicator& comm = graph->row_offsets.comm();
  const auto* node_begin = static_cast<const std::int64_t*>(owned.node_begin.data());

  // 1. The dst nodes bucketed by owner into padded regions, each led by its count.
  auto* words = owned.words.get<unsigned long long>(9 * R, device, stream);
  unsigned long long* per_owner = words;
  unsigned long long* starts = words + R;
  unsigned long long* cursor = words + 2 * R;
  WM_CUDA_TRY(cudaMemsetAsync(words, 0, 3 * R * sizeof(unsigned long long), stream));
  const auto send_words = static_cast<std::size_t>(asked) + 2 * R;
  auto* ids = owned.req_ids.get<std::int64_t>(send_words, device, stream);
  auto* positions = owned.req_pos.get<std::int64_t>(send_words, device, stream);
  const std::int64_t bound = hop.bound;
  if (bound > 0) {
    gpu::
        count_owners_kernel<<<grid(bound), block_threads, R * sizeof(unsigned long long), stream>>>(
            hop.dst, hop.n_dst, node_begin, ranks, per_owner);
    WM_CUDA_CHECK_LAUNCH(stream);
  }
  gpu::pad_starts_kernel<<<1, 64, 0, stream>>>(per_owner, c.seed_word, plan, ids, starts);
  WM_CUDA_CHECK_LAUNCH(stream);
  if (bound > 0) {
    const auto blocks =
        static_cast<unsigned>((bound + gpu::bucket_threads - 1) / gpu::bucket_threads);
    gpu::bucket_kernel<<<blocks, gpu::bucket_threads, 2 * R * sizeof(unsigned long long), stream>>>(
        hop.dst, hop.n_dst, node_begin, ranks, starts, cursor, ids, positions);
    WM_CUDA_CHECK_LAUNCH(stream);
  }

  // 2. The requests to their owners, every region whole.
  std::vector<std::size_t> send(R), send_displs(R), recv(R), recv_displs(R);
  for (std::size_t x = 0; x < R; ++x) {
    send[x] = static_cast<std::size_t>(plan.mine[x + 1] - plan.mine[x]) + 2;
    send_displs[x] = static_cast<std::size_t>(plan.mine[x]) + 2 * x;
    recv[x] = static_cast<std::size_t>(plan.theirs[x + 1] - plan.theirs[x]) + 2;
    recv_displs[x] = static_cast<std::size_t>(plan.theirs[x]) + 2 * x;
  }
  const auto recv_words = static_cast<std::size_t>(served) + 2 * R;
  auto* received = owned.in_ids.get<std::int64_t>(2 * recv_words, device, stream);
  std::int64_t* in_ids = received + recv_words;
  comm.alltoallv(ids, send.data(), send_displs.data(), received, recv.data(), recv_displs.data(),
                 wm::dtype::int64, stream);

  // 3. The owner compacts what it was asked, samples it and packs the replies at their
  // records.
  long long* served_count = reinterpret_cast<long long*>(words + 3 * R);
  auto* origin = owned.origin.get<std::int64_t>(static_cast<std::size_t>(served), device, stream);
  auto* seeds =
      owned.req_seeds.get<std::uint64_t>(static_cast<std::size_t>(served), device, stream);
  gpu::compact_requests_kernel<<<grid(served), block_threads, 0, stream>>>(
      received, plan, in_ids, seeds, origin, served_count);
  WM_CUDA_CHECK_LAUNCH(stream);
  const std::int64_t* reply =
      serve_requests(c, hop.h, k, in_ids, seeds, gpu::device_count{served_count, 0}, served, origin,
                     width, stream);

  // 4. The replies back, every region whole.
  std::vector<std::size_t> rsend(R), rsend_displs(R), rrecv(R), rrecv_displs(R);
  for (std::size_t x = 0; x < R; ++x) {
    const auto w = static_cast<std::size_t>(width);
    rsend[x] = static_cast<std::size_t>(plan.theirs[x + 1] - plan.theirs[x]) * w;
    rsend_displs[x] = static_cast<std::size_t>(plan.theirs[x]) * w;
    rrecv[x] = static_cast<std::size_t>(plan.mine[x + 1] - plan.mine[x]) * w;
    rrecv_displs[x] = static_cast<std::size_t>(plan.mine[x]) * w;
  }
  std::int64_t* back =
      owned.reply_in.get<std::int64_t>(static_cast<std::size_t>(asked * width), device, stream);
  comm.alltoallv(reply, rsend.data(), rsend_displs.data(), back, rrecv.data(), rrecv_displs.data(),
                 wm::dtype::int64, stream);

  // 5. The requester's hop, sized by its bound: counts at their positions (zeros past the dst
  // count), the offsets scan, the columns in edge order.
  hop.exact = false;
  hop.n_edges = hop.offsets + hop.nb;
  hop.edge_bound = bound * k;
  // The owner's steps used (and may have moved) the shared per-node scratch.
  hop.cnt = counts.get<std::int64_t>(hop.nb + 1, device, stream);
  gpu::place_padded_counts_kernel<<<grid(bound + 1 + asked), block_threads, 0, stream>>>(
      hop.n_dst, bound, plan, per_owner, positions, back, width, hop.cnt);
  WM_CUDA_CHECK_LAUNCH(stream);
  scan_offsets(c, hop, stream);
  const auto ne = static_cast<std::size_t>(hop.edge_bound);
  std::int64_t* cols = gathered_cols.get<std::int64_t>(ne, device, stream);
  std::int64_t* eids =
      with_eids ? hop.out->edge_ids.get<std::int64_t>(ne, device, stream) : nullptr;
  if (asked > 0 && k > 0) {
    gpu::place_padded_columns_kernel<<<grid(asked * k), block_threads, 0, stream>>>(
        k, plan, per_owner, positions, back, width, hop.offsets, cols, eids);
    WM_CUDA_CHECK_LAUNCH(stream);
  }
  hop.gathered = cols;
  hop.eids = eids;
  return true;
}

void gpu_sampler::impl::serve_hop(call_state& c, hop_state& hop, cudaStream_t stream) {
  const int k = hop.fanout;
  // Every rank's bound of the next hop, as run() computes its own.
  auto advance = [&c, k, this]() {
    for (std::int64_t& b : c.peer_bound) b = std::min(b + b * k, c.num_nodes);
  };
  if (padded_hop(c, hop, stream)) {
    ++owned.padded_hops;
    advance();
    return;
  }
  wm::communicator& comm = graph->row_offsets.comm();
  const bool with_eids = c.options->edge_ids;
  const std::int64_t width = 1 + k + (with_eids ? k : 0);

  // 1-2. The dst nodes bucketed by owner, the counts both ways.
  const served_counts x = exchange_counts(c, hop, stream);
  advance();
  const std::int64_t n = x.n, m = x.m;

  // 3. The requests to their owners.
  std::int64_t* in_ids =
      owned.in_ids.get<std::int64_t>(static_cast<std::size_t>(m), device, stream);
  comm.alltoallv(x.ids, x.send.data(), x.send_displs.data(), in_ids, x.recv.data(),
                 x.recv_displs.data(), wm::dtype::int64, stream);

  // 4. The owner samples what it was asked, steps 1-3 on its own parts, into reply records.
  const std::int64_t* reply = serve_requests(
      c, hop.h, k, in_ids, x.seeds, gpu::device_count{nullptr, m}, m, nullptr, width, stream);

  // 5. The replies back, in the order the requests left.
  auto times = [width](const std::vector<std::size_t>& v) {
    std::vector<std::size_t> out(v.size());
    for (std::size_t r = 0; r < v.size(); ++r) out[r] = v[r] * static_cast<std::size_t>(width);
    return out;
  };
  std::int64_t* back =
      owned.reply_in.get<std::int64_t>(static_cast<std::size_t>(n * width), device, stream);
  comm.alltoallv(reply, times(x.recv).data(), times(x.recv_displs).data(), back,
                 times(x.send).data(), times(x.send_displs).data(), wm::dtype::int64, stream);

  // 6. The requester's hop: counts at their positions, the offsets scan, the columns in edge
  // order.
  hop.bound = n;
  hop.nb = static_cast<std::size_t>(n);
  hop.exact = false;
  hop.cnt = counts.get<std::int64_t>(hop.nb + 1, device, stream);
  hop.n_edges = hop.offsets + n;
  hop.edge_bound = n * k;
  gpu::place_counts_kernel<<<grid(n + 1), block_threads, 0, stream>>>(n, x.positions, back, width,
                                                                      hop.cnt);
  WM_CUDA_CHECK_LAUNCH(stream);
  scan_offsets(c, hop, stream);
  const auto ne = static_cast<std::size_t>(hop.edge_bound);
  std::int64_t* cols = gathered_cols.get<std::int64_t>(ne, device, stream);
  std::int64_t* eids =
      with_eids ? hop.out->edge_ids.get<std::int64_t>(ne, device, stream) : nullptr;
  if (n > 0 && k > 0) {
    gpu::place_columns_kernel<<<grid(n * k), block_threads, 0, stream>>>(
        n, k, x.positions, back, width, hop.offsets, cols, eids);
    WM_CUDA_CHECK_LAUNCH(stream);
  }
  hop.gathered = cols;
  hop.eids = eids;
}

}  // namespace wholestore::graph
