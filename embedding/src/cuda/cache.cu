// device_cache on the GPU: the row -> slot map, the cached rows, and the kernels that read
// through them (lookup) and refresh them (after the table changed).
//
// Hits and misses go different ways.  The lookup kernel copies every hit from the cache
// (a warp takes rows_in_flight consecutive indices, lanes over the columns, all loads of a group
// before its stores) and lists the misses (position, row) with one atomic per miss; one small
// wait brings the miss count to the host, and the misses are read through the table's own
// lookup (the memory layer's gather, which orders host-memory reads by address and so is not
// bound by address translation the way random reads of pinned memory are: a kernel that read
// each miss where it stood ran at ~38M rows/s against the gather's ~100M, docs/benchmarks.md),
// into a scratch block that a last kernel spreads to the misses' positions.  A refresh lists
// the cached rows among its rows once each (a per-slot mark of the call's epoch), reads them
// through the table's lookup the same way and writes them into their slots.  Hit counts are
// summed per block in shared memory and added once per block.
#include "../dispatch.hpp"

#include <embedding/cache.hpp>
#include <wholememory/convert.hpp>
#include <wholememory/cuda_check.hpp>
#include <wholememory/device_buffer.hpp>
#include <wholememory/error.hpp>
#include <wholememory/ptr_gen.hpp>

#include <algorithm>
#include <cstdint>

namespace wholestore::embedding {

namespace wm = ::wholememory;

namespace {

constexpr int block_threads = 256;
constexpr int warps_per_block = block_threads / 32;
/// Rows a warp reads before it writes any, and columns a lane holds per row and pass.
constexpr int rows_in_flight = 8;
constexpr int cols_per_lane = 4;

/// Blocks for n indices, rows_in_flight per warp.
int grid_for_warps(std::size_t n) {
  const std::size_t groups = (n + rows_in_flight - 1) / rows_in_flight;
  const std::size_t blocks = (groups + warps_per_block - 1) / warps_per_block;
  return static_cast<int>(std::max<std::size_t>(1, std::min<std::size_t>(blocks, 65535)));
}

/// Smallest position of an index outside [0, rows) into *result (all ones when none).
template <typename IndexT>
__global__ void find_bad_index(const IndexT* __restrict__ idx, std::int64_t n, std::int64_t rows,
                               unsigned long long* result) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const auto v = static_cast<std::int64_t>(idx[i]);
    if (v < 0 || v >= rows) {
      atomicMin(result, static_cast<unsigned long long>(i));
      return;
    }
  }
}

__global__ void fill_slots(const std::int64_t* __restrict__ cached, std::int64_t n,
                           std::int32_t* __restrict__ slots) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride)
    slots[cached[i]] = static_cast<std::int32_t>(i);
}

/// Copies the rows of one warp's group: dst[k][c] = convert(src[k][c]) for the rows whose
/// source is set, all loads of a pass issued before its stores.
template <typename T, typename OutT>
__device__ __forceinline__ void copy_group(const T* const (&src)[rows_in_flight],
                                           OutT* const (&dst)[rows_in_flight], std::size_t dim,
                                           int lane) {
  for (std::size_t c0 = static_cast<std::size_t>(lane); c0 < dim; c0 += 32 * cols_per_lane) {
    T v[rows_in_flight][cols_per_lane];
#pragma unroll
    for (int k = 0; k < rows_in_flight; ++k) {
#pragma unroll
      for (int j = 0; j < cols_per_lane; ++j) {
        const std::size_t c = c0 + 32 * j;
        if (src[k] != nullptr && c < dim) v[k][j] = src[k][c];
      }
    }
#pragma unroll
    for (int k = 0; k < rows_in_flight; ++k) {
#pragma unroll
      for (int j = 0; j < cols_per_lane; ++j) {
        const std::size_t c = c0 + 32 * j;
        if (src[k] != nullptr && c < dim) dst[k][c] = wm::convert_element<OutT>(v[k][j]);
      }
    }
  }
}

