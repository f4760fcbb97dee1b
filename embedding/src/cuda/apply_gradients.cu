// apply_gradients: the GPU path.
//
//   1. route: check every index (the first bad position by atomicMin), note each entry's owner
//      and count entries per owner
//   2. agree: every rank's record (its error, first bad index, step, learning rate and send
//      counts) goes to every rank: on an NCCL communicator by one allgather on the stream
//      (the record written by a kernel from the route's counts), then the one host wait of the
//      call; otherwise the route's counts come to the host and the records go round the
//      bootstrap.  No bootstrap round on the NCCL path: its exchanges below use the agreed
//      forms of the collectives, their counts having crossed in the records
//   3. sender: stable radix sort of the entries by owner (values: positions), then pack the
//      global rows and float32 gradient rows in bucket order.  One rank: nothing is packed
//      unless the gradients must become float32; the kernels read the caller's rows in place
//   4. exchange: NCCL alltoallv on device buffers, or staged through host memory for a host
//      communicator (several ranks sharing a GPU); the owner receives rank by rank
//   5. owner: the rows become 32-bit local rows; a stable radix sort of them (values: received
//      positions) keeps duplicates in global batch order; then runs, tree sums and the fused
//      update (update_rows.cu)
//
// Scratch buffers stay in the table between calls and grow geometrically.
#include "../table_impl.hpp"
#include "update_rows.hpp"

#include <embedding/table.hpp>
#include <wholememory/allocation.hpp>
#include <wholememory/communicator.hpp>
#include <wholememory/convert.hpp>
#include <wholememory/cuda_check.hpp>
#include <wholememory/device.hpp>
#include <wholememory/device_buffer.hpp>
#include <wholememory/error.hpp>

#include <cuda_runtime.h>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_select.cuh>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace wholestore::embedding {
namespace detail {

/// Page-locked host memory for the host-communicator staging, kept between calls and replaced
/// by one of the size asked when too small (pinning is slow; the copies through it run at the
/// bus rate, several times those through pageable memory).
class pinned_scratch {
 public:
  pinned_scratch() = default;
  pinned_scratch(const pinned_scratch&) = delete;
  pinned_scratch& operator=(const pinned_scratch&) = delete;
  ~pinned_scratch() {
    if (ptr_ != nullptr) WM_CUDA_WARN(cudaFreeHost(ptr_));
  }
  template <typename T>
  T* reserve(std::size_t count) {
    const std::size_t bytes = count * sizeof(T);
    if (bytes > bytes_) {
      if (ptr_ != nullptr) WM_CUDA_TRY(cudaFreeHost(ptr_));
      ptr_ = nullptr;
      bytes_ = 0;
      WM_CUDA_TRY(cudaHostAlloc(&ptr_, bytes, cudaHostAllocDefault));
      bytes_ = bytes;
    }
    return static_cast<T*>(ptr_);
  }

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

/// The peer exchange (table_options::exchange_kind::peer): one part per rank of a chunked device
/// allocation that every rank of the host maps; a rank writes its entries' global rows
/// (`capacity` uint64 keys) and float32 gradient rows there in its own order, and each owner
/// reads the entries of its rows from every part during its update.  Grown collectively (every
/// rank knows every rank's count from the apply records) to a power of two; a call that fits
/// allocates nothing and makes no bootstrap round.
struct peer_exchange {
  wholememory::allocation memory;
  std::size_t capacity = 0;  // entries per part, 2^shift
  int shift = 0;
  std::vector<std::uint64_t*> keys;        // per rank, this process's address of its keys
  std::vector<float*> rows;                // per rank, its rows
  wholememory::device_buffer sender_rows;  // the `rows` pointers on the device
  wholememory::device_buffer word;         // int32 for the barriers (an NCCL allreduce)
};

struct gpu_workspace {
  int device = -1;
  wholememory::device_buffer row_begin;    // int64, ranks + 1
  wholememory::device_buffer flags;        // per-owner counts, then the first bad position
  wholememory::device_buffer keys;         // uint64 global row per entry, caller order
  wholememory::device_buffer source_keys;  // uint64 source row per entry (scaled form)
  wholememory::device_buffer owner;        // uint32 owner per entry
  wholememory::device_buffer owner_sorted;
  wholememory::device_buffer positions;   // uint32 0, 1, 2, ...
  wholememory::device_buffer perm;        // uint32 caller position per bucket slot
  wholememory::device_buffer send_keys;   // uint64, bucket order
  wholememory::device_buffer send_grads;  // float32 rows, bucket order
  wholememory::device_buffer recv_keys;
  wholememory::device_buffer recv_grads;
  wholememory::device_buffer local_rows;   // uint32 received row - own first row
  wholememory::device_buffer sorted_rows;  // uint32, ascending
  wholememory::device_buffer order;        // uint32 received position per sorted slot
  wholememory::device_buffer sort_temp;
  wholememory::device_buffer records;  // int64: this rank's apply record, then every rank's
  wholememory::device_buffer recv_source_rows;  // uint64, the scaled form's received entries
  wholememory::device_buffer recv_coefs;        // float32, likewise
  std::unique_ptr<peer_exchange> peer;
  wholememory::device_buffer peer_positions;  // uint32: a sender's entries this rank owns
  wholememory::device_buffer peer_slots;      // uint32: (sender << shift) | position
  wholememory::device_buffer select_count;    // int: DeviceSelect's count
  runs_workspace runs;
  std::vector<unsigned long long> host_flags;
  pinned_scratch host_send_keys, host_recv_keys;  // host-communicator staging
  pinned_scratch host_send_grads, host_recv_grads;
  pinned_scratch host_records;  // every rank's apply record
};

void destroy_gpu_workspace(gpu_workspace* ws) noexcept { delete ws; }

namespace {

constexpr int block_threads = 256;
constexpr unsigned long long no_bad_index = ~0ull;
/// The routing kernel counts per owner in shared memory (8 bytes per rank, under 48 KiB).
constexpr int max_route_ranks = 4096;

unsigned grid_for(std::size_t items) {
  const std::size_t blocks = (items + block_threads - 1) / block_threads;
  return static_cast<unsigned>(std::clamp<std::size_t>(blocks, 1, 1u << 16));
}

/// Bits that hold every value below `bound` (at least 1).
int bits_for(std::uint64_t bound) {
  int bits = 1;
  while (bits < 64 && (std::uint64_t{1} << bits) < bound) ++bits;
  return bits;
}

template <typename T>
T* reserve(wholememory::device_buffer& b, std::size_t count, int device) {
  return static_cast<T*>(b.reserve_discard(std::max<std::size_t>(count, 1) * sizeof(T), device));
}

/// Checks the indices and routes them: keys[i] = idx[i]; with several ranks owner[i] and the
/// per-owner counts (block-local counts first, then one atomic per block and owner).  A bad
/// index leaves its position in *bad (the smallest wins).
template <typename IndexT>
__global__ void route_indices(const IndexT* idx, std::size_t n, std::int64_t rows,
                              const std::int64_t* row_begin, int ranks, std::uint64_t* keys,
                              std::uint32_t* owner, unsigned long long* counts,
                              unsigned long long* bad) {
  extern __shared__ unsigned long long block_counts[];
  if (owner != nullptr) {
    for (int r = threadIdx.x; r < ranks; r += blockDim.x) block_counts[r] = 0;
    __syncthreads();
  }
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const auto v = static_cast<std::int64_t>(idx[i]);
    if (v < 0 || v >= rows) {
      atomicMin(bad, static_cast<unsigned long long>(i));
      continue;
    }
    keys[i] = static_cast<std::uint64_t>(v);
    if (owner != nullptr) {
      // The last rank whose range starts at or before v (empty ranges share starts).
      int lo = 0, hi = ranks - 1;
      while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (row_begin[mid] <= v) {
          lo = mid;
        } else {
          hi = mid - 1;
        }
      }
      owner[i] = static_cast<std::uint32_t>(lo);
      atomicAdd(&block_counts[lo], 1ull);
    }
  }
  if (owner != nullptr) {
    __syncthreads();
    for (int r = threadIdx.x; r < ranks; r += blockDim.x)
      if (block_counts[r] != 0) atomicAdd(&counts[r], block_counts[r]);
  }
}

/// The scaled form's source rows, one per entry: out[e] = idx[e / group].  A row outside
/// [0, rows) leaves its position in idx in *bad (the smallest wins).
template <typename IndexT>
__global__ void expand_source_rows(const IndexT* idx, std::size_t entries, std::size_t group,
                                   std::int64_t rows, std::uint64_t* out, unsigned long long* bad) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t e = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < entries;
       e += stride) {
    const std::size_t i = group == 1 ? e : e / group;
    const auto v = static_cast<std::int64_t>(idx[i]);
    if (v < 0 || v >= rows) {
      atomicMin(bad, static_cast<unsigned long long>(i));
      continue;
    }
    out[e] = static_cast<std::uint64_t>(v);
  }
}

