// The GPU path of gather/scatter: index check, optional address-ordered visiting of host
// memory, duplicate handling for scatter, and the distributed exchange over NCCL.  The copies
// themselves are the launchers of gather_rows.cu, scatter_rows.cu and convert_*.cu.
#include "cuda/gather_launch.hpp"
#include "cuda_memory.hpp"
#include "dtype_dispatch.hpp"
#include "gather_common.hpp"

#include <wholememory/communicator.hpp>
#include <wholememory/cuda_check.hpp>
#include <wholememory/error.hpp>
#include <wholememory/gather.hpp>

#include <cuda_runtime.h>
#include <cub/device/device_radix_sort.cuh>

#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>

namespace wholememory {
namespace detail {

void launch_convert_rows(dtype src_type, const rows_ref& src, index_ref src_idx, dtype dst_type,
                         const rows_ref& dst, index_ref dst_idx, std::size_t n, std::size_t cols,
                         cudaStream_t stream) {
  check_convert_pair(src_type, dst_type);
  if (is_floating(src_type)) {
    launch_convert_rows_float(src_type, src, src_idx, dst_type, dst, dst_idx, n, cols, stream);
  } else {
    launch_convert_rows_int(src_type, src, src_idx, dst_type, dst, dst_idx, n, cols, stream);
  }
}

namespace {

constexpr int block_threads = 256;

/// Stream-ordered scratch memory (cudaMallocAsync), freed on the same stream.
class stream_buffer {
 public:
  stream_buffer(std::size_t bytes, cudaStream_t stream) : stream_(stream) {
    if (bytes > 0) WM_CUDA_TRY(cudaMallocAsync(&ptr_, bytes, stream));
  }
  stream_buffer(const stream_buffer&) = delete;
  stream_buffer& operator=(const stream_buffer&) = delete;
  ~stream_buffer() {
    if (ptr_ != nullptr) WM_CUDA_WARN(cudaFreeAsync(ptr_, stream_));
  }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }

 private:
  void* ptr_ = nullptr;
  cudaStream_t stream_;
};

/// A second stream of the current device for the calling thread, for work that overlaps an
/// exchange on the caller's stream.  Created on first use, kept for the thread's life.
cudaStream_t side_stream() {
  thread_local std::vector<cudaStream_t> streams;
  int device = 0;
  WM_CUDA_TRY(cudaGetDevice(&device));
  if (static_cast<int>(streams.size()) <= device) streams.resize(device + 1, nullptr);
  if (streams[device] == nullptr)
    WM_CUDA_TRY(cudaStreamCreateWithFlags(&streams[device], cudaStreamNonBlocking));
  return streams[device];
}

/// Makes `waiter` wait for the work enqueued on `from` so far.
void stream_wait(cudaStream_t waiter, cudaStream_t from) {
  cudaEvent_t ev;
  WM_CUDA_TRY(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  cudaError_t err = cudaEventRecord(ev, from);
  if (err == cudaSuccess) err = cudaStreamWaitEvent(waiter, ev, 0);
  WM_CUDA_WARN(cudaEventDestroy(ev));  // released once the recorded work completes
  WM_CUDA_TRY(err);
}

int blocks_for_items(std::int64_t n) {
  int device = 0, sms = 0;
  WM_CUDA_TRY(cudaGetDevice(&device));
  WM_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  std::int64_t needed = (n + block_threads - 1) / block_threads;
  return static_cast<int>(std::max<std::int64_t>(1, std::min<std::int64_t>(needed, sms * 8LL)));
}

// result[0]: the smallest bad position (all ones when none).
template <typename IndexT>
__global__ void find_bad_index_kernel(const IndexT* __restrict__ idx, std::int64_t n,
                                      std::int64_t rows, unsigned long long* result) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const std::int64_t v = static_cast<std::int64_t>(idx[i]);
    if (v < 0 || v >= rows) {
      atomicMin(result, static_cast<unsigned long long>(i));
      return;  // later entries of this thread come after i
    }
  }
}

/// result[1] = the index at position result[0], when that names one (distributed memory).
template <typename IndexT>
__global__ void record_bad_value_kernel(const IndexT* idx, unsigned long long* result) {
  if (result[0] != ~0ull)
    result[1] = static_cast<unsigned long long>(static_cast<long long>(idx[result[0]]));
}

__global__ void iota_kernel(std::int64_t* out, std::int64_t n) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride)
    out[i] = i;
}