/// out[i] = row idx[i] converted to OutT for every cached row; every miss is listed as
/// (miss_pos[j], miss_rows[j]) with j from *miss_count.
template <typename T, typename OutT, typename IndexT>
__global__ void __launch_bounds__(block_threads)
    lookup_hits_kernel(const T* __restrict__ cache, const std::int32_t* __restrict__ slots,
                       const IndexT* __restrict__ idx, std::int64_t n, std::size_t dim,
                       OutT* __restrict__ out, std::size_t out_stride, unsigned long long* hits,
                       std::int64_t* miss_pos, std::int64_t* miss_rows,
                       unsigned long long* miss_count) {
  __shared__ unsigned long long block_hits;
  if (threadIdx.x == 0) block_hits = 0;
  __syncthreads();
  const int lane = threadIdx.x & 31;
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * warps_per_block;
  unsigned long long mine = 0;
  for (std::int64_t i0 =
           (static_cast<std::int64_t>(blockIdx.x) * warps_per_block + (threadIdx.x >> 5)) *
           rows_in_flight;
       i0 < n; i0 += warps * rows_in_flight) {
    const T* src[rows_in_flight];
    OutT* dst[rows_in_flight];
#pragma unroll
    for (int k = 0; k < rows_in_flight; ++k) {
      const std::int64_t i = i0 + k;
      src[k] = nullptr;
      dst[k] = nullptr;
      if (i >= n) continue;
      const auto row = static_cast<std::int64_t>(idx[i]);
      const std::int32_t slot = slots[row];
      if (slot >= 0) {
        src[k] = cache + static_cast<std::size_t>(slot) * dim;
        dst[k] = out + static_cast<std::size_t>(i) * out_stride;
        mine += lane == 0 ? 1 : 0;
      } else if (lane == 0) {
        const unsigned long long j = atomicAdd(miss_count, 1ull);
        miss_pos[j] = i;
        miss_rows[j] = row;
      }
    }
    copy_group(src, dst, dim, lane);
  }
  if (mine) atomicAdd(&block_hits, mine);
  __syncthreads();
  if (threadIdx.x == 0 && block_hits) atomicAdd(hits, block_hits);
}

/// Lists the cached rows among rows[0, n) once each per call: (slot, row) pairs.  marks[slot]
/// takes the call's epoch; the thread that sets it lists the row.
template <typename IndexT>
__global__ void list_refresh_kernel(const std::int32_t* __restrict__ slots,
                                    const IndexT* __restrict__ rows, std::int64_t n,
                                    unsigned* marks, unsigned epoch, std::int64_t* list_slots,
                                    std::int64_t* list_rows, unsigned long long* count) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const auto row = static_cast<std::int64_t>(rows[i]);
    const std::int32_t slot = slots[row];
    if (slot < 0 || atomicExch(&marks[slot], epoch) == epoch) continue;
    const unsigned long long j = atomicAdd(count, 1ull);
    list_slots[j] = slot;
    list_rows[j] = row;
  }
}

/// dst row at[j] (row stride dst_stride) = src row j (dense), for j < n.
template <typename T>
__global__ void __launch_bounds__(block_threads)
    spread_rows_kernel(const T* __restrict__ src, std::int64_t n, std::size_t dim,
                       const std::int64_t* __restrict__ at, T* __restrict__ dst,
                       std::size_t dst_stride) {
  const int lane = threadIdx.x & 31;
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * warps_per_block;
  for (std::int64_t i0 =
           (static_cast<std::int64_t>(blockIdx.x) * warps_per_block + (threadIdx.x >> 5)) *
           rows_in_flight;
       i0 < n; i0 += warps * rows_in_flight) {
    const T* s[rows_in_flight];
    T* d[rows_in_flight];
#pragma unroll
    for (int k = 0; k < rows_in_flight; ++k) {
      const std::int64_t j = i0 + k;
      s[k] = j < n ? src + static_cast<std::size_t>(j) * dim : nullptr;
      d[k] = j < n ? dst + static_cast<std::size_t>(at[j]) * dst_stride : nullptr;
    }
    copy_group(s, d, dim, lane);
  }
}