__global__ void fill_positions(std::uint32_t* out, std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride)
    out[i] = static_cast<std::uint32_t>(i);
}

/// out[k] = in[k] - begin (the received global rows as rows of the own part) and
/// positions[k] = k, the sort's input.
__global__ void localize_rows(const std::uint64_t* in, std::size_t n, std::uint64_t begin,
                              std::uint32_t* out, std::uint32_t* positions) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    out[i] = static_cast<std::uint32_t>(in[i] - begin);
    positions[i] = static_cast<std::uint32_t>(i);
  }
}

/// Packs entry perm[k] (k without perm) as slot k: its key and its gradient row in float32.
template <typename GradT>
__global__ void pack_rows(const GradT* grads, std::size_t grad_stride, std::size_t dim,
                          std::size_t n, const std::uint32_t* perm, const std::uint64_t* keys,
                          std::uint64_t* out_keys, float* out_grads) {
  const std::size_t total = n * dim;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t e = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += stride) {
    const std::size_t k = e / dim, c = e - k * dim;
    const std::size_t src = perm != nullptr ? perm[k] : k;
    out_grads[e] = wholememory::convert_element<float>(grads[src * grad_stride + c]);
    if (c == 0 && out_keys != nullptr) out_keys[k] = keys[src];
  }
}

/// The scaled form's entries for their owners: slot k takes entry perm[k]'s key and, as three
/// 4-byte words, its global source row (low, high) and its coefficient's bits (12 bytes an
/// entry cross the link instead of a 4 * dim-byte gradient row).
__global__ void pack_scaled(std::size_t n, const std::uint32_t* perm, const std::uint64_t* keys,
                            const std::uint64_t* source_rows, const float* coefs,
                            std::uint64_t* out_keys, std::uint32_t* out_words) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t k = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < n;
       k += stride) {
    const std::size_t e = perm[k];
    out_keys[k] = keys[e];
    const std::uint64_t src = source_rows[e];
    out_words[3 * k] = static_cast<std::uint32_t>(src);
    out_words[3 * k + 1] = static_cast<std::uint32_t>(src >> 32);
    out_words[3 * k + 2] = __float_as_uint(coefs[e]);
  }
}

/// The received scaled entries back into a source row and a coefficient each.
__global__ void unpack_scaled(std::size_t m, const std::uint32_t* words, std::uint64_t* source_rows,
                              float* coefs) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < m;
       i += stride) {
    source_rows[i] = static_cast<std::uint64_t>(words[3 * i]) |
                     (static_cast<std::uint64_t>(words[3 * i + 1]) << 32);
    coefs[i] = __uint_as_float(words[3 * i + 2]);
  }
}

/// Whether key k is one of [begin, end) (DeviceSelect's predicate over a sender's positions).
struct owned_entry {
  const std::uint64_t* keys;
  std::uint64_t begin, end;
  __device__ __forceinline__ bool operator()(std::uint32_t i) const {
    const std::uint64_t k = keys[i];
    return k >= begin && k < end;
  }
};

/// A sender's owned entries (positions) as local rows and slots (sender << shift | position).
__global__ void peer_entries(const std::uint64_t* keys, const std::uint32_t* positions,
                             std::size_t count, std::uint32_t sender, int shift,
                             std::uint64_t begin, std::uint32_t* local_rows, std::uint32_t* slots) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t k = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < count;
       k += stride) {
    const std::uint32_t pos = positions[k];
    local_rows[k] = static_cast<std::uint32_t>(keys[pos] - begin);
    slots[k] = (sender << shift) | pos;
  }
}