// Sorted keys: all but the last entry of each run of equal keys get position -1 (skipped), so
// the last occurrence in the caller's list wins (the sort is stable).
template <typename KeyT>
__global__ void drop_duplicates_kernel(const KeyT* __restrict__ keys, std::int64_t* positions,
                                       std::int64_t n) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i + 1 < n;
       i += stride)
    if (keys[i] == keys[i + 1]) positions[i] = -1;
}

/// Owner rank of every index, and per-owner counts.  Counting goes through a per-block
/// histogram in shared memory with one add per warp and owner (__match_any_sync): millions of
/// global atomics on a handful of counters serialize in L2 and cost more than the pass itself.
template <typename IndexT>
__global__ void owner_kernel(const IndexT* __restrict__ idx, std::int64_t n,
                             const std::int64_t* __restrict__ row_begin, int ranks, int* owner,
                             unsigned long long* counts) {
  extern __shared__ unsigned long long block_counts[];
  for (int r = threadIdx.x; r < ranks; r += blockDim.x) block_counts[r] = 0;
  __syncthreads();
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const std::int64_t v = static_cast<std::int64_t>(idx[i]);
    int lo = 0, hi = ranks - 1;  // last rank whose first row is <= v
    while (lo < hi) {
      int mid = (lo + hi + 1) / 2;
      if (row_begin[mid] <= v) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    owner[i] = lo;
    const bool valid = v >= 0 && v < row_begin[ranks];
    // Out-of-range indices count nowhere (the call fails before any exchange).
    const int key = valid ? lo : -1;
    const unsigned same = __match_any_sync(__activemask(), key);
    const int leader = __ffs(same) - 1;
    if (valid && (threadIdx.x & 31) == leader)
      atomicAdd(block_counts + lo, static_cast<unsigned long long>(__popc(same)));
  }
  __syncthreads();
  for (int r = threadIdx.x; r < ranks; r += blockDim.x)
    if (block_counts[r] != 0) atomicAdd(counts + r, block_counts[r]);
}

// meta[2r] = rows asked of rank r, meta[2r + 1] = whether this rank had a bad index.
__global__ void meta_kernel(const unsigned long long* counts, const unsigned long long* result,
                            int ranks, std::int64_t* meta) {
  for (int r = threadIdx.x; r < ranks; r += blockDim.x) {
    meta[2 * r] = static_cast<std::int64_t>(counts[r]);
    meta[2 * r + 1] = result[0] != ~0ull ? 1 : 0;
  }
}

template <typename IndexT>
__global__ void local_rows_kernel(const IndexT* __restrict__ idx,
                                  const std::int64_t* __restrict__ positions,
                                  const int* __restrict__ owners,
                                  const std::int64_t* __restrict__ row_begin, std::int64_t n,
                                  std::int64_t* local_rows) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t k = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < n;
       k += stride)
    local_rows[k] = static_cast<std::int64_t>(idx[positions[k]]) - row_begin[owners[k]];
}

int key_bits(std::uint64_t max_key) {
  int bits = 1;
  while (bits < 64 && (max_key >> bits) != 0) ++bits;
  return bits;
}

/// Sorts (key, position) pairs by key (stable); positions start as 0..n-1.
template <typename KeyT>
void sort_by_key(const KeyT* keys, KeyT* keys_out, std::int64_t* positions_out, std::int64_t n,
                 std::uint64_t max_key, cudaStream_t stream) {
  stream_buffer iota(n * sizeof(std::int64_t), stream);
  iota_kernel<<<blocks_for_items(n), block_threads, 0, stream>>>(iota.as<std::int64_t>(), n);
  WM_CUDA_CHECK_LAUNCH(stream);
  const int bits = key_bits(max_key);
  std::size_t temp_bytes = 0;
  WM_CUDA_TRY(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, keys, keys_out,
                                              iota.as<std::int64_t>(), positions_out, n, 0, bits,
                                              stream));
  stream_buffer temp(temp_bytes, stream);
  WM_CUDA_TRY(cub::DeviceRadixSort::SortPairs(temp.as<void>(), temp_bytes, keys, keys_out,
                                              iota.as<std::int64_t>(), positions_out, n, 0, bits,
                                              stream));
}

int current_device() {
  int device = 0;
  WM_CUDA_TRY(cudaGetDevice(&device));
  return device;
}

rows_ref dense_rows(const dense_matrix& m, std::size_t stride_bytes) {
  rows_ref r;
  r.base = static_cast<char*>(m.data);
  r.stride_bytes = stride_bytes;
  r.address_bits = reinterpret_cast<std::uintptr_t>(m.data);
  return r;
}

