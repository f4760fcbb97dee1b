// Text lines from plain or gzip files, and CSV field parsing (text_lines.hpp).
#include "text_lines.hpp"

#include "dataset_files.hpp"

#include <wholememory/error.hpp>

#if defined(WHOLESTORE_HAS_ZLIB)
#include <zlib.h>
#endif

#include <cerrno>
#include <charconv>
#include <climits>
#include <cstring>

namespace wholestore::graph::detail {

namespace {

constexpr unsigned char gzip_magic[2] = {0x1f, 0x8b};

bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_blank(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_blank(s.back())) s.remove_suffix(1);
  return s;
}

}  // namespace

bool have_gzip() {
#if defined(WHOLESTORE_HAS_ZLIB)
  return true;
#else
  return false;
#endif
}

line_reader::line_reader(std::string path) : path_(std::move(path)) {
  file_ptr f = open_file(path_, "rb");
  unsigned char head[2] = {};
  const std::size_t got = std::fread(head, 1, 2, f.get());
  const bool gz = got == 2 && head[0] == gzip_magic[0] && head[1] == gzip_magic[1];
  if (!gz) {
    std::rewind(f.get());
    plain_ = f.release();
    return;
  }
#if defined(WHOLESTORE_HAS_ZLIB)
  f.reset();
  gzFile z = gzopen(path_.c_str(), "rb");
  if (z == nullptr) {
    const int err = errno;
    WM_FAIL(wholememory::system_error,
            path_ << ": cannot open (" << wholememory::errno_text(err) << ")");
  }
  gzbuffer(z, 1u << 20);
  gz_ = z;
#else
  WM_FAIL(wholememory::logic_error,
          path_ << ": gzip-compressed, and this build of wholestore reads no gzip (zlib was not "
                   "found when it was configured); decompress it (gunzip -k "
                << path_ << ") and give the uncompressed file, or rebuild with zlib");
#endif
}

line_reader::~line_reader() {
  if (plain_) std::fclose(plain_);
#if defined(WHOLESTORE_HAS_ZLIB)
  if (gz_) gzclose_r(static_cast<gzFile>(gz_));
#endif
}

bool line_reader::fill() {
  if (eof_) return false;
  buffer_.erase(0, pos_);
  pos_ = 0;
  const std::size_t keep = buffer_.size();
  buffer_.resize(keep + io_chunk_bytes);
  std::size_t got = 0;
  if (plain_) {
    got = std::fread(&buffer_[keep], 1, io_chunk_bytes, plain_);
    if (std::ferror(plain_)) {
      const int err = errno;
      WM_FAIL(wholememory::system_error,
              path_ << ": read error (" << wholememory::errno_text(err) << ")");
    }
    bytes_read_ += got;
  } else {
#if defined(WHOLESTORE_HAS_ZLIB)
    gzFile z = static_cast<gzFile>(gz_);
    const int n = gzread(z, &buffer_[keep], static_cast<unsigned>(io_chunk_bytes));
    int code = Z_OK;
    const char* message = gzerror(z, &code);
    // A truncated stream reads as an end with Z_BUF_ERROR ("unexpected end of file").
    if (n < 0 || (code != Z_OK && code != Z_STREAM_END)) {
      WM_FAIL(wholememory::logic_error, path_ << ": corrupt or truncated gzip data ("
                                              << (message ? message : "zlib error") << ")");
    }
    got = static_cast<std::size_t>(n);
    const auto offset = gzoffset(z);
    if (offset >= 0) bytes_read_ = static_cast<std::uint64_t>(offset);
#endif
  }
  buffer_.resize(keep + got);
  if (got == 0) eof_ = true;
  return got > 0;
}

bool line_reader::next(std::string_view& line) {
  while (true) {
    const std::size_t size = buffer_.size();
    const void* hit = pos_ < size ? std::memchr(buffer_.data() + pos_, '\n', size - pos_) : nullptr;
    if (hit) {
      const std::size_t e =
          static_cast<std::size_t>(static_cast<const char*>(hit) - buffer_.data());
      std::size_t len = e - pos_;
      if (len > 0 && buffer_[e - 1] == '\r') --len;
      line = std::string_view(buffer_.data() + pos_, len);
      pos_ = e + 1;
      ++line_no_;
      return true;
    }
    if (!fill()) {
      if (pos_ >= buffer_.size()) return false;
      std::size_t len = buffer_.size() - pos_;
      if (buffer_[pos_ + len - 1] == '\r') --len;
      line = std::string_view(buffer_.data() + pos_, len);  // the string's NUL follows
      pos_ = buffer_.size();
      ++line_no_;
      return true;
    }
  }
}

std::size_t split_csv(std::string_view line, std::vector<std::string_view>& fields) {
  fields.clear();
  if (line.find(',') != std::string_view::npos) {
    std::size_t start = 0;
    while (true) {
      const std::size_t comma = line.find(',', start);
      fields.push_back(
          trim(line.substr(start, comma == std::string_view::npos ? comma : comma - start)));
      if (comma == std::string_view::npos) break;
      start = comma + 1;
    }
    return fields.size();
  }
  std::size_t i = 0;
  while (true) {
    while (i < line.size() && is_blank(line[i])) ++i;
    if (i == line.size()) break;
    const std::size_t start = i;
    while (i < line.size() && !is_blank(line[i])) ++i;
    fields.push_back(line.substr(start, i - start));
  }
  return fields.size();
}

bool parse_int64(std::string_view field, std::int64_t& value) {
  if (!field.empty() && field[0] == '+') field.remove_prefix(1);
  if (field.empty()) return false;
  const auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), value);
  return ec == std::errc() && end == field.data() + field.size();
}

bool parse_float(std::string_view field, float& value) {
  if (!field.empty() && field[0] == '+') field.remove_prefix(1);
  if (field.empty()) return false;
  const auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), value);
  return ec == std::errc() && end == field.data() + field.size();
}

}  // namespace wholestore::graph::detail