template <typename IndexT>
void launch_route(const void* idx, std::size_t n, const table_impl& t, gpu_workspace& ws,
                  std::uint64_t* keys, std::uint32_t* owner, unsigned long long* counts,
                  unsigned long long* bad, cudaStream_t stream) {
  const int ranks = t.ranks();
  const std::size_t shared = owner != nullptr ? ranks * sizeof(unsigned long long) : 0;
  route_indices<IndexT><<<grid_for(n), block_threads, shared, stream>>>(
      static_cast<const IndexT*>(idx), n, static_cast<std::int64_t>(t.options.rows),
      ws.row_begin.data_as<std::int64_t>(), ranks, keys, owner, counts, bad);
  WM_CUDA_CHECK_LAUNCH(stream);
}

void launch_pack(const wholememory::dense_matrix& grads, std::size_t n, const std::uint32_t* perm,
                 const std::uint64_t* keys, std::uint64_t* out_keys, float* out_grads,
                 cudaStream_t stream) {
  if (n == 0) return;
  const unsigned grid = grid_for(n * grads.cols);
  switch (grads.type) {
    case wholememory::dtype::float16:
      pack_rows<<<grid, block_threads, 0, stream>>>(
          static_cast<const wholememory::half_t*>(grads.data), grads.row_stride, grads.cols, n,
          perm, keys, out_keys, out_grads);
      break;
    case wholememory::dtype::bfloat16:
      pack_rows<<<grid, block_threads, 0, stream>>>(
          static_cast<const wholememory::bfloat16_t*>(grads.data), grads.row_stride, grads.cols, n,
          perm, keys, out_keys, out_grads);
      break;
    default:
      pack_rows<<<grid, block_threads, 0, stream>>>(static_cast<const float*>(grads.data),
                                                    grads.row_stride, grads.cols, n, perm, keys,
                                                    out_keys, out_grads);
      break;
  }
  WM_CUDA_CHECK_LAUNCH(stream);
}

/// Stable radix sort of (keys, positions 0..n-1) on bits [0, end_bit); ws.positions holds
/// 0..n-1 already when `filled`.
void sort_positions(gpu_workspace& ws, const std::uint32_t* keys_in, std::uint32_t* keys_out,
                    std::uint32_t* positions_out, std::size_t n, int end_bit, cudaStream_t stream,
                    bool filled = false) {
  std::uint32_t* positions = reserve<std::uint32_t>(ws.positions, n, ws.device);
  if (!filled) {
    fill_positions<<<grid_for(n), block_threads, 0, stream>>>(positions, n);
    WM_CUDA_CHECK_LAUNCH(stream);
  }
  std::size_t temp_bytes = 0;
  WM_CUDA_TRY(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, keys_in, keys_out, positions,
                                              positions_out, n, 0, end_bit, stream));
  void* temp = ws.sort_temp.reserve_discard(std::max<std::size_t>(temp_bytes, 1), ws.device);
  WM_CUDA_TRY(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, keys_in, keys_out, positions,
                                              positions_out, n, 0, end_bit, stream));
}

/// The device this rank's part lives on (device memory), else the NCCL communicator's or the
/// caller's current device.
int rank_device(const table_impl& t) {
  const int part_device = t.weights.local_part().device;
  if (part_device >= 0) return part_device;
  if (t.comm->get_backend() == wholememory::backend::nccl) return t.comm->device();
  return wholememory::current_device();
}

gpu_workspace& workspace(table_impl& t, int device) {
  if (!t.gpu || t.gpu->device != device) {
    t.gpu.reset(new gpu_workspace);
    t.gpu->device = device;
    const std::size_t bytes = t.row_begin.size() * sizeof(std::int64_t);
    t.gpu->row_begin = wholememory::device_buffer(bytes, device);
    WM_CUDA_TRY(
        cudaMemcpy(t.gpu->row_begin.data(), t.row_begin.data(), bytes, cudaMemcpyHostToDevice));
  }
  return *t.gpu;
}

std::vector<std::size_t> scaled(std::vector<std::size_t> v, std::size_t factor) {
  for (auto& x : v) x *= factor;
  return v;
}

/// Sends the packed keys and rows of `dim` 4-byte words (ws.send_keys, ws.send_grads) to their
/// owners; returns the received keys and rows on the device.
void exchange_rows(table_impl& t, gpu_workspace& ws, const apply_counts& counts, std::size_t n,
                   std::size_t dim, std::uint64_t* recv_keys, float* recv_grads,
                   cudaStream_t stream) {
  const std::size_t m = counts.total_recv();
  const std::vector<std::size_t> send_displs = displacements(counts.send);
  const std::vector<std::size_t> recv_displs = displacements(counts.recv);
  const auto* send_keys = ws.send_keys.data_as<std::uint64_t>();
  const auto* send_grads = ws.send_grads.data_as<float>();
  wholememory::communicator& comm = *t.comm;
  if (comm.get_backend() == wholememory::backend::nccl) {
    // The counts crossed in the agreement's records: no argument round.
    comm.alltoallv_agreed(send_keys, counts.send.data(), send_displs.data(), recv_keys,
                          counts.recv.data(), recv_displs.data(), wholememory::dtype::int64,
                          stream);
    comm.alltoallv_agreed(send_grads, scaled(counts.send, dim).data(),
                          scaled(send_displs, dim).data(), recv_grads,
                          scaled(counts.recv, dim).data(), scaled(recv_displs, dim).data(),
                          wholememory::dtype::float32, stream);
    return;
  }
  // Host communicator (ranks sharing a GPU): through page-locked host memory.  The own
  // bucket stays on the device (a device copy into its place in the received order); the host
  // exchange carries only the other ranks' rows, its diagonal counts zero on every rank.
  const auto me = static_cast<std::size_t>(t.rank());
  const std::size_t own_send = send_displs[me], own_recv = recv_displs[me];
  const std::size_t own = counts.send[me];
  std::vector<std::size_t> send_counts = counts.send, recv_counts = counts.recv;
  send_counts[me] = 0;
  recv_counts[me] = 0;
  auto* h_send_keys = ws.host_send_keys.reserve<std::uint64_t>(n);
  auto* h_send_grads = ws.host_send_grads.reserve<float>(n * dim);
  auto* h_recv_keys = ws.host_recv_keys.reserve<std::uint64_t>(m);
  auto* h_recv_grads = ws.host_recv_grads.reserve<float>(m * dim);
  // The ranges [0, own_at) and [own_at + own, total) of a bucketed list, the own bucket's gap.
  auto around_own = [&](std::size_t own_at, std::size_t total, auto&& copy) {
    if (own_at > 0) copy(std::size_t{0}, own_at);
    if (own_at + own < total) copy(own_at + own, total);
  };
  around_own(own_send, n, [&](std::size_t b, std::size_t e) {
    WM_CUDA_TRY(cudaMemcpyAsync(h_send_keys + b, send_keys + b, (e - b) * sizeof(std::uint64_t),
                                cudaMemcpyDeviceToHost, stream));
    WM_CUDA_TRY(cudaMemcpyAsync(h_send_grads + b * dim, send_grads + b * dim,
                                (e - b) * dim * sizeof(float), cudaMemcpyDeviceToHost, stream));
  });
  if (own > 0) {
    WM_CUDA_TRY(cudaMemcpyAsync(recv_keys + own_recv, send_keys + own_send,
                                own * sizeof(std::uint64_t), cudaMemcpyDeviceToDevice, stream));
    WM_CUDA_TRY(cudaMemcpyAsync(recv_grads + own_recv * dim, send_grads + own_send * dim,
                                own * dim * sizeof(float), cudaMemcpyDeviceToDevice, stream));
  }
  WM_CUDA_TRY(cudaStreamSynchronize(stream));
  comm.alltoallv(h_send_keys, send_counts.data(), send_displs.data(), h_recv_keys,
                 recv_counts.data(), recv_displs.data(), wholememory::dtype::int64, stream);
  comm.alltoallv(h_send_grads, scaled(send_counts, dim).data(), scaled(send_displs, dim).data(),
                 h_recv_grads, scaled(recv_counts, dim).data(), scaled(recv_displs, dim).data(),
                 wholememory::dtype::float32, stream);
  around_own(own_recv, m, [&](std::size_t b, std::size_t e) {
    WM_CUDA_TRY(cudaMemcpyAsync(recv_keys + b, h_recv_keys + b, (e - b) * sizeof(std::uint64_t),
                                cudaMemcpyHostToDevice, stream));
    WM_CUDA_TRY(cudaMemcpyAsync(recv_grads + b * dim, h_recv_grads + b * dim,
                                (e - b) * dim * sizeof(float), cudaMemcpyHostToDevice, stream));
  });
  // The host buffers are read by the copies above: they must end before the next call's
  // staging overwrites them.
  WM_CUDA_TRY(cudaStreamSynchronize(stream));
}

