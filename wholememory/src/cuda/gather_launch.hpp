/*
 * Launchers of the gather/scatter kernels (the .cu files in src/cuda/), declared for the
 * orchestration in src/cuda/gather_device.cu.  Plain C++: each launcher is compiled once, in its
 * own .cu, for the index types it serves (int32 and int64).
 *
 * A rows_ref names rows in one address space the GPU can read: a plain base address or a
 * device copy of a chunked view.  Every launcher enqueues on `stream`, returns at once and
 * throws cuda_error when a launch fails.
 */
#pragma once

#include <wholememory/dtype.hpp>
#include <wholememory/ptr_gen.hpp>
#include <wholememory/stream.hpp>

#include <cstddef>
#include <cstdint>

namespace wholememory::detail {

/// Rows of a table or dense matrix, as the kernels see them.
struct rows_ref {
  const chunked_view* view = nullptr;  ///< device-readable view (chunked memory), else nullptr
  char* base = nullptr;                ///< plain memory, when view is nullptr
  std::size_t stride_bytes = 0;
  std::size_t col_offset_bytes = 0;
  /// OR of every part address (or of base), to find the widest aligned vector.
  std::uintptr_t address_bits = 0;
  /// The index check's device word, when the copy is enqueued behind a check it must honour:
  /// the kernel reads it first and copies nothing unless it is all ones (no bad index), so a
  /// bad index leaves the destination untouched without a host round trip before the copy.
  const unsigned long long* skip_word = nullptr;
};

/// An index list of int32 or int64 entries; data nullptr means the identity.
struct index_ref {
  const void* data = nullptr;
  bool is64 = true;
};

/// Same-dtype gather of n rows of `row_bytes`: entry i copies table row idx[i] to out row
/// out_pos[i] (i when out_pos is nullptr).  Rows packed per warp for narrow rows, several
/// independent 16-byte loads in flight per thread when alignment allows.
template <typename IndexT>
void launch_gather_rows(const rows_ref& table, const IndexT* idx, const rows_ref& out,
                        const std::int64_t* out_pos, std::size_t n, std::size_t row_bytes,
                        cudaStream_t stream);

/// Same-dtype scatter: entry i copies in row in_pos[i] (i when nullptr) to table row idx[i].
template <typename IndexT>
void launch_scatter_rows(const rows_ref& in, const std::int64_t* in_pos, const rows_ref& table,
                         const IndexT* idx, std::size_t n, std::size_t row_bytes,
                         cudaStream_t stream);

/// Converting copy of n rows of `cols` elements: entry i copies src row src_idx[i] to dst row
/// dst_idx[i], converting src_type to dst_type (a pair check_convert_pair accepts).
void launch_convert_rows(dtype src_type, const rows_ref& src, index_ref src_idx, dtype dst_type,
                         const rows_ref& dst, index_ref dst_idx, std::size_t n, std::size_t cols,
                         cudaStream_t stream);

/// The float and integer halves of launch_convert_rows, each in its own .cu.
void launch_convert_rows_float(dtype src_type, const rows_ref& src, index_ref src_idx,
                               dtype dst_type, const rows_ref& dst, index_ref dst_idx,
                               std::size_t n, std::size_t cols, cudaStream_t stream);
void launch_convert_rows_int(dtype src_type, const rows_ref& src, index_ref src_idx, dtype dst_type,
                             const rows_ref& dst, index_ref dst_idx, std::size_t n,
                             std::size_t cols, cudaStream_t stream);

extern template void launch_gather_rows<std::int32_t>(const rows_ref&, const std::int32_t*,
                                                      const rows_ref&, const std::int64_t*,
                                                      std::size_t, std::size_t, cudaStream_t);
extern template void launch_gather_rows<std::int64_t>(const rows_ref&, const std::int64_t*,
                                                      const rows_ref&, const std::int64_t*,
                                                      std::size_t, std::size_t, cudaStream_t);
extern template void launch_scatter_rows<std::int32_t>(const rows_ref&, const std::int64_t*,
                                                       const rows_ref&, const std::int32_t*,
                                                       std::size_t, std::size_t, cudaStream_t);
extern template void launch_scatter_rows<std::int64_t>(const rows_ref&, const std::int64_t*,
                                                       const rows_ref&, const std::int64_t*,
                                                       std::size_t, std::size_t, cudaStream_t);

}  // namespace wholememory::detail