rows_ref packed_rows(void* base, std::size_t row_bytes) {
  rows_ref r;
  r.base = static_cast<char*>(base);
  r.stride_bytes = row_bytes;
  r.address_bits = reinterpret_cast<std::uintptr_t>(base);
  return r;
}

/// Continuous or chunked table as the kernels of the current device see it.
rows_ref table_rows(const wm_tensor& t, const gather_geometry& g) {
  const wholememory& wm = *t.memory;
  rows_ref r;
  r.stride_bytes = g.stride_bytes;
  r.col_offset_bytes = g.col_offset_bytes;
  if (wm.type() == memory_type::continuous) {
    r.base = static_cast<char*>(wm.data());
    r.address_bits = reinterpret_cast<std::uintptr_t>(r.base);
  } else {
    r.view = wm.device_view(current_device());
    for (int p = 0; p < wm.num_parts(); ++p)
      r.address_bits |= reinterpret_cast<std::uintptr_t>(wm.part(p).ptr);
  }
  return r;
}

/// The calling thread's word for the index check on the current device, and its pinned
/// host copy: allocated once, kept for the thread's life (like side_stream), so a check costs
/// no allocation and its copy back is a plain DMA.
struct check_word {
  unsigned long long* device = nullptr;
  unsigned long long* host = nullptr;
};
check_word& thread_check_word() {
  thread_local std::vector<check_word> words;
  int device = 0;
  WM_CUDA_TRY(cudaGetDevice(&device));
  if (static_cast<int>(words.size()) <= device) words.resize(device + 1);
  check_word& w = words[device];
  if (w.device == nullptr) {
    void* d = nullptr;
    allocate_device_buffer(sizeof(unsigned long long), device, &d).release();  // kept
    void* h = nullptr;
    WM_CUDA_TRY(cudaHostAlloc(&h, sizeof(unsigned long long), cudaHostAllocDefault));
    w.device = static_cast<unsigned long long*>(d);
    w.host = static_cast<unsigned long long*>(h);
  }
  return w;
}

/// Checks the indices on the device; one 8-byte copy back and a stream synchronization (a
/// bad index costs one more copy, of its value).
template <typename IndexT>
bad_index check_indices(const IndexT* idx, std::size_t n, std::size_t rows, cudaStream_t stream) {
  if (n == 0) return {};
  check_word& w = thread_check_word();
  WM_CUDA_TRY(cudaMemsetAsync(w.device, 0xff, sizeof(unsigned long long), stream));
  const auto sn = static_cast<std::int64_t>(n);
  find_bad_index_kernel<<<blocks_for_items(sn), block_threads, 0, stream>>>(
      idx, sn, static_cast<std::int64_t>(rows), w.device);
  WM_CUDA_CHECK_LAUNCH(stream);
  WM_CUDA_TRY(cudaMemcpyAsync(w.host, w.device, sizeof(unsigned long long), cudaMemcpyDeviceToHost,
                              stream));
  WM_CUDA_TRY(cudaStreamSynchronize(stream));
  if (*w.host == ~0ull) return {};
  const auto position = static_cast<std::int64_t>(*w.host);
  IndexT value = 0;
  WM_CUDA_TRY(cudaMemcpyAsync(&value, idx + position, sizeof value, cudaMemcpyDefault, stream));
  WM_CUDA_TRY(cudaStreamSynchronize(stream));
  return bad_index{position, static_cast<std::int64_t>(value)};
}

bool sorts_host(const wm_tensor& t, std::size_t n, const gather_options& options) {
  return t.memory->location() == memory_location::host && n >= options.sort_host_threshold;
}

/// Entry i copies table-like rows src[src_idx[i]] to dst[dst_pos[i]] (i when nullptr),
/// same-dtype or converting.  The gather shape: any index type on the source side.
template <typename SrcIdx>
void gather_entries(std::size_t cols, dtype src_type, const rows_ref& src, const SrcIdx* src_idx,
                    dtype dst_type, const rows_ref& dst, const std::int64_t* dst_pos, std::size_t n,
                    std::size_t src_row_bytes, cudaStream_t stream) {
  if (n == 0 || cols == 0) return;
  if (src_type == dst_type) {
    launch_gather_rows(src, src_idx, dst, dst_pos, n, src_row_bytes, stream);
    return;
  }
  launch_convert_rows(src_type, src, index_ref{src_idx, std::is_same<SrcIdx, std::int64_t>::value},
                      dst_type, dst, index_ref{dst_pos, true}, n, cols, stream);
}

