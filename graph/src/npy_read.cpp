// .npy files read for the importers (npy_read.hpp).  The header is a Python dict literal,
// {'descr': '<i8', 'fortran_order': False, 'shape': (2, 5), }, padded with spaces and ended by
// '\n'; this parser reads exactly what NumPy writes there and refuses anything else by name.
#include "npy_read.hpp"

#include "dataset_files.hpp"

#include <wholememory/convert.hpp>
#include <wholememory/error.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <sstream>
#include <type_traits>

namespace wholestore::graph::detail {

namespace {

constexpr char npy_magic[] = "\x93NUMPY";
constexpr std::size_t npy_magic_bytes = 6;
// NumPy writes headers of a few hundred bytes; anything this large is not a .npy header.
constexpr std::uint64_t max_header_bytes = std::uint64_t{1} << 20;

std::size_t element_bytes(npy_dtype t) {
  switch (t) {
    case npy_dtype::bool8:
    case npy_dtype::uint8:
      return 1;
    case npy_dtype::float16:
      return 2;
    case npy_dtype::int32:
    case npy_dtype::float32:
      return 4;
    case npy_dtype::int64:
      return 8;
  }
  return 1;
}

// A value of the header dict: a string, a bool, or a tuple of non-negative integers.
struct header_value {
  enum { string, boolean, tuple } kind = string;
  std::string text;
  bool flag = false;
  std::vector<std::uint64_t> items;
};

// Recursive-descent parse of the dict literal; fail() names the file and the header text.
class header_parser {
 public:
  header_parser(const std::string& path, std::string text) : path_(path), text_(std::move(text)) {}

  std::map<std::string, header_value> parse() {
    std::map<std::string, header_value> out;
    expect('{');
    while (true) {
      skip_blanks();
      if (peek() == '}') break;
      const std::string key = quoted();
      expect(':');
      if (out.count(key) != 0) fail("key '" + key + "' repeats");
      out[key] = value();
      skip_blanks();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() != '}') fail("expected ',' or '}' after the value of '" + key + "'");
    }
    ++pos_;
    skip_blanks();
    if (pos_ != text_.size()) fail("text after the closing '}'");
    return out;
  }

  [[noreturn]] void fail(const std::string& why) const {
    std::string shown = text_.substr(0, 200);
    while (!shown.empty() && (shown.back() == ' ' || shown.back() == '\n')) shown.pop_back();
    WM_FAIL(wholememory::logic_error, path_ << ": not a .npy header this reader understands ("
                                            << why << "): '" << shown << "'");
  }

 private:
  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  void skip_blanks() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\n' ||
                                   text_[pos_] == '\t' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }
  void expect(char c) {
    skip_blanks();
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++pos_;
  }
  std::string quoted() {
    skip_blanks();
    const char q = peek();
    if (q != '\'' && q != '"') fail("expected a quoted key or string");
    const std::size_t end = text_.find(q, pos_ + 1);
    if (end == std::string::npos) fail("unterminated string");
    std::string s = text_.substr(pos_ + 1, end - pos_ - 1);
    pos_ = end + 1;
    return s;
  }
  header_value value() {
    skip_blanks();
    header_value v;
    const char c = peek();
    if (c == '\'' || c == '"') {
      v.text = quoted();
      return v;
    }
    if (text_.compare(pos_, 4, "True") == 0 || text_.compare(pos_, 5, "False") == 0) {
      v.kind = header_value::boolean;
      v.flag = text_[pos_] == 'T';
      pos_ += v.flag ? 4 : 5;
      return v;
    }
    if (c == '[') fail("a structured dtype (a list of fields) is not supported");
    if (c != '(') fail("expected a string, True, False or a tuple");
    ++pos_;
    v.kind = header_value::tuple;
    while (true) {
      skip_blanks();
      if (peek() == ')') break;
      std::uint64_t n = 0;
      const std::size_t start = pos_;
      while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
        const std::uint64_t digit = static_cast<std::uint64_t>(text_[pos_] - '0');
        if (n > (std::numeric_limits<std::uint64_t>::max() - digit) / 10)
          fail("dimension too large");
        n = n * 10 + digit;
        ++pos_;
      }
      if (pos_ == start) fail("expected a dimension (a non-negative integer)");
      // NumPy writes Python ints; Python 2 era files may carry an 'L' suffix.
      if (peek() == 'L') ++pos_;
      v.items.push_back(n);
      skip_blanks();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() != ')') fail("expected ',' or ')' in the shape");
    }
    ++pos_;
    return v;
  }

  const std::string& path_;
  std::string text_;
  std::size_t pos_ = 0;
};