/// Calls f(OutT{}) for the float dtypes a lookup may write.
template <typename F>
void dispatch_out_type(wm::dtype t, F&& f) {
  switch (t) {
    case wm::dtype::float32:
      return f(float{});
    case wm::dtype::float64:
      return f(double{});
    case wm::dtype::float16:
      return f(wm::half_t{});
    case wm::dtype::bfloat16:
      return f(wm::bfloat16_t{});
    default:
      WM_FAIL(wm::logic_error,
              "device_cache::lookup: output dtype " << wm::dtype_name(t) << " is not a float type");
  }
}

/// Calls f(IndexT{}) for int32 and int64 index lists.
template <typename F>
void dispatch_index_type(wm::dtype t, const char* op, F&& f) {
  if (t == wm::dtype::int32) return f(std::int32_t{});
  if (t == wm::dtype::int64) return f(std::int64_t{});
  WM_FAIL(wm::logic_error, op << ": indices must be int32 or int64, not " << wm::dtype_name(t));
}

}  // namespace

namespace detail {

struct cache_impl {
  table* t = nullptr;
  int device = -1;
  std::size_t capacity = 0, rows = 0, dim = 0;
  wm::dtype type = wm::dtype::float32;
  wm::device_buffer cached_rows;         // capacity x int64, the rows held
  wm::device_buffer slots;               // rows x int32, -1: not cached
  wm::device_buffer data;                // capacity x dim elements of the table's dtype
  wm::device_buffer words;               // [0] hits, [1] bad index position
  wm::device_buffer marks;               // capacity x uint32: epoch of the last refresh
  unsigned epoch = 0;                    // of the last refresh call
  wm::device_buffer list_at;             // int64 per entry: miss positions / refresh slots
  wm::device_buffer list_rows;           // int64 per entry: their table rows
  wm::device_buffer count;               // uint64: entries listed
  wm::device_buffer scratch;             // listed rows read through the table's lookup
  unsigned long long* pinned = nullptr;  // host copies: [0] bad position, [1] count
  std::uint64_t lookups = 0;

  ~cache_impl() {
    if (pinned) WM_CUDA_WARN(cudaFreeHost(pinned));
  }
  unsigned long long* hits() { return words.data_as<unsigned long long>(); }
  unsigned long long* bad() { return words.data_as<unsigned long long>() + 1; }

  /// Throws naming the first index outside [0, rows) of `indices`.  One stream wait.
  void check(const wm::index_array& indices, const char* op, cudaStream_t stream) {
    if (indices.count == 0) return;
    WM_EXPECTS(indices.data != nullptr, op << ": null index array of " << indices.count);
    WM_CUDA_TRY(cudaMemsetAsync(bad(), 0xff, sizeof(unsigned long long), stream));
    const auto n = static_cast<std::int64_t>(indices.count);
    const int grid =
        static_cast<int>(std::min<std::int64_t>((n + block_threads - 1) / block_threads, 4096));
    dispatch_index_type(indices.type, op, [&](auto index_tag) {
      using IndexT = decltype(index_tag);
      find_bad_index<<<grid, block_threads, 0, stream>>>(static_cast<const IndexT*>(indices.data),
                                                         n, static_cast<std::int64_t>(rows), bad());
    });
    WM_CUDA_CHECK_LAUNCH();
    WM_CUDA_TRY(
        cudaMemcpyAsync(pinned, bad(), sizeof(unsigned long long), cudaMemcpyDeviceToHost, stream));
    WM_CUDA_TRY(cudaStreamSynchronize(stream));
    if (*pinned == ~0ull) return;
    const auto position = static_cast<std::int64_t>(*pinned);
    std::int64_t value = 0;
    dispatch_index_type(indices.type, op, [&](auto index_tag) {
      using IndexT = decltype(index_tag);
      IndexT v{};
      WM_CUDA_TRY(cudaMemcpy(&v, static_cast<const IndexT*>(indices.data) + position, sizeof v,
                             cudaMemcpyDefault));
      value = static_cast<std::int64_t>(v);
    });
    WM_FAIL(wm::logic_error, op << ": index " << value << " at position " << position
                                << " is outside the table of " << rows << " rows");
  }