/// Entry i copies src[src_pos[i]] (i when nullptr) to dst[dst_idx[i]].  The scatter shape.
template <typename DstIdx>
void place_entries(std::size_t cols, dtype src_type, const rows_ref& src,
                   const std::int64_t* src_pos, dtype dst_type, const rows_ref& dst,
                   const DstIdx* dst_idx, std::size_t n, std::size_t src_row_bytes,
                   cudaStream_t stream) {
  if (n == 0 || cols == 0) return;
  if (src_type == dst_type) {
    launch_scatter_rows(src, src_pos, dst, dst_idx, n, src_row_bytes, stream);
    return;
  }
  launch_convert_rows(src_type, src, index_ref{src_pos, true}, dst_type, dst,
                      index_ref{dst_idx, std::is_same<DstIdx, std::int64_t>::value}, n, cols,
                      stream);
}

// order[k] = src_pos[order[k]], keeping -1 (a dropped duplicate).
__global__ void compose_kernel(std::int64_t* order, const std::int64_t* __restrict__ src_pos,
                               std::int64_t n) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t k = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < n;
       k += stride)
    if (order[k] >= 0) order[k] = src_pos[order[k]];
}

/// Writes entry i of `src` (row src_pos[i], or i when nullptr) to `dst` row idx[i].  With
/// `sort_rows`, drops all but the last of duplicate indices: sorts by destination row, stable
/// (which also puts host-memory writes in address order).
template <typename IndexT>
void scatter_entries(std::size_t cols, dtype src_type, const rows_ref& src,
                     const std::int64_t* src_pos, dtype dst_type, const rows_ref& dst,
                     const IndexT* idx, std::size_t n, std::size_t dst_rows,
                     std::size_t src_row_bytes, bool sort_rows, cudaStream_t stream) {
  if (n == 0 || cols == 0) return;
  if (!sort_rows) {
    place_entries(cols, src_type, src, src_pos, dst_type, dst, idx, n, src_row_bytes, stream);
    return;
  }
  const auto sn = static_cast<std::int64_t>(n);
  stream_buffer keys(n * sizeof(IndexT), stream);
  stream_buffer order(n * sizeof(std::int64_t), stream);
  sort_by_key(idx, keys.as<IndexT>(), order.as<std::int64_t>(), sn,
              dst_rows == 0 ? 0 : dst_rows - 1, stream);
  drop_duplicates_kernel<<<blocks_for_items(sn), block_threads, 0, stream>>>(
      keys.as<IndexT>(), order.as<std::int64_t>(), sn);
  WM_CUDA_CHECK_LAUNCH(stream);
  if (src_pos != nullptr) {
    compose_kernel<<<blocks_for_items(sn), block_threads, 0, stream>>>(order.as<std::int64_t>(),
                                                                       src_pos, sn);
    WM_CUDA_CHECK_LAUNCH(stream);
  }
  place_entries(cols, src_type, src, order.as<std::int64_t>(), dst_type, dst, keys.as<IndexT>(), n,
                src_row_bytes, stream);
}

// ---- distributed memory over NCCL -----------------------------------------------------------

/// The exchange plan of one distributed call, in device memory, plus host counts.
struct device_exchange {
  std::vector<std::size_t> send_counts, send_displs, recv_counts, recv_displs;
  std::size_t recv_total = 0;
  std::unique_ptr<stream_buffer> positions;   // caller positions, bucket order (int64)
  std::unique_ptr<stream_buffer> send_rows;   // owner-local row of every entry, bucket order
  std::unique_ptr<stream_buffer> local_rows;  // rows of the own part asked for (int64)
  /// The own bucket [self_begin, self_begin + self_count) when it skips the exchange.
  std::size_t self_begin = 0, self_count = 0;
};

communicator& nccl_comm_of(const wholememory& wm, const char* op) {
  communicator& comm = wm.comm();
  WM_EXPECTS(comm.get_backend() == backend::nccl,
             op << " on distributed memory exchanges rows through NCCL; this allocation's "
                   "communicator is "
                << backend_name(comm.get_backend()) << " (use " << op
                << "_host, or create the memory with an NCCL communicator)");
  return comm;
}

std::vector<std::size_t> scaled(const std::vector<std::size_t>& v, std::size_t factor) {
  std::vector<std::size_t> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = v[i] * factor;
  return out;
}

