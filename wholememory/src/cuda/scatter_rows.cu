// Same-dtype scatter kernels: continuous and chunked tables, int32 and int64 indices.
#include "cuda/gather_kernels.cuh"

namespace wholememory::detail {

template <typename IndexT>
void launch_scatter_rows(const rows_ref& in, const std::int64_t* in_pos, const rows_ref& table,
                         const IndexT* idx, std::size_t n, std::size_t row_bytes,
                         cudaStream_t stream) {
  launch_scatter_rows_impl(in, in_pos, table, idx, n, row_bytes, stream);
}

template void launch_scatter_rows<std::int32_t>(const rows_ref&, const std::int64_t*,
                                                const rows_ref&, const std::int32_t*, std::size_t,
                                                std::size_t, cudaStream_t);
template void launch_scatter_rows<std::int64_t>(const rows_ref&, const std::int64_t*,
                                                const rows_ref&, const std::int64_t*, std::size_t,
                                                std::size_t, cudaStream_t);

}  // namespace wholememory::detail
