// write_npy and write_npy_ids (npy.hpp).
#include "npy.hpp"

#include "config.hpp"
#include "output_file.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>

namespace wholestore::apps {

namespace {

void require_little_endian() {
  const std::uint16_t probe = 1;
  unsigned char first = 0;
  std::memcpy(&first, &probe, 1);
  if (first != 1) throw config_error("--export: .npy is written little-endian only");
}

// `text` as an int64 when it is one in canonical decimal form.
bool canonical_int64(const std::string& text, std::int64_t& value) {
  const std::size_t digits = !text.empty() && text[0] == '-' ? 1 : 0;
  if (text.size() == digits || text.size() - digits > 19) return false;
  if (text.find_first_not_of("0123456789", digits) != std::string::npos) return false;
  if (text[digits] == '0' && text.size() > digits + 1) return false;  // leading zero
  if (text == "-0") return false;
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno == ERANGE) return false;
  value = v;
  return true;
}

// The code points of `text` (UTF-8); a byte that starts no valid sequence becomes
// U+DC80 + (byte & 0x7f), as Python's surrogateescape does.
std::u32string code_points(const std::string& text) {
  std::u32string out;
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t n = text.size();
  for (std::size_t i = 0; i < n;) {
    const unsigned char b = s[i];
    std::size_t len = b < 0x80             ? 1
                      : (b & 0xe0) == 0xc0 ? 2
                      : (b & 0xf0) == 0xe0 ? 3
                      : (b & 0xf8) == 0xf0 ? 4
                                           : 0;
    char32_t cp = len == 1 ? b : len == 2 ? b & 0x1f : len == 3 ? b & 0x0f : b & 0x07;
    bool ok = len != 0 && i + len <= n;
    for (std::size_t k = 1; ok && k < len; ++k) {
      ok = (s[i + k] & 0xc0) == 0x80;
      cp = (cp << 6) | (s[i + k] & 0x3f);
    }
    // Overlong forms, surrogates and values past U+10FFFF are not UTF-8.
    static constexpr char32_t min_of_len[] = {0, 0, 0x80, 0x800, 0x10000};
    ok = ok && cp >= min_of_len[len] && cp <= 0x10ffff && !(cp >= 0xd800 && cp <= 0xdfff);
    if (!ok) {
      out += static_cast<char32_t>(0xdc80 + (b & 0x7f));
      ++i;
      continue;
    }
    out += cp;
    i += len;
  }
  return out;
}

}  // namespace

std::string npy_header(const std::string& descr, const std::vector<std::size_t>& shape) {
  std::string dims;
  for (std::size_t d : shape) dims += (dims.empty() ? "" : ", ") + std::to_string(d);
  if (shape.size() == 1) dims += ",";  // Python's one-element tuple
  std::string dict =
      "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (" + dims + "), }";
  const std::size_t fixed = 10;  // magic (6), version (2), header length (2)
  std::size_t total = fixed + dict.size() + 1;
  const std::size_t padded = (total + 63) / 64 * 64;
  dict.append(padded - total, ' ');
  dict += '\n';
  const std::size_t len = dict.size();
  std::string out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(len & 0xff);
  out += static_cast<char>((len >> 8) & 0xff);
  return out + dict;
}

std::string npy_header(std::size_t rows, std::size_t cols) {
  return npy_header("<f4", {rows, cols});
}

void write_npy(const std::string& path, const float* data, std::size_t rows, std::size_t cols) {
  static_assert(sizeof(float) == 4, "float32");
  require_little_endian();
  const std::string header = npy_header(rows, cols);
  write_output_file(path, "--export", [&](std::FILE* f) {
    std::fwrite(header.data(), 1, header.size(), f);
    if (rows * cols != 0) std::fwrite(data, sizeof(float), rows * cols, f);
  });
}

void write_npy_ids(const std::string& path, const std::vector<std::string>& ids, std::size_t rows) {
  require_little_endian();
  if (!ids.empty() && ids.size() != rows) {
    throw config_error("--export: " + std::to_string(ids.size()) + " node ids for " +
                       std::to_string(rows) + " rows");
  }
  std::vector<std::int64_t> numbers(rows);
  bool integers = true;
  if (ids.empty()) {
    std::iota(numbers.begin(), numbers.end(), std::int64_t{0});
  } else {
    for (std::size_t i = 0; i < rows && integers; ++i)
      integers = canonical_int64(ids[i], numbers[i]);
  }
  if (integers) {
    const std::string header = npy_header("<i8", {rows});
    write_output_file(path, "--export", [&](std::FILE* f) {
      std::fwrite(header.data(), 1, header.size(), f);
      if (rows != 0) std::fwrite(numbers.data(), sizeof(std::int64_t), rows, f);
    });
    return;
  }
  std::vector<std::u32string> texts;
  texts.reserve(rows);
  std::size_t width = 1;  // "<U0" is not a type every NumPy reads
  for (const std::string& id : ids) {
    texts.push_back(code_points(id));
    width = std::max(width, texts.back().size());
  }
  const std::string header = npy_header("<U" + std::to_string(width), {rows});
  write_output_file(path, "--export", [&](std::FILE* f) {
    std::fwrite(header.data(), 1, header.size(), f);
    std::vector<std::uint32_t> row(width);
    for (const std::u32string& t : texts) {
      std::fill(row.begin(), row.end(), 0u);
      std::copy(t.begin(), t.end(), row.begin());
      std::fwrite(row.data(), sizeof(std::uint32_t), width, f);
    }
  });
}

}  // namespace wholestore::apps