  /// Enqueues the listing kernel `launch(list_at, list_rows, count)` for up to n entries,
  /// waits for the count, and returns it.
  template <typename Launch>
  std::size_t list_entries(std::size_t n, cudaStream_t stream, Launch&& launch) {
    auto* at = static_cast<std::int64_t*>(list_at.reserve_discard(n * 8, device));
    auto* rows_out = static_cast<std::int64_t*>(list_rows.reserve_discard(n * 8, device));
    auto* c = static_cast<unsigned long long*>(count.reserve_discard(8, device));
    WM_CUDA_TRY(cudaMemsetAsync(c, 0, 8, stream));
    launch(at, rows_out, c);
    WM_CUDA_CHECK_LAUNCH(stream);
    WM_CUDA_TRY(cudaMemcpyAsync(pinned + 1, c, 8, cudaMemcpyDeviceToHost, stream));
    WM_CUDA_TRY(cudaStreamSynchronize(stream));
    return static_cast<std::size_t>(pinned[1]);
  }

  /// Reads the k listed rows through the table's lookup as OutT and writes row j to row
  /// list_at[j] of `dst` (row stride dst_stride).
  template <typename OutT>
  void read_listed(std::size_t k, wm::dtype out_type, OutT* dst, std::size_t dst_stride,
                   cudaStream_t stream) {
    if (k == 0) return;
    void* block = scratch.reserve_discard(k * dim * sizeof(OutT), device);
    t->lookup(wm::index_array{list_rows.data(), wm::dtype::int64, k},
              wm::dense_matrix{block, out_type, k, dim, dim}, stream);
    spread_rows_kernel<<<grid_for_warps(k), block_threads, 0, stream>>>(
        static_cast<const OutT*>(block), static_cast<std::int64_t>(k), dim,
        list_at.data_as<std::int64_t>(), dst, dst_stride);
    WM_CUDA_CHECK_LAUNCH(stream);
  }

  /// Re-reads the cached rows among `list` (n entries of IndexT) on `stream`, each once.
  void refresh(const void* list, wm::dtype list_type, std::size_t n, cudaStream_t stream) {
    if (n == 0 || capacity == 0) return;
    if (marks.empty()) {
      marks = wm::device_buffer(capacity * sizeof(unsigned), device);
      WM_CUDA_TRY(cudaMemsetAsync(marks.data(), 0, capacity * sizeof(unsigned), stream));
    }
    if (++epoch == 0) {  // wrapped: no slot may hold the new epoch already
      WM_CUDA_TRY(cudaMemsetAsync(marks.data(), 0, capacity * sizeof(unsigned), stream));
      epoch = 1;
    }
    const std::size_t k = list_entries(
        n, stream, [&](std::int64_t* at, std::int64_t* rows_out, unsigned long long* c) {
          dispatch_index_type(list_type, "device_cache", [&](auto index_tag) {
            using IndexT = decltype(index_tag);
            const int grid = static_cast<int>(
                std::min<std::size_t>((n + block_threads - 1) / block_threads, 4096));
            list_refresh_kernel<<<grid, block_threads, 0, stream>>>(
                slots.data_as<std::int32_t>(), static_cast<const IndexT*>(list),
                static_cast<std::int64_t>(n), marks.data_as<unsigned>(), epoch, at, rows_out, c);
          });
        });
    detail::dispatch_float_type(type, "device_cache", [&](auto tag) {
      using T = decltype(tag);
      read_listed<T>(k, type, data.data_as<T>(), dim, stream);
    });
  }
};

}  // namespace detail

device_cache::device_cache() noexcept = default;
device_cache::device_cache(device_cache&&) noexcept = default;
device_cache& device_cache::operator=(device_cache&&) noexcept = default;
device_cache::~device_cache() = default;

