// .npy files (NumPy's format, version 1.0) for `wholestore train --export`: a float32 matrix,
// written with its header by hand (no dependency).
#pragma once

#include <cstddef>
#include <string>

namespace wholestore::apps {

/// The header of a C-order little-endian float32 array of shape (rows, cols): magic, version
/// 1.0, header length, the dict padded with spaces and ended by '\n' to a multiple of 64 bytes.
std::string npy_header(std::size_t rows, std::size_t cols);

/// Writes `data` (rows x cols float32) to `path` as .npy, through a temporary file renamed into
/// place (output_file.hpp).  Throws config_error when the file cannot be written; a previous
/// file of that name is then kept.
void write_npy(const std::string& path, const float* data, std::size_t rows, std::size_t cols);

}  // namespace wholestore::apps
