/*
 * Reading NumPy .npy files (format versions 1.0, 2.0 and 3.0) for the on-disk dataset importer:
 * the header parsed by hand (no dependency), little-endian C-order arrays of bool, uint8,
 * int32, int64, float16 and float32, read in chunks and converted to the caller's element type.
 * Everything else (Fortran order, big-endian or other dtypes, a structured dtype, a bad magic,
 * a header that does not parse, a file shorter or longer than its shape says) throws
 * wholememory::logic_error naming the file and what is wrong.  Internal to graph/src.
 */
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace wholestore::graph::detail {

enum class npy_dtype { bool8, uint8, int32, int64, float16, float32 };

/// "bool", "uint8", "int32", "int64", "float16", "float32".
const char* npy_dtype_name(npy_dtype t);
inline bool npy_is_integer(npy_dtype t) {
  return t == npy_dtype::uint8 || t == npy_dtype::int32 || t == npy_dtype::int64;
}
inline bool npy_is_float(npy_dtype t) { return t == npy_dtype::float16 || t == npy_dtype::float32; }

/// What a .npy header says, checked against the file's size.
struct npy_header {
  std::string path;
  npy_dtype type = npy_dtype::uint8;
  std::string descr;                 ///< as written, e.g. "<i8"
  std::vector<std::uint64_t> shape;  ///< () for a scalar
  std::uint64_t count = 0;           ///< product of shape
  std::uint64_t data_offset = 0;     ///< bytes before the first element
  /// "(2, 5)" for messages.
  std::string shape_text() const;
};

/// Opens `path` and parses its header.  Throws logic_error naming the path for a missing file,
/// a bad magic, an unsupported version, dtype or order, a header that does not parse, or a
/// file whose size is not the header's plus count elements (truncated or with trailing bytes).
npy_header read_npy_header(const std::string& path);

/// Reads elements [first, first + count) of the array (C order) into `out`, converted: T is
/// std::int64_t (from bool, uint8, int32, int64), std::uint8_t (from bool or uint8) or float
/// (from float16 or float32); another pairing throws logic_error naming the file and both
/// types.  Throws logic_error when the file is shorter than its header said (it changed).
template <typename T>
void read_npy_elements(const npy_header& h, std::uint64_t first, std::uint64_t count, T* out);

extern template void read_npy_elements<std::int64_t>(const npy_header&, std::uint64_t,
                                                     std::uint64_t, std::int64_t*);
extern template void read_npy_elements<std::uint8_t>(const npy_header&, std::uint64_t,
                                                     std::uint64_t, std::uint8_t*);
extern template void read_npy_elements<float>(const npy_header&, std::uint64_t, std::uint64_t,
                                              float*);

}  // namespace wholestore::graph::detail