device_cache::device_cache(table& t, const std::vector<std::int64_t>& rows, int device) {
  WM_EXPECTS(static_cast<bool>(t), "device_cache over an empty table");
  WM_EXPECTS(t.weights_memory().type() != wm::memory_type::distributed,
             "device_cache: the table is in distributed memory, whose remote rows are reached "
             "only through the exchange; use continuous or chunked memory");
  WM_EXPECTS(rows.size() <= t.rows(),
             "device_cache: " << rows.size() << " rows for a table of " << t.rows());
  WM_EXPECTS(t.rows() <= static_cast<std::size_t>(INT32_MAX) ||
                 rows.size() <= static_cast<std::size_t>(INT32_MAX),
             "device_cache: more than 2^31 cached rows");
  {
    std::vector<char> seen(t.rows(), 0);
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const std::int64_t r = rows[i];
      WM_EXPECTS(r >= 0 && static_cast<std::size_t>(r) < t.rows(),
                 "device_cache: row " << r << " at position " << i << " is outside the table of "
                                      << t.rows() << " rows");
      WM_EXPECTS(!seen[static_cast<std::size_t>(r)],
                 "device_cache: row " << r << " is listed twice (again at position " << i << ")");
      seen[static_cast<std::size_t>(r)] = 1;
    }
  }
  auto m = std::make_unique<detail::cache_impl>();
  m->t = &t;
  m->device = device;
  m->capacity = rows.size();
  m->rows = t.rows();
  m->dim = t.dim();
  m->type = t.dtype();
  wm::device_guard guard(device);
  const std::size_t elem = wm::dtype_size(m->type);
  m->cached_rows = wm::device_buffer(std::max<std::size_t>(1, rows.size()) * 8, device);
  m->slots = wm::device_buffer(std::max<std::size_t>(1, m->rows) * 4, device);
  m->data = wm::device_buffer(std::max<std::size_t>(1, rows.size() * m->dim * elem), device);
  m->words = wm::device_buffer(2 * sizeof(unsigned long long), device);
  WM_CUDA_TRY(cudaHostAlloc(reinterpret_cast<void**>(&m->pinned), 2 * sizeof(unsigned long long),
                            cudaHostAllocDefault));
  cudaStream_t stream = cudaStreamLegacy;
  WM_CUDA_TRY(cudaMemsetAsync(m->slots.data(), 0xff, m->rows * 4, stream));
  WM_CUDA_TRY(cudaMemsetAsync(m->words.data(), 0, 2 * sizeof(unsigned long long), stream));
  if (!rows.empty()) {
    WM_CUDA_TRY(cudaMemcpyAsync(m->cached_rows.data(), rows.data(), rows.size() * 8,
                                cudaMemcpyHostToDevice, stream));
    const auto n = static_cast<std::int64_t>(rows.size());
    fill_slots<<<static_cast<int>(
                     std::min<std::int64_t>((n + block_threads - 1) / block_threads, 4096)),
                 block_threads, 0, stream>>>(m->cached_rows.data_as<std::int64_t>(), n,
                                             m->slots.data_as<std::int32_t>());
    WM_CUDA_CHECK_LAUNCH();
    m->refresh(m->cached_rows.data(), wm::dtype::int64, rows.size(), stream);
  }
  WM_CUDA_TRY(cudaStreamSynchronize(stream));
  impl_ = std::move(m);
}

std::size_t device_cache::capacity() const { return impl_ ? impl_->capacity : 0; }
int device_cache::device() const { return impl_ ? impl_->device : -1; }