/// Checks the indices on every rank, buckets them by owner and sends every owner the rows
/// asked of it.  With skip_self the own bucket stays out of the exchanges (the caller copies
/// it directly): self counts are 0, send displacements keep its gap, receive ones do not.
template <typename IndexT>
device_exchange plan_exchange_device(communicator& comm, const IndexT* idx, std::size_t n,
                                     const gather_geometry& g, std::size_t rows, const char* op,
                                     bool skip_self, cudaStream_t stream) {
  const int ranks = comm.size();
  const auto sn = static_cast<std::int64_t>(n);
  // Control block: result[2] | meta_recv[2R] | meta_send[2R] | counts[R] | row_begin[R + 1].
  const std::size_t words = 2 + 4 * ranks + ranks + ranks + 1;
  stream_buffer ctl(words * 8, stream);
  auto* result = ctl.as<unsigned long long>();
  auto* meta_recv = ctl.as<std::int64_t>() + 2;
  auto* meta_send = meta_recv + 2 * ranks;
  auto* counts = reinterpret_cast<unsigned long long*>(meta_send + 2 * ranks);
  auto* row_begin = reinterpret_cast<std::int64_t*>(counts + ranks);
  WM_CUDA_TRY(cudaMemsetAsync(ctl.as<void>(), 0, words * 8, stream));
  WM_CUDA_TRY(cudaMemsetAsync(result, 0xff, 2 * 8, stream));
  WM_CUDA_TRY(cudaMemcpyAsync(row_begin, g.owner_row_begin.data(), (ranks + 1) * 8,
                              cudaMemcpyHostToDevice, stream));
  stream_buffer owner(n * sizeof(int), stream);
  if (n > 0) {
    find_bad_index_kernel<<<blocks_for_items(sn), block_threads, 0, stream>>>(
        idx, sn, static_cast<std::int64_t>(rows), result);
    WM_CUDA_CHECK_LAUNCH(stream);
    record_bad_value_kernel<<<1, 1, 0, stream>>>(idx, result);
    WM_CUDA_CHECK_LAUNCH(stream);
    owner_kernel<<<blocks_for_items(sn), block_threads, ranks * sizeof(unsigned long long),
                   stream>>>(idx, sn, row_begin, ranks, owner.as<int>(), counts);
    WM_CUDA_CHECK_LAUNCH(stream);
  }
  meta_kernel<<<1, 128, 0, stream>>>(counts, result, ranks, meta_send);
  WM_CUDA_CHECK_LAUNCH(stream);
  std::vector<std::size_t> two(ranks, 2), displs(ranks);
  for (int r = 0; r < ranks; ++r) displs[r] = 2 * static_cast<std::size_t>(r);
  comm.alltoallv(meta_send, two.data(), displs.data(), meta_recv, two.data(), displs.data(),
                 dtype::int64, stream);
  std::vector<std::int64_t> host(2 + 4 * ranks);
  WM_CUDA_TRY(cudaMemcpyAsync(host.data(), ctl.as<void>(), host.size() * 8, cudaMemcpyDeviceToHost,
                              stream));
  comm.synchronize(stream);
  WM_CUDA_TRY(cudaStreamSynchronize(stream));

  std::vector<std::int64_t> flags(ranks);
  for (int r = 0; r < ranks; ++r) flags[r] = host[2 + 2 * r + 1];
  bad_index mine;
  if (static_cast<unsigned long long>(host[0]) != ~0ull) mine = bad_index{host[0], host[1]};
  agree_on_bad_indices(op, flags, comm.rank(), mine, rows);

  device_exchange x;
  x.send_counts.resize(ranks);
  x.send_displs.assign(ranks, 0);
  x.recv_counts.resize(ranks);
  x.recv_displs.assign(ranks, 0);
  for (int r = 0; r < ranks; ++r) {
    x.recv_counts[r] = static_cast<std::size_t>(host[2 + 2 * r]);
    x.send_counts[r] = static_cast<std::size_t>(host[2 + 2 * ranks + 2 * r]);
  }
  for (int r = 1; r < ranks; ++r) x.send_displs[r] = x.send_displs[r - 1] + x.send_counts[r - 1];
  const int me = comm.rank();
  if (skip_self) {
    x.self_begin = x.send_displs[me];
    x.self_count = x.send_counts[me];
    x.send_counts[me] = 0;
    x.recv_counts[me] = 0;
  }
  for (int r = 1; r < ranks; ++r) x.recv_displs[r] = x.recv_displs[r - 1] + x.recv_counts[r - 1];
  x.recv_total = x.recv_displs[ranks - 1] + x.recv_counts[ranks - 1];

  // Bucket by owner (stable), then the rows local to each owner.
  x.positions = std::make_unique<stream_buffer>(n * 8, stream);
  x.send_rows = std::make_unique<stream_buffer>(n * 8, stream);
  stream_buffer& send_rows = *x.send_rows;
  if (n > 0) {
    stream_buffer owner_sorted(n * sizeof(int), stream);
    sort_by_key(owner.as<int>(), owner_sorted.as<int>(), x.positions->as<std::int64_t>(), sn,
                static_cast<std::uint64_t>(ranks - 1), stream);
    local_rows_kernel<<<blocks_for_items(sn), block_threads, 0, stream>>>(
        idx, x.positions->as<std::int64_t>(), owner_sorted.as<int>(), row_begin, sn,
        send_rows.as<std::int64_t>());
    WM_CUDA_CHECK_LAUNCH(stream);
  }
  x.local_rows = std::make_unique<stream_buffer>(x.recv_total * 8, stream);
  comm.alltoallv(send_rows.as<std::int64_t>(), x.send_counts.data(), x.send_displs.data(),
                 x.local_rows->as<std::int64_t>(), x.recv_counts.data(), x.recv_displs.data(),
                 dtype::int64, stream);
  return x;
}