// The dtype of a descr string; throws naming the file for any other.
npy_dtype parse_descr(const std::string& path, const std::string& descr) {
  struct known {
    const char* text;
    npy_dtype type;
  };
  static const known table[] = {
      {"|b1", npy_dtype::bool8},   {"<b1", npy_dtype::bool8},   {"|u1", npy_dtype::uint8},
      {"<u1", npy_dtype::uint8},   {"<i4", npy_dtype::int32},   {"<i8", npy_dtype::int64},
      {"<f2", npy_dtype::float16}, {"<f4", npy_dtype::float32},
  };
  for (const known& k : table) {
    if (descr == k.text) return k.type;
  }
  std::string hint;
  if (!descr.empty() && descr[0] == '>') {
    hint = " (big-endian; save it with .astype('<" + descr.substr(1) + "'))";
  } else if (descr == "<f8") {
    hint = " (float64; save it with .astype(np.float32))";
  } else if (descr == "<u4" || descr == "<u8" || descr == "<i2" || descr == "|i1" ||
             descr == "<u2") {
    hint = " (save it with .astype(np.int64))";
  }
  WM_FAIL(wholememory::logic_error,
          path << ": dtype '" << descr << "' is not read" << hint
               << "; supported: bool '|b1', uint8 '|u1', int32 '<i4', int64 '<i8', float16 "
                  "'<f2', float32 '<f4' (little-endian)");
}

std::uint64_t little_endian(const unsigned char* p, int bytes) {
  std::uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

template <typename T>
T convert_from(npy_dtype t, const unsigned char* p) {
  if constexpr (std::is_same<T, float>::value) {
    if (t == npy_dtype::float16) {
      wholememory::half_t h{static_cast<std::uint16_t>(little_endian(p, 2))};
      return wholememory::half_to_float(h);
    }
    float f;
    std::memcpy(&f, p, 4);
    return f;
  } else {
    switch (t) {
      case npy_dtype::bool8:
        return static_cast<T>(*p != 0);
      case npy_dtype::uint8:
        return static_cast<T>(*p);
      case npy_dtype::int32: {
        std::int32_t v;
        std::memcpy(&v, p, 4);
        return static_cast<T>(v);
      }
      default: {
        std::int64_t v;
        std::memcpy(&v, p, 8);
        return static_cast<T>(v);
      }
    }
  }
}

template <typename T>
bool converts(npy_dtype t) {
  if constexpr (std::is_same<T, float>::value) return npy_is_float(t);
  if constexpr (std::is_same<T, std::uint8_t>::value) {
    return t == npy_dtype::bool8 || t == npy_dtype::uint8;
  }
  return !npy_is_float(t);
}

template <typename T>
const char* type_name() {
  if constexpr (std::is_same<T, float>::value) return "float32";
  if constexpr (std::is_same<T, std::uint8_t>::value) return "uint8";
  return "int64";
}

}  // namespace

const char* npy_dtype_name(npy_dtype t) {
  switch (t) {
    case npy_dtype::bool8:
      return "bool";
    case npy_dtype::uint8:
      return "uint8";
    case npy_dtype::int32:
      return "int32";
    case npy_dtype::int64:
      return "int64";
    case npy_dtype::float16:
      return "float16";
    case npy_dtype::float32:
      return "float32";
  }
  return "?";
}