void device_cache::lookup(const wm::index_array& indices, const wm::dense_matrix& out,
                          cudaStream_t stream) {
  WM_EXPECTS(impl_ != nullptr, "lookup through an empty device_cache");
  detail::cache_impl& m = *impl_;
  WM_EXPECTS(out.rows == indices.count, "device_cache::lookup: " << indices.count << " indices for "
                                                                 << out.rows << " output rows");
  WM_EXPECTS(out.cols == m.dim,
             "device_cache::lookup: output has " << out.cols << " columns, the table " << m.dim);
  WM_EXPECTS(out.row_stride >= out.cols, "device_cache::lookup: output row stride "
                                             << out.row_stride << " below its " << out.cols
                                             << " columns");
  wm::device_guard guard(m.device);
  m.check(indices, "device_cache::lookup", stream);
  m.lookups += indices.count;
  if (indices.count == 0) return;
  const std::size_t n = indices.count;
  dispatch_out_type(out.type, [&](auto out_tag) {
    using OutT = decltype(out_tag);
    const std::size_t misses = m.list_entries(
        n, stream, [&](std::int64_t* at, std::int64_t* rows_out, unsigned long long* c) {
          detail::dispatch_float_type(m.type, "device_cache", [&](auto tag) {
            using T = decltype(tag);
            dispatch_index_type(indices.type, "device_cache::lookup", [&](auto index_tag) {
              using IndexT = decltype(index_tag);
              lookup_hits_kernel<<<grid_for_warps(n), block_threads, 0, stream>>>(
                  m.data.data_as<T>(), m.slots.data_as<std::int32_t>(),
                  static_cast<const IndexT*>(indices.data), static_cast<std::int64_t>(n), m.dim,
                  static_cast<OutT*>(out.data), out.row_stride, m.hits(), at, rows_out, c);
            });
          });
        });
    m.read_listed<OutT>(misses, out.type, static_cast<OutT*>(out.data), out.row_stride, stream);
  });
}

void device_cache::apply_gradients(const wm::index_array& indices, const wm::dense_matrix& grads,
                                   float lr, cudaStream_t stream) {
  WM_EXPECTS(impl_ != nullptr, "apply_gradients through an empty device_cache");
  impl_->t->apply_gradients(indices, grads, lr, stream);
  after_table_change(indices, stream);
}

void device_cache::scatter_rows(const wm::index_array& indices, const wm::dense_matrix& rows,
                                cudaStream_t stream) {
  WM_EXPECTS(impl_ != nullptr, "scatter_rows through an empty device_cache");
  impl_->t->scatter_rows(indices, rows, stream);
  // Not collective: only this rank's cache learns of the write here (the others flush).
  wm::device_guard guard(impl_->device);
  impl_->refresh(indices.data, indices.type, indices.count, stream);
}

void device_cache::after_table_change(const wm::index_array& indices, cudaStream_t stream) {
  detail::cache_impl& m = *impl_;
  wm::device_guard guard(m.device);
  if (m.t->comm().size() == 1) {
    // The update is ahead on the same stream: re-read the rows this call touched.
    m.refresh(indices.data, indices.type, indices.count, stream);
    return;
  }
  // Other ranks' lists changed rows too (their owners apply every rank's gradients), on their
  // own streams: wait for every rank's update, then re-read every cached row.
  WM_CUDA_TRY(cudaStreamSynchronize(stream));
  m.t->comm().get_bootstrap().barrier();
  m.refresh(m.cached_rows.data(), wm::dtype::int64, m.capacity, stream);
}

void device_cache::flush(cudaStream_t stream) {
  WM_EXPECTS(impl_ != nullptr, "flush of an empty device_cache");
  wm::device_guard guard(impl_->device);
  impl_->refresh(impl_->cached_rows.data(), wm::dtype::int64, impl_->capacity, stream);
}

cache_stats device_cache::stats(cudaStream_t stream) const {
  if (!impl_) return {};
  wm::device_guard guard(impl_->device);
  unsigned long long hits = 0;
  WM_CUDA_TRY(cudaMemcpyAsync(&hits, impl_->hits(), sizeof hits, cudaMemcpyDeviceToHost, stream));
  WM_CUDA_TRY(cudaStreamSynchronize(stream));
  return cache_stats{impl_->lookups, hits};
}

void device_cache::reset_stats(cudaStream_t stream) {
  if (!impl_) return;
  wm::device_guard guard(impl_->device);
  WM_CUDA_TRY(cudaMemsetAsync(impl_->hits(), 0, sizeof(unsigned long long), stream));
  impl_->lookups = 0;
}

}  // namespace wholestore::embedding
