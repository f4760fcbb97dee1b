/*
 * Element conversions: the 16-bit float types and the one rounding rule every layer uses
 * (gather/scatter, datasets, embedding tables), shared by CUDA kernels and host code.
 *
 * float16 and bfloat16 are carried as their 16-bit patterns in small structs, so host code
 * needs no cuda_fp16.h.  Conversions to them round to nearest even in one step from the exact
 * value (float and double inputs, and each other through the exact float value), overflow to
 * Inf, keep the sign of zero and Inf, and turn NaN into a quiet NaN.  Integer conversions are
 * static_cast: narrowing keeps the low bits (two's-complement wraparound).
 */
#pragma once

#include <wholememory/host_device.hpp>

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace wholememory {

/// IEEE binary16, as its bit pattern.
struct half_t {
  std::uint16_t bits;
};

/// bfloat16 (the top half of a binary32), as its bit pattern.
struct bfloat16_t {
  std::uint16_t bits;
};

template <typename To, typename From>
WM_HOST_DEVICE To bit_cast_value(const From& from) {
  static_assert(sizeof(To) == sizeof(From), "bit_cast between types of different sizes");
  To to;
  std::memcpy(&to, &from, sizeof(To));
  return to;
}

/// Rounds a double to the nearest value (ties to even) of a binary format with `ExpBits`
/// exponent bits and `MantBits` fraction bits, returning its bit pattern.
template <int ExpBits, int MantBits>
WM_HOST_DEVICE std::uint32_t round_double_to_bits(double value) {
  constexpr int bias = (1 << (ExpBits - 1)) - 1;
  constexpr std::uint32_t exp_all_ones = (1u << ExpBits) - 1;
  const std::uint64_t x = bit_cast_value<std::uint64_t>(value);
  const std::uint32_t sign = static_cast<std::uint32_t>(x >> 63) << (ExpBits + MantBits);
  const int exp = static_cast<int>((x >> 52) & 0x7ff);
  const std::uint64_t frac = x & ((std::uint64_t{1} << 52) - 1);
  if (exp == 0x7ff) {  // Inf or NaN (quiet, top payload bits kept)
    std::uint32_t payload =
        frac == 0 ? 0u
                  : (1u << (MantBits - 1)) | static_cast<std::uint32_t>(frac >> (52 - MantBits));
    return sign | (exp_all_ones << MantBits) | payload;
  }
  if (exp == 0) return sign;  // double subnormals are far below any 16-bit format's range
  const int unbiased = exp - 1023;
  if (unbiased + bias >= static_cast<int>(exp_all_ones)) return sign | (exp_all_ones << MantBits);
  const std::uint64_t sig = frac | (std::uint64_t{1} << 52);
  int shift = 52 - MantBits;
  const bool normal = unbiased >= 1 - bias;
  if (!normal) shift += (1 - bias) - unbiased;
  if (shift > 62) return sign;  // below half the smallest subnormal
  std::uint64_t res = sig >> shift;
  const std::uint64_t rem = sig & ((std::uint64_t{1} << shift) - 1);
  const std::uint64_t halfway = std::uint64_t{1} << (shift - 1);
  if (rem > halfway || (rem == halfway && (res & 1))) ++res;
  // Normal: res holds the implicit bit at position MantBits, which adds one to the exponent
  // field; a carry out of the fraction moves into the exponent (up to Inf) as it should.
  std::uint64_t bits =
      normal ? (static_cast<std::uint64_t>(unbiased + bias - 1) << MantBits) + res : res;
  return sign | static_cast<std::uint32_t>(bits);
}

WM_HOST_DEVICE float half_to_float(half_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h.bits & 0x8000) << 16;
  const std::uint32_t exp = (h.bits >> 10) & 0x1f;
  const std::uint32_t mant = h.bits & 0x3ff;
  if (exp == 0x1f) {
    return bit_cast_value<float>(sign | 0x7f800000u | (mant << 13) | (mant ? 0x400000u : 0u));
  }
  if (exp == 0) {
    float v = static_cast<float>(mant) * 5.9604644775390625e-8f;  // mant * 2^-24, exact
    return sign ? -v : v;
  }
  return bit_cast_value<float>(sign | ((exp + 112) << 23) | (mant << 13));
}

WM_HOST_DEVICE float bfloat16_to_float(bfloat16_t b) {
  std::uint32_t bits = static_cast<std::uint32_t>(b.bits) << 16;
  if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu) != 0) bits |= 0x400000u;
  return bit_cast_value<float>(bits);
}

WM_HOST_DEVICE half_t double_to_half(double v) {
  return half_t{static_cast<std::uint16_t>(round_double_to_bits<5, 10>(v))};
}

WM_HOST_DEVICE bfloat16_t double_to_bfloat16(double v) {
  return bfloat16_t{static_cast<std::uint16_t>(round_double_to_bits<8, 7>(v))};
}

template <typename T>
struct is_float_element
    : std::integral_constant<
          bool, std::is_same<T, float>::value || std::is_same<T, double>::value ||
                    std::is_same<T, half_t>::value || std::is_same<T, bfloat16_t>::value> {};

/// The value of a float element as a double (exact for every float type).
template <typename T>
WM_HOST_DEVICE double float_element_to_double(T v) {
  if constexpr (std::is_same<T, half_t>::value) {
    return static_cast<double>(half_to_float(v));
  } else if constexpr (std::is_same<T, bfloat16_t>::value) {
    return static_cast<double>(bfloat16_to_float(v));
  } else {
    return static_cast<double>(v);
  }
}

/// Converts one element.  Float types among themselves, integer types among themselves.
template <typename Dst, typename Src>
WM_HOST_DEVICE Dst convert_element(Src v) {
  if constexpr (std::is_same<Dst, Src>::value) {
    return v;
  } else if constexpr (!is_float_element<Src>::value) {
    static_assert(std::is_integral<Src>::value && std::is_integral<Dst>::value,
                  "integer elements convert only to integer elements");
    return static_cast<Dst>(v);
  } else {
    static_assert(is_float_element<Dst>::value, "float elements convert only to float elements");
    if constexpr (std::is_same<Dst, half_t>::value) {
      return double_to_half(float_element_to_double(v));
    } else if constexpr (std::is_same<Dst, bfloat16_t>::value) {
      return double_to_bfloat16(float_element_to_double(v));
    } else if constexpr (std::is_same<Dst, float>::value) {
      if constexpr (std::is_same<Src, half_t>::value) {
        return half_to_float(v);
      } else if constexpr (std::is_same<Src, bfloat16_t>::value) {
        return bfloat16_to_float(v);
      } else {
        return static_cast<float>(v);  // double -> float, round to nearest even
      }
    } else {
      return float_element_to_double(v);
    }
  }
}

/// Converts `cols` elements of one row.
template <typename Dst, typename Src>
WM_HOST_DEVICE void convert_row(const Src* src, Dst* dst, std::size_t cols) {
  for (std::size_t c = 0; c < cols; ++c) dst[c] = convert_element<Dst>(src[c]);
}

}  // namespace wholememory
