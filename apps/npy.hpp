// .npy files (NumPy's format, version 1.0) for `wholestore train --export`: a float32 matrix and
// the node ids of its rows, written with their header by hand (no dependency).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace wholestore::apps {

/// The header of a C-order little-endian array of type `descr` ("<f4", "<i8", "<U12") and
/// `shape`: magic, version 1.0, header length, the dict padded with spaces and ended by '\n' to
/// a multiple of 64 bytes.
std::string npy_header(const std::string& descr, const std::vector<std::size_t>& shape);

/// npy_header of a float32 array of shape (rows, cols).
std::string npy_header(std::size_t rows, std::size_t cols);

/// Writes `data` (rows x cols float32) to `path` as .npy, through a temporary file renamed into
/// place (output_file.hpp).  Throws config_error when the file cannot be written; a previous
/// file of that name is then kept.
void write_npy(const std::string& path, const float* data, std::size_t rows, std::size_t cols);

/// Writes `ids`, the original id of each node, to `path` as a one-dimensional .npy, as
/// write_npy does: int64 when every id is an integer in its canonical decimal form ("42",
/// "-7"; not "007" or "+7", which an edge list keeps apart from "7"), else strings (NumPy's
/// "<U" type; a byte that is not UTF-8 becomes U+DC80 + its low 7 bits, as Python's
/// surrogateescape).  `ids` empty: the identity 0 .. rows - 1 as int64.
void write_npy_ids(const std::string& path, const std::vector<std::string>& ids, std::size_t rows);

}  // namespace wholestore::apps