rows_ref own_part_rows(const wholememory& wm, const gather_geometry& g) {
  part_info mine = wm.local_part();
  rows_ref r;
  r.base = static_cast<char*>(mine.ptr);
  r.stride_bytes = g.stride_bytes;
  r.col_offset_bytes = g.col_offset_bytes;
  r.address_bits = reinterpret_cast<std::uintptr_t>(mine.ptr);
  return r;
}

template <typename IndexT>
void gather_distributed(const wm_tensor& table, const IndexT* idx, const dense_matrix& out,
                        const gather_geometry& g, const gather_options& options,
                        cudaStream_t stream) {
  const char* op = "gather";
  communicator& comm = nccl_comm_of(*table.memory, op);
  device_exchange x =
      plan_exchange_device(comm, idx, g.count, g, table.rows, op, /*skip_self=*/true, stream);
  const std::size_t row_bytes = g.table_row_bytes;
  const rows_ref own = own_part_rows(*table.memory, g);
  const rows_ref dense = dense_rows(out, g.dense_stride_bytes);
  const std::int64_t* positions = x.positions->as<std::int64_t>();
  // Host-located parts are read in address order when the call is large (as for continuous
  // memory): the rows land at their packed positions, so only the visiting order changes.
  const bool sorted_visit = sorts_host(table, g.count, options);
  const std::uint64_t own_rows_max = static_cast<std::uint64_t>(g.owner_row_begin[comm.rank() + 1] -
                                                                g.owner_row_begin[comm.rank()]);
  auto read_own = [&](const std::int64_t* rows, std::size_t n, const rows_ref& packed,
                      cudaStream_t on) {
    if (!sorted_visit || n == 0) {
      gather_entries(table.cols, table.type, own, rows, table.type, packed, nullptr, n, row_bytes,
                     on);
      return;
    }
    stream_buffer keys(n * sizeof(std::int64_t), on);
    stream_buffer order(n * sizeof(std::int64_t), on);
    sort_by_key(rows, keys.as<std::int64_t>(), order.as<std::int64_t>(),
                static_cast<std::int64_t>(n), own_rows_max, on);
    gather_entries(table.cols, table.type, own, keys.as<std::int64_t>(), table.type, packed,
                   order.as<std::int64_t>(), n, row_bytes, on);
  };
  // Rows asked of this rank by the others, packed in the table's dtype.
  stream_buffer send(x.recv_total * row_bytes, stream);
  read_own(x.local_rows->as<std::int64_t>(), x.recv_total, packed_rows(send.as<void>(), row_bytes),
           stream);
  // The own bucket goes from the own part to its caller positions on a side stream, while the
  // exchange runs (through a packed buffer when the visit is sorted, since the sorted order
  // scrambles the caller positions).  The positions it writes are disjoint from the received
  // rows' positions.
  const cudaStream_t side = side_stream();
  stream_wait(side, stream);
  // Joins on every exit, exceptions included, before the buffers above are freed on `stream`.
  struct join_on_exit {
    cudaStream_t stream, side;
    ~join_on_exit() {
      try {
        stream_wait(stream, side);
      } catch (const std::exception&) {
      }
    }
  } join{stream, side};
  if (!sorted_visit) {
    gather_entries(table.cols, table.type, own, x.send_rows->as<std::int64_t>() + x.self_begin,
                   out.type, dense, positions + x.self_begin, x.self_count, row_bytes, side);
  } else if (x.self_count > 0) {
    stream_buffer mine(x.self_count * row_bytes, side);
    read_own(x.send_rows->as<std::int64_t>() + x.self_begin, x.self_count,
             packed_rows(mine.as<void>(), row_bytes), side);
    place_entries(table.cols, table.type, packed_rows(mine.as<void>(), row_bytes), nullptr,
                  out.type, dense, positions + x.self_begin, x.self_count, row_bytes, side);
  }
  // Received rows land in bucket order, leaving the own bucket's gap.
  stream_buffer recv(g.count * row_bytes, stream);
  comm.alltoallv(send.as<void>(), scaled(x.recv_counts, row_bytes).data(),
                 scaled(x.recv_displs, row_bytes).data(), recv.as<void>(),
                 scaled(x.send_counts, row_bytes).data(), scaled(x.send_displs, row_bytes).data(),
                 dtype::uint8, stream);
  // Place every received row at its caller position (distinct positions: no duplicates).
  const std::size_t ranges[2][2] = {{0, x.self_begin}, {x.self_begin + x.self_count, g.count}};
  for (const auto& range : ranges) {
    const std::size_t b = range[0], e = range[1];
    if (e <= b) continue;
    place_entries(table.cols, table.type, packed_rows(recv.as<char>() + b * row_bytes, row_bytes),
                  nullptr, out.type, dense, positions + b, e - b, row_bytes, stream);
  }
}

