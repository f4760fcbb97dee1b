// The GPU path of gather/scatter: index check, optional address-ordered visiting of host
// memory, duplicate handling for scatter, the continuous and chunked path and the entry points.
// The distributed exchange over NCCL is in gather_exchange.cu (shared internals in
// gather_device_common.cuh); the copies themselves are the launchers of gather_rows.cu,
// scatter_rows.cu and convert_*.cu.
#include "cuda/gather_device_common.cuh"
#include "cuda/gather_launch.hpp"
#include "cuda_memory.hpp"
#include "dtype_dispatch.hpp"
#include "gather_common.hpp"

#include <wholememory/communicator.hpp>
#include <wholememory/cuda_check.hpp>
#include <wholememory/cuda_stream.hpp>
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

cudaStream_t side_stream(int which) {
  constexpr int per_device = 3;
  WM_EXPECTS(which >= 0 && which < per_device, "side_stream: no side stream " << which);
  // Destroyed with the thread (the vector's destructor at thread exit); CUDA releases each
  // stream once the work enqueued on it has finished.
  thread_local std::vector<cuda_stream> streams;
  int device = 0;
  WM_CUDA_TRY(cudaGetDevice(&device));
  const std::size_t at = static_cast<std::size_t>(device) * per_device + which;
  while (streams.size() <= at) streams.emplace_back(nullptr);
  if (streams[at].value() == nullptr) streams[at] = cuda_stream(stream_flags::non_blocking);
  return streams[at];
}

/// Makes `waiter` wait for the work enqueued on `from` so far.
void stream_wait(cudaStream_t waiter, cudaStream_t from) {
  cuda_event ev(event_flags::disable_timing);  // released once the recorded work completes
  ev.record(from);
  ev.wait(waiter);
}

int resident_blocks(const void* kernel, int (*query)(const void*)) {
  struct entry {
    int device;
    const void* kernel;
    int blocks;
  };
  thread_local std::vector<entry> known;
  int device = 0;
  WM_CUDA_TRY(cudaGetDevice(&device));
  for (const entry& e : known)
    if (e.device == device && e.kernel == kernel) return e.blocks;
  int sms = 0;
  WM_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const int blocks = sms * std::max(query(kernel), 1);
  known.push_back(entry{device, kernel, blocks});
  return blocks;
}

int blocks_for_items(std::int64_t n) {
  int device = 0, sms = 0;
  WM_CUDA_TRY(cudaGetDevice(&device));
  WM_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  std::int64_t needed = (n + block_threads - 1) / block_threads;
  return static_cast<int>(std::max<std::int64_t>(1, std::min<std::int64_t>(needed, sms * 8LL)));
}

namespace {

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

int key_bits(std::uint64_t max_key) {
  int bits = 1;
  while (bits < 64 && (max_key >> bits) != 0) ++bits;
  return bits;
}

}  // namespace

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

bool sorts_host(const wm_tensor& t, std::size_t n, const gather_options& options) {
  return t.memory->location() == memory_location::host && n >= options.sort_host_threshold;
}

namespace {

// order[k] = src_pos[order[k]], keeping -1 (a dropped duplicate).
__global__ void compose_kernel(std::int64_t* order, const std::int64_t* __restrict__ src_pos,
                               std::int64_t n) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t k = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < n;
       k += stride)
    if (order[k] >= 0) order[k] = src_pos[order[k]];
}

}  // namespace

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

template void sort_by_key<std::int32_t>(const std::int32_t*, std::int32_t*, std::int64_t*,
                                        std::int64_t, std::uint64_t, cudaStream_t);
template void sort_by_key<std::int64_t>(const std::int64_t*, std::int64_t*, std::int64_t*,
                                        std::int64_t, std::uint64_t, cudaStream_t);
template void scatter_entries<std::int32_t>(std::size_t, dtype, const rows_ref&,
                                            const std::int64_t*, dtype, const rows_ref&,
                                            const std::int32_t*, std::size_t, std::size_t,
                                            std::size_t, bool, cudaStream_t);
template void scatter_entries<std::int64_t>(std::size_t, dtype, const rows_ref&,
                                            const std::int64_t*, dtype, const rows_ref&,
                                            const std::int64_t*, std::size_t, std::size_t,
                                            std::size_t, bool, cudaStream_t);