/// exchange_rows of gradient rows (the table's dim).
void exchange(table_impl& t, gpu_workspace& ws, const apply_counts& counts, std::size_t n,
              std::uint64_t* recv_keys, float* recv_grads, cudaStream_t stream) {
  exchange_rows(t, ws, counts, n, t.options.dim, recv_keys, recv_grads, stream);
}

/// Element `position` of an index list wherever it lives (read only on error).
std::int64_t index_at(const wholememory::index_array& indices, std::int64_t position) {
  const std::size_t isize = wholememory::dtype_size(indices.type);
  std::int64_t value64 = 0;
  std::int32_t value32 = 0;
  const bool narrow = indices.type == wholememory::dtype::int32;
  void* dst = narrow ? static_cast<void*>(&value32) : static_cast<void*>(&value64);
  WM_CUDA_TRY(cudaMemcpy(dst, static_cast<const char*>(indices.data) + position * isize, isize,
                         cudaMemcpyDefault));
  return narrow ? value32 : value64;
}

/// The scaled form's source rows to check and expand in route's one wait.
struct source_check {
  const scaled_rows* grads = nullptr;
  std::int64_t source_table_rows = 0;
  std::uint64_t* out = nullptr;  // one global source row per entry
  bad_index bad;                 // set by route: the first source row outside its table
};

/// Step 1: checks the indices (and the scaled form's source rows) and counts entries per
/// owner on the device, then waits for the result.  Returns the device array of the entries'
/// global rows.  With `deferred` (one rank only) both checks leave their first bad position in
/// that device word and nothing waits: the counts are known (all n entries stay here).
std::uint64_t* route(const table_impl& t, gpu_workspace& ws,
                     const wholememory::index_array& indices, cudaStream_t stream, bad_index& bad,
                     std::vector<std::size_t>& send_counts, source_check* sources = nullptr,
                     unsigned long long* deferred = nullptr, bool on_device = false) {
  const int ranks = t.ranks(), device = ws.device;
  const std::size_t n = indices.count;
  // Per-owner counts, the first bad index, the first bad source row.
  auto* flags = reserve<unsigned long long>(ws.flags, ranks + 2, device);
  auto* keys = reserve<std::uint64_t>(ws.keys, n, device);
  std::uint32_t* owner = ranks > 1 ? reserve<std::uint32_t>(ws.owner, n, device) : nullptr;
  unsigned long long* bad_index_word = deferred != nullptr ? deferred : flags + ranks;
  unsigned long long* bad_source_word = deferred != nullptr ? deferred : flags + ranks + 1;
  WM_CUDA_TRY(cudaMemsetAsync(flags, 0, ranks * sizeof(unsigned long long), stream));
  if (deferred == nullptr) {
    WM_CUDA_TRY(cudaMemsetAsync(flags + ranks, 0xff, 2 * sizeof(unsigned long long), stream));
  }
  if (indices.type == wholememory::dtype::int32) {
    launch_route<std::int32_t>(indices.data, n, t, ws, keys, owner, flags, bad_index_word, stream);
  } else {
    launch_route<std::int64_t>(indices.data, n, t, ws, keys, owner, flags, bad_index_word, stream);
  }
  if (sources != nullptr) {
    const wholememory::index_array& src = sources->grads->source_rows;
    auto launch = [&](auto tag) {
      using IndexT = decltype(tag);
      expand_source_rows<IndexT><<<grid_for(n), block_threads, 0, stream>>>(
          static_cast<const IndexT*>(src.data), n, sources->grads->group,
          sources->source_table_rows, sources->out, bad_source_word);
    };
    if (src.type == wholememory::dtype::int32) {
      launch(std::int32_t{});
    } else {
      launch(std::int64_t{});
    }
    WM_CUDA_CHECK_LAUNCH(stream);
  }
  if (deferred != nullptr) {
    send_counts[0] = n;
    return keys;
  }
  if (on_device) return keys;  // agree_on_device reads the flags where they are
  ws.host_flags.resize(ranks + 2);
  WM_CUDA_TRY(cudaMemcpyAsync(ws.host_flags.data(), flags, (ranks + 2) * sizeof(unsigned long long),
                              cudaMemcpyDeviceToHost, stream));
  WM_CUDA_TRY(cudaStreamSynchronize(stream));
  if (sources != nullptr && ws.host_flags[ranks + 1] != no_bad_index) {
    sources->bad.position = static_cast<std::int64_t>(ws.host_flags[ranks + 1]);
    sources->bad.value = index_at(sources->grads->source_rows, sources->bad.position);
  }
  if (ws.host_flags[ranks] != no_bad_index) {
    // Read only on error: the bad value itself.
    bad.position = static_cast<std::int64_t>(ws.host_flags[ranks]);
    bad.value = index_at(indices, bad.position);
  } else if (ranks == 1) {
    send_counts[0] = n;
  } else {
    for (int r = 0; r < ranks; ++r) send_counts[r] = ws.host_flags[r];
  }
  return keys;
}