template <typename IndexT>
void scatter_distributed(const dense_matrix& in, const IndexT* idx, const wm_tensor& table,
                         const gather_geometry& g, const gather_options& options,
                         cudaStream_t stream) {
  const char* op = "scatter";
  communicator& comm = nccl_comm_of(*table.memory, op);
  device_exchange x =
      plan_exchange_device(comm, idx, g.count, g, table.rows, op, /*skip_self=*/true, stream);
  const std::size_t row_bytes = g.table_row_bytes;
  const rows_ref dense = dense_rows(in, g.dense_stride_bytes);
  const rows_ref own = own_part_rows(*table.memory, g);
  const std::int64_t* positions = x.positions->as<std::int64_t>();
  const std::size_t in_row_bytes = table.cols * g.dense_elem_bytes;
  // Pack the rows for the other ranks in bucket order, converted to the table's dtype; the own
  // bucket's gap stays unsent.
  stream_buffer send(g.count * row_bytes, stream);
  const std::size_t ranges[2][2] = {{0, x.self_begin}, {x.self_begin + x.self_count, g.count}};
  for (const auto& range : ranges) {
    const std::size_t b = range[0], e = range[1];
    if (e <= b) continue;
    gather_entries(table.cols, in.type, dense, positions + b, table.type,
                   packed_rows(send.as<char>() + b * row_bytes, row_bytes), nullptr, e - b,
                   in_row_bytes, stream);
  }
  stream_buffer recv(x.recv_total * row_bytes, stream);
  comm.alltoallv(send.as<void>(), scaled(x.send_counts, row_bytes).data(),
                 scaled(x.send_displs, row_bytes).data(), recv.as<void>(),
                 scaled(x.recv_counts, row_bytes).data(), scaled(x.recv_displs, row_bytes).data(),
                 dtype::uint8, stream);
  // Write in rank order (lower ranks' rows, the own rows, higher ranks' rows): the last
  // occurrence in rank order wins for duplicates.
  const int me = comm.rank();
  const auto own_rows = static_cast<std::size_t>(g.owner_row_begin[me + 1] - g.owner_row_begin[me]);
  const std::size_t before = x.recv_displs[me];
  const std::int64_t* local_rows = x.local_rows->as<std::int64_t>();
  const bool sort_rows =
      !options.unique_indices ||
      (table.memory->location() == memory_location::host && g.count >= options.sort_host_threshold);
  scatter_entries(table.cols, table.type, packed_rows(recv.as<void>(), row_bytes), nullptr,
                  table.type, own, local_rows, before, own_rows, row_bytes, sort_rows, stream);
  scatter_entries(table.cols, in.type, dense, positions + x.self_begin, table.type, own,
                  x.send_rows->as<std::int64_t>() + x.self_begin, x.self_count, own_rows,
                  in_row_bytes, sort_rows, stream);
  scatter_entries(table.cols, table.type,
                  packed_rows(recv.as<char>() + before * row_bytes, row_bytes), nullptr, table.type,
                  own, local_rows + before, x.recv_total - before, own_rows, row_bytes, sort_rows,
                  stream);
}

// ---- continuous and chunked -----------------------------------------------------------------