namespace {

int current_device() {
  int device = 0;
  WM_CUDA_TRY(cudaGetDevice(&device));
  return device;
}

/// Continuous or chunked table as the kernels of the current device see it.
/// Distributed device memory of a one-rank job: the one part holds every row on this rank's
/// GPU, so gather and scatter read and write it as continuous memory instead of exchanging
/// rows with nobody (the exchange's bucketing, copies and waits made a one-rank lookup 2-5x
/// slower than a continuous one).
bool whole_table_local(const allocation& wm) {
  return wm.type() == memory_type::distributed && wm.num_parts() == 1 &&
         wm.location() == memory_location::device && wm.part(0).ptr != nullptr &&
         wm.part(0).device == current_device();
}

rows_ref table_rows(const wm_tensor& t, const gather_geometry& g) {
  const allocation& wm = *t.memory;
  rows_ref r;
  r.stride_bytes = g.stride_bytes;
  r.col_offset_bytes = g.col_offset_bytes;
  if (wm.type() == memory_type::continuous || whole_table_local(wm)) {
    r.base = static_cast<char*>(wm.type() == memory_type::continuous ? wm.data() : wm.part(0).ptr);
    r.address_bits = reinterpret_cast<std::uintptr_t>(r.base);
  } else {
    r.view = wm.device_view(current_device());
    for (int p = 0; p < wm.num_parts(); ++p)
      r.address_bits |= reinterpret_cast<std::uintptr_t>(wm.part(p).ptr);
  }
  return r;
}

/// The calling thread's pinned, device-mapped host word for the index check's result on the
/// current device, and the event that marks the check's end: allocated once per thread and
/// device, so a check costs no host allocation, and freed when the thread ends (the vector of
/// slots is thread_local).  One thread waits for one check at a time, so one word and one event
/// serve all its checks.
struct check_slot {
  pinned_host word;                      // the word as the host reads it
  unsigned long long* mapped = nullptr;  // the same word as the device addresses it
  cuda_event done{nullptr};
  check_slot() = default;
  check_slot(check_slot&&) noexcept = default;  // the vector's growth
  check_slot& operator=(check_slot&&) = delete;
  ~check_slot() {
    // A check whose call threw before waiting for it may still write the word.
    if (done.value() != nullptr) WM_CUDA_WARN(cudaEventSynchronize(done));
  }
};
check_slot& thread_check_slot() {
  thread_local std::vector<check_slot> slots;
  int device = 0;
  WM_CUDA_TRY(cudaGetDevice(&device));
  if (static_cast<int>(slots.size()) <= device) slots.resize(device + 1);
  check_slot& s = slots[device];
  if (s.word.get() == nullptr) {
    pinned_host word(sizeof(unsigned long long), cudaHostAllocMapped);
    void* d = nullptr;
    WM_CUDA_TRY(cudaHostGetDevicePointer(&d, word.get(), 0));
    s.done = cuda_event(event_flags::disable_timing);
    s.word = std::move(word);
    s.mapped = static_cast<unsigned long long*>(d);
  }
  return s;
}

/// The index check, and the last of its blocks to finish copies the verdict (result[0]) to the
/// caller's mapped host word: the check's result reaches the host without a copy in the stream
/// between the check and the row copy.  result[1] counts finished blocks from all ones (the one
/// memset sets both words), so the last block's ticket is gridDim.x - 2, modulo 2^64.
template <typename IndexT>
__global__ void check_and_publish_kernel(const IndexT* __restrict__ idx, std::int64_t n,
                                         std::int64_t rows, unsigned long long* result,
                                         unsigned long long* host_word) {
  scan_for_bad_index(idx, n, rows, result);
  __syncthreads();
  if (threadIdx.x != 0) return;
  __threadfence();  // this block's atomicMin lands before its ticket
  if (atomicAdd(result + 1, 1ull) + 2 != gridDim.x) return;
  __threadfence();
  *static_cast<volatile unsigned long long*>(host_word) =
      *static_cast<volatile unsigned long long*>(result);
  __threadfence_system();
}

/// The index check of a continuous or chunked gather or scatter, enqueued ahead of the copy it
/// guards.  The check kernel writes the first bad position into a device word of this call's
/// own (stream-ordered, so calls on other streams never share it); the copy kernels read the
/// word (rows_ref::skip_word) and copy nothing when it names a position.  The kernel's last
/// block also writes the verdict to the thread's mapped host word, and the host waits for the
/// event behind the check only: the GPU runs check and copy back to back, and the caller's
/// stream goes on while the host reads the result.  A bad index costs a stream synchronization
/// (the skipped copy ends first) and one more copy, of its value.
template <typename IndexT>
class index_check {
 public:
  index_check(const IndexT* idx, std::size_t n, std::size_t rows, cudaStream_t stream)
      : idx_(idx),
        n_(n),
        stream_(stream),
        word_(n > 0 ? 2 * sizeof(unsigned long long) : 0, stream) {
    if (n == 0) return;
    slot_ = &thread_check_slot();
    WM_CUDA_TRY(cudaMemsetAsync(word_.as<unsigned long long>(), 0xff,
                                2 * sizeof(unsigned long long), stream));
    const auto sn = static_cast<std::int64_t>(n);
    check_and_publish_kernel<<<blocks_for_items(sn), block_threads, 0, stream>>>(
        idx, sn, static_cast<std::int64_t>(rows), word_.as<unsigned long long>(), slot_->mapped);
    WM_CUDA_CHECK_LAUNCH(stream);
    slot_->done.record(stream);
  }