/// This rank's apply record (apply_record_field) from the route's flags (per-owner counts, first
/// bad index, first bad source row) and the host's fields; one thread.
__global__ void fill_apply_record(std::int64_t* record, const unsigned long long* flags, int ranks,
                                  bool routed, bool argument_error, std::int64_t step,
                                  std::int64_t lr_bits, const void* idx, bool idx32,
                                  const void* src_idx, bool src32) {
  auto value_at = [](const void* p, bool narrow, unsigned long long i) -> std::int64_t {
    return narrow ? static_cast<const std::int32_t*>(p)[i] : static_cast<const std::int64_t*>(p)[i];
  };
  for (int r = 0; r < ranks; ++r) record[apply_record_fields + r] = 0;
  record[apply_record_error] = 0;
  record[apply_record_bad_position] = -1;
  record[apply_record_bad_value] = 0;
  record[apply_record_step] = step;
  record[apply_record_lr_bits] = lr_bits;
  if (argument_error) {
    record[apply_record_error] = 2;
    return;
  }
  if (!routed) return;  // no entries
  const unsigned long long bad = flags[ranks], bad_source = flags[ranks + 1];
  if (bad != no_bad_index) {
    record[apply_record_error] = 1;
    record[apply_record_bad_position] = static_cast<std::int64_t>(bad);
    record[apply_record_bad_value] = value_at(idx, idx32, bad);
    return;
  }
  if (src_idx != nullptr && bad_source != no_bad_index) {
    record[apply_record_error] = 3;
    record[apply_record_bad_position] = static_cast<std::int64_t>(bad_source);
    record[apply_record_bad_value] = value_at(src_idx, src32, bad_source);
    return;
  }
  for (int r = 0; r < ranks; ++r)
    record[apply_record_fields + r] = static_cast<std::int64_t>(flags[r]);
}

/// Whether step 2 runs on the device: several ranks on an NCCL communicator.
bool agrees_on_device(const table_impl& t) {
  return t.ranks() > 1 && t.comm->get_backend() == wholememory::backend::nccl;
}

/// Step 2 on an NCCL communicator: this rank's record written on the device, every rank's
/// gathered by one allgather on `stream`, one wait (the communicator's, under its timeout), then
/// decide_apply as agree_on_apply does.  `routed`: route ran with on_device over n > 0 entries
/// (its flags hold the counts); `local_error`: this rank's argument error.
apply_counts agree_on_device(table_impl& t, gpu_workspace& ws, const char* op,
                             const std::string& local_error, bool routed,
                             const wholememory::index_array& indices,
                             const wholememory::index_array* source_rows, float lr,
                             cudaStream_t stream) {
  const int ranks = t.ranks();
  const std::size_t width = apply_record_fields + static_cast<std::size_t>(ranks);
  auto* records = reserve<std::int64_t>(ws.records, width * (ranks + 1), ws.device);
  const bool with_sources = routed && source_rows != nullptr;
  fill_apply_record<<<1, 1, 0, stream>>>(
      records, ws.flags.data_as<unsigned long long>(), ranks, routed, !local_error.empty(),
      static_cast<std::int64_t>(t.step), lr_bits(lr), indices.data,
      indices.type == wholememory::dtype::int32, with_sources ? source_rows->data : nullptr,
      with_sources && source_rows->type == wholememory::dtype::int32);
  WM_CUDA_CHECK_LAUNCH(stream);
  t.comm->allgather_agreed(records, records + width, width, wholememory::dtype::int64, stream);
  auto* host = ws.host_records.reserve<std::int64_t>(width * ranks);
  WM_CUDA_TRY(cudaMemcpyAsync(host, records + width, width * ranks * sizeof(std::int64_t),
                              cudaMemcpyDeviceToHost, stream));
  t.comm->synchronize(stream);
  const std::vector<std::int64_t> all(host, host + width * ranks);
  std::vector<std::size_t> send_counts(static_cast<std::size_t>(ranks), 0);
  const std::int64_t* mine = all.data() + width * static_cast<std::size_t>(t.rank());
  for (int r = 0; r < ranks; ++r)
    send_counts[r] = static_cast<std::size_t>(mine[apply_record_fields + r]);
  return decide_apply(t, op, local_error, all, send_counts);
}

void finish_update(table_impl& t, gpu_workspace& ws, const std::uint32_t* sorted_rows,
                   const std::uint32_t* order, std::size_t m, update_rows_args args, float lr,
                   int device, cudaStream_t stream);

/// Step 5 on the m received entries (global rows recv_keys; `args` says where their gradient
/// rows are, and carries the caller's gate and event): local 32-bit rows, sorted stably, then
/// every touched row's update.
void update_received(table_impl& t, gpu_workspace& ws, const std::uint64_t* recv_keys,
                     std::size_t m, update_rows_args args, float lr, int device,
                     cudaStream_t stream) {
  if (m == 0) return;
  const row_range own = t.own();
  auto* local_rows = reserve<std::uint32_t>(ws.local_rows, m, device);
  auto* positions = reserve<std::uint32_t>(ws.positions, m, device);
  localize_rows<<<grid_for(m), block_threads, 0, stream>>>(recv_keys, m, own.begin, local_rows,
                                                           positions);
  WM_CUDA_CHECK_LAUNCH(stream);
  auto* sorted_rows = reserve<std::uint32_t>(ws.sorted_rows, m, device);
  auto* order = reserve<std::uint32_t>(ws.order, m, device);
  sort_positions(ws, local_rows, sorted_rows, order, m,
                 bits_for(static_cast<std::uint64_t>(own.size())), stream,
                 /*filled=*/true);
  finish_update(t, ws, sorted_rows, order, m, args, lr, device, stream);
}