template <typename IndexT>
void gather_typed(const wm_tensor& table, const IndexT* idx, const dense_matrix& out,
                  const gather_geometry& g, const gather_options& options, cudaStream_t stream) {
  if (table.memory->type() == memory_type::distributed) {
    gather_distributed(table, idx, out, g, options, stream);
    return;
  }
  bad_index bad = check_indices(idx, g.count, table.rows, stream);
  if (bad.position >= 0) throw_bad_index("gather", bad, table.rows);
  if (g.count == 0 || table.cols == 0) return;
  const rows_ref src = table_rows(table, g);
  const rows_ref dst = dense_rows(out, g.dense_stride_bytes);
  if (!sorts_host(table, g.count, options)) {
    gather_entries(table.cols, table.type, src, idx, out.type, dst, nullptr, g.count,
                   g.table_row_bytes, stream);
    return;
  }
  // Visit the host rows in address order, writing each to its original position.
  stream_buffer keys(g.count * sizeof(IndexT), stream);
  stream_buffer positions(g.count * sizeof(std::int64_t), stream);
  sort_by_key(idx, keys.as<IndexT>(), positions.as<std::int64_t>(),
              static_cast<std::int64_t>(g.count), table.rows - 1, stream);
  gather_entries(table.cols, table.type, src, keys.as<IndexT>(), out.type, dst,
                 positions.as<std::int64_t>(), g.count, g.table_row_bytes, stream);
}

template <typename IndexT>
void scatter_typed(const dense_matrix& in, const IndexT* idx, const wm_tensor& table,
                   const gather_geometry& g, const gather_options& options, cudaStream_t stream) {
  if (table.memory->type() == memory_type::distributed) {
    scatter_distributed(in, idx, table, g, options, stream);
    return;
  }
  bad_index bad = check_indices(idx, g.count, table.rows, stream);
  if (bad.position >= 0) throw_bad_index("scatter", bad, table.rows);
  const bool sort_rows = !options.unique_indices || sorts_host(table, g.count, options);
  scatter_entries(table.cols, in.type, dense_rows(in, g.dense_stride_bytes), nullptr, table.type,
                  table_rows(table, g), idx, g.count, table.rows, table.cols * g.dense_elem_bytes,
                  sort_rows, stream);
}

}  // namespace
}  // namespace detail

void gather(const wm_tensor& table, const index_array& indices, const dense_matrix& out,
            const gather_options& options, cudaStream_t stream) {
  detail::gather_geometry g = detail::check_arguments(table, indices, out, "gather");
  if (indices.type == dtype::int32) {
    detail::gather_typed(table, static_cast<const std::int32_t*>(indices.data), out, g, options,
                         stream);
  } else {
    detail::gather_typed(table, static_cast<const std::int64_t*>(indices.data), out, g, options,
                         stream);
  }
}

void gather(const wm_tensor& table, const index_array& indices, const dense_matrix& out,
            cudaStream_t stream) {
  gather(table, indices, out, gather_options{}, stream);
}

void gather_unchecked_async(const wm_tensor& table, const index_array& indices,
                            const dense_matrix& out, cudaStream_t stream) {
  detail::gather_geometry g =
      detail::check_arguments(table, indices, out, "gather_unchecked_async");
  WM_EXPECTS(table.memory->type() != memory_type::distributed,
             "gather_unchecked_async: distributed memory needs the exchange of gather()");
  WM_EXPECTS(g.same_type, "gather_unchecked_async: the table holds "
                              << dtype_name(table.type) << ", the output " << dtype_name(out.type)
                              << "; conversions need gather()");
  if (g.count == 0 || table.cols == 0) return;
  const detail::rows_ref src = detail::table_rows(table, g);
  const detail::rows_ref dst = detail::dense_rows(out, g.dense_stride_bytes);
  if (indices.type == dtype::int32) {
    detail::launch_gather_rows(src, static_cast<const std::int32_t*>(indices.data), dst, nullptr,
                               g.count, g.table_row_bytes, stream);
  } else {
    detail::launch_gather_rows(src, static_cast<const std::int64_t*>(indices.data), dst, nullptr,
                               g.count, g.table_row_bytes, stream);
  }
}

void scatter(const dense_matrix& in, const index_array& indices, const wm_tensor& table,
             const gather_options& options, cudaStream_t stream) {
  detail::gather_geometry g = detail::check_arguments(table, indices, in, "scatter");
  if (indices.type == dtype::int32) {
    detail::scatter_typed(in, static_cast<const std::int32_t*>(indices.data), table, g, options,
                          stream);
  } else {
    detail::scatter_typed(in, static_cast<const std::int64_t*>(indices.data), table, g, options,
                          stream);
  }
}

void scatter(const dense_matrix& in, const index_array& indices, const wm_tensor& table,
             cudaStream_t stream) {
  scatter(in, indices, table, gather_options{}, stream);
}

}  // namespace wholememory
