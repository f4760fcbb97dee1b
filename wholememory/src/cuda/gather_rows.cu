// Same-dtype gather kernels (the hot path): continuous and chunked tables, int32 and int64
// indices.
#include "cuda/gather_kernels.cuh"

namespace wholememory::detail {

template <typename IndexT>
void launch_gather_rows(const rows_ref& table, const IndexT* idx, const rows_ref& out,
                        const std::int64_t* out_pos, std::size_t n, std::size_t row_bytes,
                        cudaStream_t stream) {
  launch_gather_rows_impl(table, idx, out, out_pos, n, row_bytes, stream);
}

template void launch_gather_rows<std::int32_t>(const rows_ref&, const std::int32_t*,
                                               const rows_ref&, const std::int64_t*, std::size_t,
                                               std::size_t, cudaStream_t);
template void launch_gather_rows<std::int64_t>(const rows_ref&, const std::int64_t*,
                                               const rows_ref&, const std::int64_t*, std::size_t,
                                               std::size_t, cudaStream_t);

}  // namespace wholememory::detail
