/*
 * Element types that travel through collectives, gathers and files.
 *
 * Runtime dtypes (from configs and files) become template parameters at one boundary; this
 * header only names them and gives their sizes.
 */
#pragma once

#include <cstddef>
#include <string>

namespace wholememory {

enum class dtype : int {
  int8,
  int16,
  int32,
  int64,
  uint8,
  float16,
  bfloat16,
  float32,
  float64,
};

/// Bytes of one element of `t`.
std::size_t dtype_size(dtype t);

/// Lower-case name ("float32", "int64", ...).
const char* dtype_name(dtype t);

/// Parses a name produced by dtype_name; throws logic_error naming the accepted names.
dtype parse_dtype(const std::string& name);

/// True for float16, bfloat16, float32, float64.
bool is_floating(dtype t);

}  // namespace wholememory