/// The update of m sorted entries (sorted_rows ascending, order: each one's received
/// position); ws.positions holds 0, 1, ..., m - 1.
void finish_update(table_impl& t, gpu_workspace& ws, const std::uint32_t* sorted_rows,
                   const std::uint32_t* order, std::size_t m, update_rows_args args, float lr,
                   int device, cudaStream_t stream) {
  args.sorted_rows = sorted_rows;
  args.order = order;
  args.positions = ws.positions.data_as<std::uint32_t>();
  args.m = m;
  args.dim = t.options.dim;
  args.weights = t.weights.local_part().ptr;
  args.state0 = t.state.size() > 0 ? static_cast<float*>(t.state[0].local_part().ptr) : nullptr;
  args.state1 = t.state.size() > 1 ? static_cast<float*>(t.state[1].local_part().ptr) : nullptr;
  args.params = make_update_params(t.options.optimizer, lr, t.step);
  launch_update_rows(t.options.dtype, t.options.optimizer.kind, args, ws.runs, device, stream);
}

/// Whether a multi-rank update of this table goes through the peer exchange.
bool uses_peer_exchange(const table_impl& t) {
  return t.ranks() > 1 && t.options.exchange == table_options::exchange_kind::peer &&
         t.comm->get_backend() == wholememory::backend::nccl && t.comm->topology().num_hosts == 1;
}

/// An all-ranks fence on `stream` (an NCCL allreduce of one word: it completes on a rank only
/// once every rank's stream has reached it), with no bootstrap round.
void peer_barrier(table_impl& t, peer_exchange& px, cudaStream_t stream) {
  t.comm->allreduce_sum_agreed(px.word.data(), px.word.data(), 1, wholememory::dtype::int32,
                               stream);
}

/// The peer exchange with room for `most` entries a rank, grown (collectively: every rank
/// passes the same `most`, from the records) when smaller; nullptr when the slots would not fit
/// 32 bits (the collective path then serves the call, on every rank alike).
peer_exchange* peer_for(table_impl& t, gpu_workspace& ws, std::size_t most, int device) {
  const int ranks = t.ranks();
  if (ws.peer && ws.peer->capacity >= most) return ws.peer.get();
  int shift = 10;
  while ((std::size_t{1} << shift) < most) ++shift;
  if ((static_cast<std::uint64_t>(ranks) << shift) > (std::uint64_t{1} << 32)) return nullptr;
  ws.peer.reset();  // every rank's stream has passed the last call's closing barrier
  auto px = std::make_unique<peer_exchange>();
  px->shift = shift;
  px->capacity = std::size_t{1} << shift;
  const std::size_t dim = t.options.dim;
  const std::size_t rows_offset = (px->capacity * sizeof(std::uint64_t) + 255) / 256 * 256;
  const std::size_t part = rows_offset + px->capacity * dim * sizeof(float);
  wholememory::allocation_options o;
  o.part_bytes.assign(static_cast<std::size_t>(ranks), part);
  o.name = "embedding update exchange";
  px->memory = wholememory::allocation::create(t.comm, part * static_cast<std::size_t>(ranks),
                                               wholememory::memory_type::chunked,
                                               wholememory::memory_location::device, o);
  for (int r = 0; r < ranks; ++r) {
    char* base = static_cast<char*>(px->memory.part(r).ptr);
    WM_EXPECTS(base != nullptr, "the update exchange's part of rank " << r << " is not mapped");
    px->keys.push_back(reinterpret_cast<std::uint64_t*>(base));
    px->rows.push_back(reinterpret_cast<float*>(base + rows_offset));
  }
  px->sender_rows = wholememory::device_buffer(ranks * sizeof(float*), device);
  WM_CUDA_TRY(cudaMemcpy(px->sender_rows.data(), px->rows.data(), ranks * sizeof(float*),
                         cudaMemcpyHostToDevice));
  px->word = wholememory::device_buffer(sizeof(std::int32_t), device);
  WM_CUDA_TRY(cudaMemset(px->word.data(), 0, sizeof(std::int32_t)));
  ws.peer = std::move(px);
  return ws.peer.get();
}

/// Steps 3 to 5 through the peer exchange: this rank's n entries into its part (keys and
/// float32 rows, its own order), a fence, then its owned entries of every sender (in sender
/// order, each sender's in its order: global batch order) sorted by row and updated with the
/// rows read where the senders wrote them; a closing fence before any part is written again.
void apply_through_peers(table_impl& t, gpu_workspace& ws, peer_exchange& px,
                         const apply_counts& counts, const wholememory::dense_matrix& grads,
                         std::size_t n, const std::uint64_t* keys, update_rows_args args, float lr,
                         int device, cudaStream_t stream) {
  const int ranks = t.ranks(), me = t.rank();
  if (n > 0) launch_pack(grads, n, nullptr, keys, px.keys[me], px.rows[me], stream);
  peer_barrier(t, px, stream);
  const std::size_t m = counts.total_recv();
  if (m > 0) {
    const row_range own = t.own();
    const std::vector<std::size_t> displs = displacements(counts.recv);
    // 0, 1, ...: DeviceSelect's input over any sender's entries, then the update's positions.
    const std::size_t iota = std::max(counts.most_sent, m);
    auto* positions = reserve<std::uint32_t>(ws.positions, iota, device);
    fill_positions<<<grid_for(iota), block_threads, 0, stream>>>(positions, iota);
    WM_CUDA_CHECK_LAUNCH(stream);
    auto* owned = reserve<std::uint32_t>(ws.peer_positions, m, device);
    auto* local_rows = reserve<std::uint32_t>(ws.local_rows, m, device);
    auto* slots = reserve<std::uint32_t>(ws.peer_slots, m, device);
    int* selected = reserve<int>(ws.select_count, 1, device);
    for (int s = 0; s < ranks; ++s) {
      const std::size_t c = counts.recv[s];
      if (c == 0) continue;
      const owned_entry pred{px.keys[s], own.begin, own.end};
      const auto items = static_cast<int>(counts.sent_by[s]);
      std::size_t temp_bytes = 0;
      WM_CUDA_TRY(cub::DeviceSelect::If(nullptr, temp_bytes, positions, owned + displs[s], selected,
                                        items, pred, stream));
      void* temp = ws.sort_temp.reserve_discard(std::max<std::size_t>(temp_bytes, 1), device);
      WM_CUDA_TRY(cub::DeviceSelect::If(temp, temp_bytes, positions, owned + displs[s], selected,
                                        items, pred, stream));
      peer_entries<<<grid_for(c), block_threads, 0, stream>>>(
          px.keys[s], owned + displs[s], c, static_cast<std::uint32_t>(s), px.shift, own.begin,
          local_rows + displs[s], slots + displs[s]);
      WM_CUDA_CHECK_LAUNCH(stream);
    }
    // Stable: ties keep sender order, then each sender's order.
    auto* sorted_rows = reserve<std::uint32_t>(ws.sorted_rows, m, device);
    auto* order = reserve<std::uint32_t>(ws.order, m, device);
    const int end_bit = bits_for(static_cast<std::uint64_t>(own.size()));
    std::size_t temp_bytes = 0;
    WM_CUDA_TRY(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, local_rows, sorted_rows, slots,
                                                order, m, 0, end_bit, stream));
    void* temp = ws.sort_temp.reserve_discard(std::max<std::size_t>(temp_bytes, 1), device);
    WM_CUDA_TRY(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, local_rows, sorted_rows, slots,
                                                order, m, 0, end_bit, stream));
    args.grads = px.rows[me];  // the alignment checks' sample: every part is laid out alike
    args.grad_stride = t.options.dim;
    args.sender_rows = px.sender_rows.data_as<const float*>();
    args.slot_shift = px.shift;
    finish_update(t, ws, sorted_rows, order, m, args, lr, device, stream);
  }
  peer_barrier(t, px, stream);
}

}  // namespace
}  // namespace detail