  /// The word for rows_ref::skip_word (nullptr when there is nothing to check).
  const unsigned long long* word() const { return word_.as<unsigned long long>(); }

  /// Waits for the check; the first bad index, if any.
  bad_index result() {
    if (n_ == 0) return {};
    slot_->done.synchronize();
    const unsigned long long verdict =
        *static_cast<volatile unsigned long long*>(slot_->word.as<unsigned long long>());
    if (verdict == ~0ull) return {};
    const auto position = static_cast<std::int64_t>(verdict);
    IndexT value = 0;
    WM_CUDA_TRY(cudaMemcpyAsync(&value, idx_ + position, sizeof value, cudaMemcpyDefault, stream_));
    WM_CUDA_TRY(cudaStreamSynchronize(stream_));
    return bad_index{position, static_cast<std::int64_t>(value)};
  }

 private:
  const IndexT* idx_;
  std::size_t n_;
  cudaStream_t stream_;
  stream_buffer word_;
  check_slot* slot_ = nullptr;
};

// ---- continuous and chunked -----------------------------------------------------------------

template <typename IndexT>
void gather_typed(const wm_tensor& table, const IndexT* idx, const dense_matrix& out,
                  const gather_geometry& g, const gather_options& options, cudaStream_t stream) {
  if (table.memory->type() == memory_type::distributed && !whole_table_local(*table.memory)) {
    gather_distributed(table, idx, out, g, options, stream);
    return;
  }
  index_check<IndexT> check(idx, g.count, table.rows, stream);
  if (g.count > 0 && table.cols > 0) {
    rows_ref src = table_rows(table, g);
    src.skip_word = check.word();
    const rows_ref dst = dense_rows(out, g.dense_stride_bytes);
    if (!sorts_host(table, g.count, options)) {
      gather_entries(table.cols, table.type, src, idx, out.type, dst, nullptr, g.count,
                     g.table_row_bytes, stream);
    } else {
      // Visit the host rows in address order, writing each to its original position (a bad
      // index only misplaces its entry in the sort, and the copy is skipped).
      stream_buffer keys(g.count * sizeof(IndexT), stream);
      stream_buffer positions(g.count * sizeof(std::int64_t), stream);
      sort_by_key(idx, keys.as<IndexT>(), positions.as<std::int64_t>(),
                  static_cast<std::int64_t>(g.count), table.rows - 1, stream);
      gather_entries(table.cols, table.type, src, keys.as<IndexT>(), out.type, dst,
                     positions.as<std::int64_t>(), g.count, g.table_row_bytes, stream);
    }
  }
  bad_index bad = check.result();
  if (bad.position >= 0) throw_bad_index("gather", bad, table.rows);
}

template <typename IndexT>
void scatter_typed(const dense_matrix& in, const IndexT* idx, const wm_tensor& table,
                   const gather_geometry& g, const gather_options& options, cudaStream_t stream) {
  if (table.memory->type() == memory_type::distributed && !whole_table_local(*table.memory)) {
    scatter_distributed(in, idx, table, g, options, stream);
    return;
  }
  index_check<IndexT> check(idx, g.count, table.rows, stream);
  const bool sort_rows = !options.unique_indices || sorts_host(table, g.count, options);
  rows_ref dst = table_rows(table, g);
  dst.skip_word = check.word();
  scatter_entries(table.cols, in.type, dense_rows(in, g.dense_stride_bytes), nullptr, table.type,
                  dst, idx, g.count, table.rows, table.cols * g.dense_elem_bytes, sort_rows,
                  stream);
  bad_index bad = check.result();
  if (bad.position >= 0) throw_bad_index("scatter", bad, table.rows);
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