// Converting copies among float32, float16, bfloat16 and float64.
#include "cuda/gather_kernels.cuh"
#include "dtype_dispatch.hpp"

namespace wholememory::detail {

void launch_convert_rows_float(dtype src_type, const rows_ref& src, index_ref src_idx,
                               dtype dst_type, const rows_ref& dst, index_ref dst_idx,
                               std::size_t n, std::size_t cols, cudaStream_t stream) {
  WM_EXPECTS(is_floating(src_type) && is_floating(dst_type),
             "float conversion of " << dtype_name(src_type) << " to " << dtype_name(dst_type));
  dispatch_float_element(src_type, [&](auto s) {
    dispatch_float_element(dst_type, [&](auto d) {
      launch_convert_rows_typed<decltype(s), decltype(d)>(src, src_idx, dst, dst_idx, n, cols,
                                                          stream);
    });
  });
}

}  // namespace wholememory::detail