std::string npy_header::shape_text() const {
  std::ostringstream os;
  os << "(";
  for (std::size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  if (shape.size() == 1) os << ",";
  os << ")";
  return os.str();
}

npy_header read_npy_header(const std::string& path) {
  std::error_code ec;
  WM_EXPECTS(std::filesystem::is_regular_file(path, ec),
             path << ": " << (std::filesystem::exists(path, ec) ? "not a regular file" : "missing")
                  << " (a .npy file was expected)");
  const std::uint64_t size = std::filesystem::file_size(path, ec);
  WM_EXPECTS(!ec, path << ": cannot read its size (" << ec.message() << ")");
  file_ptr f = open_file(path, "rb");
  unsigned char fixed[12] = {};
  const std::size_t got = std::fread(fixed, 1, sizeof(fixed), f.get());
  WM_EXPECTS(got >= npy_magic_bytes + 2 && std::memcmp(fixed, npy_magic, npy_magic_bytes) == 0,
             path << ": not a .npy file (it does not start with the magic \\x93NUMPY)");
  const int major = fixed[6], minor = fixed[7];
  WM_EXPECTS(major >= 1 && major <= 3, path << ": .npy format version " << major << "." << minor
                                            << " is not supported (1.0, 2.0 and 3.0 are)");
  const int len_bytes = major == 1 ? 2 : 4;
  const std::size_t prefix = npy_magic_bytes + 2 + static_cast<std::size_t>(len_bytes);
  WM_EXPECTS(got >= prefix, path << ": truncated inside the .npy header (" << size << " bytes)");
  const std::uint64_t header_len = little_endian(fixed + npy_magic_bytes + 2, len_bytes);
  WM_EXPECTS(header_len <= max_header_bytes && prefix + header_len <= size,
             path << ": truncated inside the .npy header (the header says " << header_len
                  << " bytes of dict, the file has " << size << " bytes in all)");
  std::string text(header_len, '\0');
  WM_EXPECTS(std::fseek(f.get(), static_cast<long>(prefix), SEEK_SET) == 0 &&
                 std::fread(&text[0], 1, header_len, f.get()) == header_len,
             path << ": read error in the .npy header");

  header_parser parser(path, text);
  std::map<std::string, header_value> dict = parser.parse();
  for (const char* key : {"descr", "fortran_order", "shape"}) {
    if (dict.count(key) == 0) parser.fail(std::string("no '") + key + "' key");
  }
  for (const auto& entry : dict) {
    if (entry.first != "descr" && entry.first != "fortran_order" && entry.first != "shape") {
      parser.fail("unknown key '" + entry.first + "'");
    }
  }
  const header_value& descr = dict["descr"];
  const header_value& order = dict["fortran_order"];
  const header_value& shape = dict["shape"];
  if (descr.kind != header_value::string) parser.fail("'descr' is not a string");
  if (order.kind != header_value::boolean) parser.fail("'fortran_order' is not True or False");
  if (shape.kind != header_value::tuple) parser.fail("'shape' is not a tuple");

  npy_header h;
  h.path = path;
  h.descr = descr.text;
  h.type = parse_descr(path, descr.text);
  h.shape = shape.items;
  h.data_offset = prefix + header_len;
  WM_EXPECTS(!order.flag || h.shape.size() <= 1,
             path << ": Fortran (column-major) order is not read; save a C-order array "
                     "(np.ascontiguousarray(a)) with np.save");
  h.count = 1;
  const std::uint64_t width = element_bytes(h.type);
  for (std::uint64_t d : h.shape) {
    WM_EXPECTS(d == 0 || h.count <= std::numeric_limits<std::uint64_t>::max() / width / d,
               path << ": shape " << h.shape_text() << " is too large");
    h.count *= d;
  }
  const std::uint64_t data_bytes = h.count * width;
  const std::uint64_t have = size - h.data_offset;
  WM_EXPECTS(have == data_bytes,
             path << ": " << (have < data_bytes ? "truncated" : "longer than its header says")
                  << ": shape " << h.shape_text() << " of " << npy_dtype_name(h.type) << " is "
                  << data_bytes << " bytes of data, the file has " << have << " after its header");
  return h;
}

template <typename T>
void read_npy_elements(const npy_header& h, std::uint64_t first, std::uint64_t count, T* out) {
  WM_EXPECTS(converts<T>(h.type), h.path << ": dtype " << npy_dtype_name(h.type)
                                         << " cannot be read as " << type_name<T>());
  WM_EXPECTS(first <= h.count && count <= h.count - first,
             h.path << ": elements [" << first << ", " << first + count << ") are outside the "
                    << h.count << " of the array");
  if (count == 0) return;
  const std::uint64_t width = element_bytes(h.type);
  file_ptr f = open_file(h.path, "rb");
  const std::uint64_t offset = h.data_offset + first * width;
  WM_EXPECTS(offset <= static_cast<std::uint64_t>(std::numeric_limits<long>::max()) &&
                 std::fseek(f.get(), static_cast<long>(offset), SEEK_SET) == 0,
             h.path << ": cannot seek to byte " << offset);
  std::vector<unsigned char> buf(std::min<std::uint64_t>(count, io_chunk_bytes / width) * width);
  for (std::uint64_t done = 0; done < count;) {
    const std::uint64_t n = std::min<std::uint64_t>(count - done, buf.size() / width);
    const std::size_t got = std::fread(buf.data(), width, n, f.get());
    WM_EXPECTS(got == n, h.path << ": truncated while reading (it changed after its header was "
                                   "read): element "
                                << first + done + got << " of " << h.count << " is missing");
    if (std::is_same<T, std::int64_t>::value && h.type == npy_dtype::int64) {
      std::memcpy(out + done, buf.data(), n * width);
    } else if (std::is_same<T, float>::value && h.type == npy_dtype::float32) {
      std::memcpy(out + done, buf.data(), n * width);
    } else {
      for (std::uint64_t i = 0; i < n; ++i)
        out[done + i] = convert_from<T>(h.type, &buf[i * width]);
    }
    done += n;
  }
}

template void read_npy_elements<std::int64_t>(const npy_header&, std::uint64_t, std::uint64_t,
                                              std::int64_t*);
template void read_npy_elements<std::uint8_t>(const npy_header&, std::uint64_t, std::uint64_t,
                                              std::uint8_t*);
template void read_npy_elements<float>(const npy_header&, std::uint64_t, std::uint64_t, float*);

}  // namespace wholestore::graph::detail