void table::apply_gradients(const wholememory::index_array& indices,
                            const wholememory::dense_matrix& grads, float lr, cudaStream_t stream,
                            const apply_options& options) {
  WM_EXPECTS(impl_ != nullptr, "use of an empty embedding::table");
  detail::table_impl& t = *impl_;
  const char* op = "apply_gradients";
  const int ranks = t.ranks();
  const std::size_t n = indices.count, dim = t.options.dim;
  // Several ranks wait for the counts anyway: they check as without the option.
  unsigned long long* deferred = ranks == 1 ? options.deferred_check : nullptr;

  std::string error =
      detail::check_apply_arguments(t, indices, grads, lr, op, detail::apply_path::gpu);
  if (error.empty() && (n > std::numeric_limits<std::uint32_t>::max() ||
                        n * dim > std::numeric_limits<std::size_t>::max() / 8)) {
    error = std::string(op) + ": " + std::to_string(n) +
            " indices in one call; at most 2^32 - 1 are supported";
  }
  if (error.empty() && ranks > detail::max_route_ranks) {
    error = std::string(op) + ": the GPU path routes among at most " +
            std::to_string(detail::max_route_ranks) + " ranks, the table has " +
            std::to_string(ranks);
  }
  // 1. Route and check on the device; one wait for the counts.  Local failures (no device,
  // a CUDA error) become this rank's error, so that the other ranks fail with it instead of
  // waiting for it.
  int device = -1;
  detail::bad_index bad;
  std::vector<std::size_t> send_counts(ranks, 0);
  std::uint64_t* keys = nullptr;
  std::optional<wholememory::device_guard> guard;
  // On an NCCL communicator the ranks agree on the device (the workspace is needed for that
  // even when this rank's arguments are wrong); a rank whose device fails here cannot join and
  // the others end in the communicator's timeout.
  const bool on_device = detail::agrees_on_device(t);
  bool routed = false;
  if (error.empty() || on_device) {
    try {
      device = detail::rank_device(t);
      guard.emplace(device);
      detail::gpu_workspace& ws = detail::workspace(t, device);
      if (n > 0 && error.empty()) {
        keys =
            detail::route(t, ws, indices, stream, bad, send_counts, nullptr, deferred, on_device);
        routed = true;
      }
    } catch (const std::exception& e) {
      if (error.empty()) error = std::string(op) + ": " + e.what();
    }
  }
  // 2. Every rank learns of every error before anything changes.
  const detail::apply_counts counts =
      on_device && t.gpu
          ? detail::agree_on_device(t, *t.gpu, op, error, routed, indices, nullptr, lr, stream)
          : detail::agree_on_apply(t, op, error, bad, send_counts, lr);
  const std::size_t m = ranks == 1 ? n : counts.total_recv();
  WM_EXPECTS(m <= std::numeric_limits<std::uint32_t>::max(),
             op << ": " << m << " gradient rows reached rank " << t.rank()
                << " in one call; at most 2^32 - 1 are supported");
  t.step += 1;
  detail::gpu_workspace& ws = *t.gpu;
  if (detail::uses_peer_exchange(t)) {
    if (detail::peer_exchange* px = detail::peer_for(t, ws, counts.most_sent, device)) {
      detail::update_rows_args args;
      args.update_after = options.update_after;
      detail::apply_through_peers(t, ws, *px, counts, grads, n, keys, args, lr, device, stream);
      return;
    }
  }

  // 3 and 4. Received rows in rank order (one rank: the caller's rows in its order).
  std::uint64_t* recv_keys = nullptr;
  const float* recv_grads = nullptr;
  std::size_t grad_stride = dim;
  if (ranks == 1) {
    recv_keys = keys;
    if (grads.type == wholememory::dtype::float32) {
      recv_grads = static_cast<const float*>(grads.data);
      grad_stride = grads.row_stride;
    } else {
      float* packed = detail::reserve<float>(ws.recv_grads, n * dim, device);
      detail::launch_pack(grads, n, nullptr, nullptr, nullptr, packed, stream);
      recv_grads = packed;
    }
  } else {
    if (n > 0) {
      std::uint32_t* perm = detail::reserve<std::uint32_t>(ws.perm, n, device);
      std::uint32_t* owner_sorted = detail::reserve<std::uint32_t>(ws.owner_sorted, n, device);
      detail::sort_positions(ws, ws.owner.data_as<std::uint32_t>(), owner_sorted, perm, n,
                             detail::bits_for(static_cast<std::uint64_t>(ranks)), stream);
      detail::launch_pack(grads, n, perm, keys,
                          detail::reserve<std::uint64_t>(ws.send_keys, n, device),
                          detail::reserve<float>(ws.send_grads, n * dim, device), stream);
    }
    recv_keys = detail::reserve<std::uint64_t>(ws.recv_keys, m, device);
    float* received = detail::reserve<float>(ws.recv_grads, m * dim, device);
    detail::exchange(t, ws, counts, n, recv_keys, received, stream);
    recv_grads = received;
  }
  detail::update_rows_args args;
  args.grads = recv_grads;
  args.grad_stride = grad_stride;
  args.gate = deferred;
  args.update_after = options.update_after;
  detail::update_received(t, ws, recv_keys, m, args, lr, device, stream);
}

