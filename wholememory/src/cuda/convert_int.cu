// Converting copies among int8, int16, int32 and int64 (static_cast: narrowing wraps).
#include "cuda/gather_kernels.cuh"
#include "dtype_dispatch.hpp"

namespace wholememory::detail {

void launch_convert_rows_int(dtype src_type, const rows_ref& src, index_ref src_idx, dtype dst_type,
                             const rows_ref& dst, index_ref dst_idx, std::size_t n,
                             std::size_t cols, cudaStream_t stream) {
  WM_EXPECTS(is_convertible_int(src_type) && is_convertible_int(dst_type),
             "integer conversion of " << dtype_name(src_type) << " to " << dtype_name(dst_type));
  dispatch_int_element(src_type, [&](auto s) {
    dispatch_int_element(dst_type, [&](auto d) {
      launch_convert_rows_typed<decltype(s), decltype(d)>(src, src_idx, dst, dst_idx, n, cols,
                                                          stream);
    });
  });
}

}  // namespace wholememory::detail
