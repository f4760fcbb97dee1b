/*
 * Independent references for the gather/scatter tests: element values of every dtype, their
 * conversions written without the library's code (half and bfloat16 rounding by searching
 * the sorted list of representable values), and a table layout helper that writes and reads
 * a WholeMemory table rank by rank.
 */
#pragma once

#include <wholememory/allocation.hpp>
#include <wholememory/dtype.hpp>
#include <wholememory/gather.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace gather_ref {

using wholememory::dtype;

inline std::uint64_t mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

inline std::uint64_t hash3(std::uint64_t a, std::uint64_t b, std::uint64_t c) {
  return mix(a ^ mix(b ^ mix(c)));
}

/// Value of a binary16 pattern, computed with ldexp.
inline double half_value(std::uint16_t h) {
  int e = (h >> 10) & 0x1f;
  int m = h & 0x3ff;
  double s = (h & 0x8000) ? -1.0 : 1.0;
  if (e == 31) return m ? std::numeric_limits<double>::quiet_NaN() : s * INFINITY;
  if (e == 0) return s * std::ldexp(static_cast<double>(m), -24);
  return s * std::ldexp(static_cast<double>(1024 + m), e - 25);
}

/// Value of a bfloat16 pattern (the top half of a float).
inline double bf16_value(std::uint16_t b) {
  std::uint32_t bits = static_cast<std::uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

/// Nearest pattern (ties to even) of a 16-bit format whose finite positive patterns
/// 0..max_pattern are ordered by value; inf_pattern is +Inf.
template <typename ValueFn>
std::uint16_t round_16(double x, ValueFn value, std::uint16_t max_pattern,
                       std::uint16_t inf_pattern, std::uint16_t nan_pattern) {
  if (std::isnan(x)) return nan_pattern;
  std::uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  double a = std::fabs(x);
  double max_v = value(max_pattern);
  double ulp = max_v - value(static_cast<std::uint16_t>(max_pattern - 1));
  if (a >= max_v + ulp / 2) return sign | inf_pattern;  // the tie goes to Inf (max is odd)
  // Largest p with value(p) <= a.
  std::uint32_t lo = 0, hi = max_pattern;
  while (lo < hi) {
    std::uint32_t mid = (lo + hi + 1) / 2;
    if (value(static_cast<std::uint16_t>(mid)) <= a) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  std::uint16_t p = static_cast<std::uint16_t>(lo);
  if (p == max_pattern) return sign | p;
  double below = a - value(p), above = value(static_cast<std::uint16_t>(p + 1)) - a;
  if (above < below || (above == below && (p & 1))) ++p;
  return sign | p;
}

inline std::uint16_t ref_half(double x) { return round_16(x, half_value, 0x7bff, 0x7c00, 0x7e00); }
inline std::uint16_t ref_bf16(double x) { return round_16(x, bf16_value, 0x7f7f, 0x7f80, 0x7fc0); }

inline bool is_int(dtype t) {
  return t == dtype::int8 || t == dtype::int16 || t == dtype::int32 || t == dtype::int64;
}

/// A float element's value.
inline double decode_float(dtype t, const void* p) {
  switch (t) {
    case dtype::float32: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    case dtype::float64: {
      double d;
      std::memcpy(&d, p, 8);
      return d;
    }
    case dtype::float16: {
      std::uint16_t h;
      std::memcpy(&h, p, 2);
      return half_value(h);
    }
    default: {
      std::uint16_t b;
      std::memcpy(&b, p, 2);
      return bf16_value(b);
    }
  }
}

inline void encode_float(dtype t, double v, void* p) {
  switch (t) {
    case dtype::float32: {
      float f = static_cast<float>(v);
      std::memcpy(p, &f, 4);
      break;
    }
    case dtype::float64:
      std::memcpy(p, &v, 8);
      break;
    case dtype::float16: {
      std::uint16_t h = ref_half(v);
      std::memcpy(p, &h, 2);
      break;
    }
    default: {
      std::uint16_t b = ref_bf16(v);
      std::memcpy(p, &b, 2);
      break;
    }
  }
}

inline std::int64_t decode_int(dtype t, const void* p) {
  switch (t) {
    case dtype::int8:
      return *static_cast<const std::int8_t*>(p);
    case dtype::int16: {
      std::int16_t v;
      std::memcpy(&v, p, 2);
      return v;
    }
    case dtype::int32: {
      std::int32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    default: {
      std::int64_t v;
      std::memcpy(&v, p, 8);
      return v;
    }
  }
}

/// Two's-complement truncation, written with masks.
inline void encode_int(dtype t, std::int64_t v, void* p) {
  std::size_t n = wholememory::dtype_size(t);
  std::uint64_t u = static_cast<std::uint64_t>(v);
  for (std::size_t b = 0; b < n; ++b)
    static_cast<unsigned char*>(p)[b] = static_cast<unsigned char>((u >> (8 * b)) & 0xff);
}

/// Expected bytes of converting the element at `src` (type s) to type d.
inline void ref_convert(dtype s, const void* src, dtype d, void* dst) {
  if (s == d) {
    std::memcpy(dst, src, wholememory::dtype_size(s));
  } else if (is_int(s)) {
    encode_int(d, decode_int(s, src), dst);
  } else {
    encode_float(d, decode_float(s, src), dst);
  }
}

/// Elements equal as bytes, or both NaN.
inline bool same_element(dtype t, const void* a, const void* b) {
  std::size_t n = wholememory::dtype_size(t);
  if (std::memcmp(a, b, n) == 0) return true;
  if (!is_int(t) && t != dtype::uint8)
    return std::isnan(decode_float(t, a)) && std::isnan(decode_float(t, b));
  return false;
}

/// A test value of type t for (row, col): random bits shaped to exercise conversions
/// (normal values over a wide range, subnormals of the 16-bit formats, overflows, -0, Inf, NaN).
inline void test_value(dtype t, std::uint64_t seed, std::uint64_t row, std::uint64_t col,
                       void* out) {
  std::uint64_t h = hash3(seed, row, col);
  if (is_int(t) || t == dtype::uint8) {
    encode_int(is_int(t) ? t : dtype::int8, static_cast<std::int64_t>(h), out);
    return;
  }
  double v;
  switch (h % 16) {
    case 0:
      v = std::ldexp(static_cast<double>((h >> 8) % 2048) - 1024, -30);
      break;  // tiny
    case 1:
      v = std::ldexp(static_cast<double>((h >> 8) % 4096), 6 + (h >> 40) % 12);
      break;
    case 2:
      v = (h & 256) ? -0.0 : INFINITY;
      break;
    case 3:
      v = (h & 256) ? std::numeric_limits<double>::quiet_NaN() : -INFINITY;
      break;
    default: {
      // A random double in +-[2^-20, 2^20) with all mantissa bits random.
      std::uint64_t bits = (h & 0x800FFFFFFFFFFFFFull) |
                           (static_cast<std::uint64_t>(1023 - 20 + (h >> 52) % 40) << 52);
      std::memcpy(&v, &bits, 8);
    }
  }
  encode_float(t, v, out);
}

const std::vector<dtype> float_types = {dtype::float32, dtype::float16, dtype::bfloat16,
                                        dtype::float64};
const std::vector<dtype> int_types = {dtype::int8, dtype::int16, dtype::int32, dtype::int64};

/// Layout of a test table inside its allocation, and the rows this rank owns.
struct table_layout {
  dtype type;
  std::size_t rows, cols, stride, col_offset;
  std::uint64_t seed;

  std::size_t elem() const { return wholememory::dtype_size(type); }
  std::size_t stride_bytes() const { return stride * elem(); }
  std::size_t bytes() const { return std::max<std::size_t>(rows * stride_bytes(), 1); }
  wholememory::wm_tensor tensor(const wholememory::allocation& wm) const {
    return wholememory::wm_tensor{&wm, type, rows, cols, stride, col_offset};
  }
  /// Bytes of element (r, c) of the full row (c < stride): padding outside the view.
  void element(std::size_t r, std::size_t c, void* out) const {
    if (c < col_offset || c >= col_offset + cols) {
      std::memset(out, 0xA5, elem());
    } else {
      test_value(type, seed, r, c - col_offset, out);
    }
  }
};

/// First row of [begin, end) bytes: rows owned by a part.
inline std::size_t first_row(std::size_t byte, std::size_t stride_bytes) {
  return (byte + stride_bytes - 1) / stride_bytes;
}

}  // namespace gather_ref