void table::apply_scaled_gradients(const wholememory::index_array& indices,
                                   const scaled_rows& grads, float lr, cudaStream_t stream,
                                   const apply_options& options) {
  WM_EXPECTS(impl_ != nullptr, "use of an empty embedding::table");
  detail::table_impl& t = *impl_;
  const char* op = "apply_scaled_gradients";
  const int ranks = t.ranks();
  const std::size_t n = indices.count;
  unsigned long long* deferred = ranks == 1 ? options.deferred_check : nullptr;

  std::string error = detail::check_scaled_arguments(t, indices, grads, lr, op);
  if (error.empty() && n > std::numeric_limits<std::uint32_t>::max()) {
    error = std::string(op) + ": " + std::to_string(n) +
            " indices in one call; at most 2^32 - 1 are supported";
  }
  // 1. Route and check the indices and the source rows on the device; one wait.
  int device = -1;
  detail::bad_index bad;
  std::vector<std::size_t> send_counts(ranks, 0);
  std::uint64_t* keys = nullptr;
  detail::source_check sources;
  table_view source_view;
  bool source_aligned16 = false;
  std::optional<wholememory::device_guard> guard;
  const bool on_device = detail::agrees_on_device(t);
  bool routed = false;
  if (error.empty() || on_device) {
    try {
      device = detail::rank_device(t);
      guard.emplace(device);
      detail::gpu_workspace& ws = detail::workspace(t, device);
      if (!error.empty()) throw std::logic_error("");  // only the workspace was needed
      source_view = grads.source->view(device);
      // Every part of the source starts at a whole row (continuous: one range cut at rows;
      // chunked: parts mapped apart, each at least 16-byte aligned like this one), so its rows
      // are 16-byte aligned where the own part is and dim % 4 == 0 (which the float4 path
      // checks).
      source_aligned16 =
          reinterpret_cast<std::uintptr_t>(grads.source->weights_memory().local_part().ptr) % 16 ==
          0;
      if (n > 0) {
        sources.grads = &grads;
        sources.source_table_rows = static_cast<std::int64_t>(grads.source->rows());
        sources.out = detail::reserve<std::uint64_t>(ws.source_keys, n, device);
        keys =
            detail::route(t, ws, indices, stream, bad, send_counts, &sources, deferred, on_device);
        routed = true;
        if (sources.bad.position >= 0 && bad.position < 0) {
          error = std::string(op) + ": source row " + std::to_string(sources.bad.value) +
                  " at position " + std::to_string(sources.bad.position) +
                  " is outside the source table of " + std::to_string(grads.source->rows()) +
                  " rows; nothing was changed";
        }
      }
    } catch (const std::exception& e) {
      if (error.empty()) error = std::string(op) + ": " + e.what();
    }
  }
  // 2. Every rank learns of every error before anything changes.
  const detail::apply_counts counts =
      on_device && t.gpu ? detail::agree_on_device(t, *t.gpu, op, error, routed, indices,
                                                   &grads.source_rows, lr, stream)
                         : detail::agree_on_apply(t, op, error, bad, send_counts, lr);
  t.step += 1;
  detail::update_rows_args args;
  args.scaled.source = source_view;
  args.source_aligned16 = source_aligned16;
  args.gate = deferred;
  args.update_after = options.update_after;
  if (ranks == 1) {
    if (n == 0) return;
    // 5. One rank: the entries are received as they are, in caller order.
    args.scaled.coefs = grads.coefs;
    args.scaled.source_rows = sources.out;
    detail::update_received(t, *t.gpu, keys, n, args, lr, device, stream);
    return;
  }
  // 3 and 4. Several ranks: each entry goes to the owner of its target row as its key, its
  // source row and its coefficient; the owner reads the source row in place (the source is
  // continuous or chunked: every row is mapped here) when it updates, as one rank does.
  detail::gpu_workspace& ws = *t.gpu;
  const std::size_t m = counts.total_recv();
  WM_EXPECTS(m <= std::numeric_limits<std::uint32_t>::max(),
             op << ": " << m << " entries reached rank " << t.rank()
                << " in one call; at most 2^32 - 1 are supported");
  if (n > 0) {
    std::uint32_t* perm = detail::reserve<std::uint32_t>(ws.perm, n, device);
    std::uint32_t* owner_sorted = detail::reserve<std::uint32_t>(ws.owner_sorted, n, device);
    detail::sort_positions(ws, ws.owner.data_as<std::uint32_t>(), owner_sorted, perm, n,
                           detail::bits_for(static_cast<std::uint64_t>(ranks)), stream);
    detail::pack_scaled<<<detail::grid_for(n), detail::block_threads, 0, stream>>>(
        n, perm, keys, sources.out, grads.coefs,
        detail::reserve<std::uint64_t>(ws.send_keys, n, device),
        reinterpret_cast<std::uint32_t*>(detail::reserve<float>(ws.send_grads, 3 * n, device)));
    WM_CUDA_CHECK_LAUNCH(stream);
  }
  auto* recv_keys = detail::reserve<std::uint64_t>(ws.recv_keys, m, device);
  float* received = detail::reserve<float>(ws.recv_grads, 3 * m, device);
  detail::exchange_rows(t, ws, counts, n, 3, recv_keys, received, stream);
  if (m == 0) return;
  auto* recv_source_rows = detail::reserve<std::uint64_t>(ws.recv_source_rows, m, device);
  auto* recv_coefs = detail::reserve<float>(ws.recv_coefs, m, device);
  detail::unpack_scaled<<<detail::grid_for(m), detail::block_threads, 0, stream>>>(
      m, reinterpret_cast<const std::uint32_t*>(received), recv_source_rows, recv_coefs);
  WM_CUDA_CHECK_LAUNCH(stream);
  args.scaled.coefs = recv_coefs;
  args.scaled.source_rows = recv_source_rows;
  detail::update_received(t, ws, recv_keys, m, args, lr, device, stream);
}

}  // namespace wholestore::embedding
