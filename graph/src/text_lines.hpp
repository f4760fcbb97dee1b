/*
 * Line by line through a text file that may be gzip-compressed, for the importers' CSV inputs
 * (OGB's raw/ files, .csv.gz, the on-disk description's csv edges), and the field parsing they
 * share. Compression is recognised by the file's first bytes (the gzip magic), not by its name; it
 * is read with zlib when the build found zlib (have_gzip()), and refused naming the file otherwise.
 * Internal to graph/src.
 */
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace wholestore::graph::detail {

/// Whether this build reads gzip files (zlib was found when it was configured).
bool have_gzip();

/// The lines of one file, front to back in big chunks.  LF and CRLF line ends; the last line
/// needs none.  Throws system_error when the file cannot be opened or read, logic_error for
/// gzip input without zlib and for corrupt or truncated gzip data, each naming the file.
class line_reader {
 public:
  explicit line_reader(std::string path);
  ~line_reader();
  line_reader(const line_reader&) = delete;
  line_reader& operator=(const line_reader&) = delete;

  /// The next line, without its line end; false at the end of the file.  The view stays valid
  /// until the next call, and the byte after it in memory is a line end or a NUL, so number
  /// parsers may stop on it.
  bool next(std::string_view& line);

  std::uint64_t line_number() const { return line_no_; }    ///< of the last line returned
  std::uint64_t bytes_read() const { return bytes_read_; }  ///< of the file (compressed)
  const std::string& path() const { return path_; }
  bool compressed() const { return gz_ != nullptr; }

 private:
  bool fill();  // reads the next chunk after the unfinished line; false at the end

  std::string path_;
  std::FILE* plain_ = nullptr;
  void* gz_ = nullptr;  // gzFile when compressed (zlib's type stays out of this header)
  std::string buffer_;
  std::size_t pos_ = 0;  // start of the next line in buffer_
  bool eof_ = false;
  std::uint64_t line_no_ = 0;
  std::uint64_t bytes_read_ = 0;
};

/// Splits a CSV line at commas (blanks around a field dropped; a line without commas splits at
/// blanks).  Returns the number of fields; `fields` holds them.
std::size_t split_csv(std::string_view line, std::vector<std::string_view>& fields);

/// A whole field as an integer (optional sign, decimal digits); false for anything else.
bool parse_int64(std::string_view field, std::int64_t& value);
/// A whole field as a float32 (decimal or exponent notation, nan, inf); false otherwise.
bool parse_float(std::string_view field, float& value);

}  // namespace wholestore::graph::detail
