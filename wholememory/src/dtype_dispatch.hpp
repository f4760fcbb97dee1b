/*
 * The one boundary where runtime dtypes of gather/scatter become template parameters.
 *
 * dispatch_convert_pair(src, dst, f) calls f(Src{}, Dst{}) with the element types of a
 * supported conversion pair: float32/float16/bfloat16/float64 among themselves, int8/int16/
 * int32/int64 among themselves.  Anything else (float <-> int, uint8 conversions) throws
 * logic_error naming both types.  Same-dtype copies never come here: they move bytes.
 */
#pragma once

#include <wholememory/convert.hpp>
#include <wholememory/dtype.hpp>
#include <wholememory/error.hpp>

#include <cstdint>

namespace wholememory::detail {

template <typename F>
decltype(auto) dispatch_float_element(dtype t, F&& f) {
  switch (t) {
    case dtype::float32:
      return f(float{});
    case dtype::float64:
      return f(double{});
    case dtype::float16:
      return f(half_t{});
    default:
      return f(bfloat16_t{});
  }
}

template <typename F>
decltype(auto) dispatch_int_element(dtype t, F&& f) {
  switch (t) {
    case dtype::int8:
      return f(std::int8_t{});
    case dtype::int16:
      return f(std::int16_t{});
    case dtype::int32:
      return f(std::int32_t{});
    default:
      return f(std::int64_t{});
  }
}

inline bool is_convertible_int(dtype t) {
  return t == dtype::int8 || t == dtype::int16 || t == dtype::int32 || t == dtype::int64;
}

/// Throws logic_error unless `src` -> `dst` is a supported pair (same dtype always is).
inline void check_convert_pair(dtype src, dtype dst) {
  if (src == dst) return;
  if (is_floating(src) && is_floating(dst)) return;
  if (is_convertible_int(src) && is_convertible_int(dst)) return;
  WM_FAIL(logic_error, "cannot convert " << dtype_name(src) << " to " << dtype_name(dst)
                                         << ": conversions go among float32, float16, bfloat16 "
                                            "and float64, or among int8, int16, int32 and int64");
}

template <typename F>
decltype(auto) dispatch_convert_pair(dtype src, dtype dst, F&& f) {
  check_convert_pair(src, dst);
  if (is_floating(src)) {
    return dispatch_float_element(
        src, [&](auto s) { return dispatch_float_element(dst, [&](auto d) { return f(s, d); }); });
  }
  return dispatch_int_element(
      src, [&](auto s) { return dispatch_int_element(dst, [&](auto d) { return f(s, d); }); });
}

}  // namespace wholememory::detail
