// Edge-list text to a host CSR: a hand-written line parser over big chunks of the file (no
// iostream per token) and id remapping in first-appearance order; the CSR is built by
// detail::build_csr (edge_csr.hpp).
#include <graph/convert.hpp>

#include "edge_csr.hpp"

#include <wholememory/error.hpp>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace wholestore::graph {

namespace {

constexpr std::size_t read_chunk_bytes = std::size_t{16} << 20;
// Ids kept as-is must stay below this so that num_nodes = max id + 1 is a sane allocation.
constexpr std::uint64_t max_as_is_id = std::uint64_t{1} << 40;

struct file_closer {
  void operator()(std::FILE* f) const {
    if (f && f != stdin) std::fclose(f);
  }
};

bool is_separator(char c) { return c == ' ' || c == '\t' || c == ',' || c == '\f' || c == '\v'; }

// Parses a canonical non-negative decimal integer (no sign, no leading zeros) below 2^63.
bool parse_canonical_uint(std::string_view s, std::uint64_t& value) {
  if (s.empty() || s.size() > 18 || (s.size() > 1 && s[0] == '0')) return false;
  std::uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<std::uint64_t>(c - '0');
  }
  value = v;
  return true;
}

bool is_integer(std::string_view s) {
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) s.remove_prefix(1);
  if (s.empty()) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// `field` must be followed in memory by a non-number character (a separator, a line end or the
// string's terminating NUL), which holds for fields inside the read buffer.
// How a weight field reads: a float32, not a number at all, or a number too large for float32
// (1e300: strtof's overflow).  A number too small for float32 (1e-50) reads as its rounding to
// zero or a subnormal, as any decimal rounds to the nearest float.
enum class weight_text { number, not_a_number, too_large };

weight_text parse_weight(std::string_view field, float& weight) {
  if (field.empty()) return weight_text::not_a_number;
  char* end = nullptr;
  errno = 0;
  weight = std::strtof(field.data(), &end);
  if (end != field.data() + field.size()) return weight_text::not_a_number;
  if (errno == ERANGE && std::fabs(weight) > 1.0f) return weight_text::too_large;
  return weight_text::number;
}

// Integer id -> node index, open addressing with linear probing: the node-based
// std::unordered_map spends most of a large conversion on cache misses.
class integer_id_map {
 public:
  // Returns the index of `key`, inserting `next` for a new key (then `inserted` is true).
  std::int64_t find_or_insert(std::uint64_t key, std::int64_t next, bool& inserted) {
    if ((size_ + 1) * 2 > slots_.size()) grow();
    std::size_t mask = slots_.size() - 1;
    for (std::size_t i = hash(key) & mask;; i = (i + 1) & mask) {
      slot& s = slots_[i];
      if (s.value < 0) {
        s = slot{key, next};
        ++size_;
        inserted = true;
        return next;
      }
      if (s.key == key) {
        inserted = false;
        return s.value;
      }
    }
  }

 private:
  struct slot {
    std::uint64_t key;
    std::int64_t value;  // -1: empty
  };
  static std::size_t hash(std::uint64_t key) {
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdull;
    key ^= key >> 33;
    return static_cast<std::size_t>(key);
  }
  void grow() {
    std::vector<slot> old = std::move(slots_);
    slots_.assign(old.empty() ? 1024 : old.size() * 2, slot{0, -1});
    const std::size_t mask = slots_.size() - 1;
    for (const slot& s : old) {
      if (s.value < 0) continue;
      std::size_t i = hash(s.key) & mask;
      while (slots_[i].value >= 0) i = (i + 1) & mask;
      slots_[i] = s;
    }
  }
  std::vector<slot> slots_;
  std::size_t size_ = 0;
};

class edge_list_parser {
 public:
  edge_list_parser(const std::string& path, const convert_options& options)
      : path_(path), options_(options) {}

  // One line without its line end.  Throws for a malformed line.
  void line(std::string_view text) {
    ++line_no_;
    std::size_t b = 0;
    while (b < text.size() && (text[b] == ' ' || text[b] == '\t')) ++b;
    if (b == text.size() || text[b] == '#' || text[b] == '%') return;
    split(line_no_, text);
    if (end_marker_line_ != 0) {
      fail(end_marker_line_, end_marker_text_,
           "'-1' ends the edge list but more lines follow it (next at line " +
               std::to_string(line_no_) + ")");
    }
    if (num_fields_ == 1 && fields_[0] == "-1") {
      // Some exporters (the shared ego-Facebook copy among them) close the list with "-1".
      end_marker_line_ = line_no_;
      end_marker_text_ = std::string(text);
      return;
    }
    if (!seen_data_line_) {
      seen_data_line_ = true;
      if (num_fields_ == 1) {  // a lone node count
        skipped_header(line_no_, text);
        return;
      }
      if (!(is_integer(fields_[0]) && is_integer(fields_[1]))) {
        if (is_column_name(fields_[0])) {
          skipped_header(line_no_, text);
          return;
        }
        // "a b" may be a header or the first edge of a file with string ids: the next data
        // line decides (a header when its ids are integers).
        pending_ = std::string(text);
        pending_line_ = line_no_;
        return;
      }
    } else if (pending_line_ != 0) {
      // fields_ past num_fields_ are stale views, so a short line cannot vote.
      const bool header = num_fields_ >= 2 && is_integer(fields_[0]) && is_integer(fields_[1]);
      if (header) {
        skipped_header(pending_line_, pending_);
      } else {
        flush_pending();
      }
      pending_line_ = 0;
      split(line_no_, text);
    }
    edge(line_no_, text);
  }

  /// What was read so far (complete after finish()).
  const convert_stats& stats() const { return stats_; }
  void set_byte_order_mark() { stats_.byte_order_mark = true; }

  host_csr finish() {
    stats_.lines = line_no_;
    if (pending_line_ != 0) flush_pending();  // a single data line is an edge, not a header
    host_csr g;
    const bool as_is = options_.numeric_ids_as_is && all_numeric_;
    std::uint64_t n = next_id_;
    if (as_is) {
      // Remapped ids back to the integers they came from.
      std::uint64_t max_id = 0;
      for (std::uint64_t v : numeric_value_) max_id = std::max(max_id, v);
      n = next_id_ == 0 ? 0 : max_id + 1;
      for (auto& s : src_) s = static_cast<std::int64_t>(numeric_value_[s]);
      for (auto& d : dst_) d = static_cast<std::int64_t>(numeric_value_[d]);
    } else {
      g.node_ids = node_id_texts();
    }
    g.num_nodes = n;
    detail::build_csr(g, detail::edge_arrays{std::move(src_), std::move(dst_), std::move(weights_)},
                      options_);
    return g;
  }

 private:
  [[noreturn]] void fail(std::uint64_t line_no, std::string_view text, const std::string& why) {
    std::string shown(text.substr(0, 200));
    if (text.size() > 200) shown += "...";
    WM_FAIL(wholememory::logic_error,
            path_ << ":" << line_no << ": malformed line (" << why << "): '" << shown << "'");
  }

  void split(std::uint64_t line_no, std::string_view text) {
    num_fields_ = 0;
    std::size_t i = 0;
    int commas = 0;
    bool first = true;
    while (true) {
      while (i < text.size() && is_separator(text[i])) {
        if (text[i] == ',') ++commas;
        ++i;
      }
      if (i == text.size()) {
        if (commas > 0) fail(line_no, text, "empty field after a comma");
        return;
      }
      if (commas > 1 || (first && commas > 0)) fail(line_no, text, "empty field between commas");
      commas = 0;
      first = false;
      std::size_t start = i;
      while (i < text.size() && !is_separator(text[i])) ++i;
      if (num_fields_ < fields_.size()) fields_[num_fields_] = text.substr(start, i - start);
      ++num_fields_;
    }
  }

  void skipped_header(std::uint64_t line_no, std::string_view text) {
    stats_.header_line = line_no;
    stats_.header_text = std::string(text.substr(0, 200));
  }

  void flush_pending() {
    const std::string held = std::move(pending_);
    split(pending_line_, held);
    edge(pending_line_, held);
  }

  // The fields of `text` are in fields_.
  void edge(std::uint64_t line_no, std::string_view text) {
    if (num_fields_ < 2) fail(line_no, text, "expected 'src dst' but found one field");
    if (num_fields_ > 3) fail(line_no, text, "expected at most 3 fields (src dst weight)");
    float weight = 1.0f;
    if (num_fields_ == 3) {
      // Without has_weights a numeric third column (a weight) is read and ignored.
      const weight_text read = parse_weight(fields_[2], weight);
      if (read == weight_text::not_a_number) {
        fail(line_no, text, "third field '" + std::string(fields_[2]) + "' is not a number");
      }
      if (read == weight_text::too_large) {
        fail(line_no, text,
             "weight '" + std::string(fields_[2]) +
                 "' must be finite and >= 0 (it is beyond float32's largest, 3.40282e+38)");
      }
      // NaN fails both comparisons.  Such a weight would be sampled as weight zero.
      if (options_.has_weights && !(weight >= 0.0f && weight <= FLT_MAX)) {
        fail(line_no, text, "weight '" + std::string(fields_[2]) + "' must be finite and >= 0");
      }
    } else if (options_.has_weights) {
      fail(line_no, text, "expected a weight in the third field");
    }
    ++stats_.edges;
    const std::int64_t src = node(fields_[0]);
    const std::int64_t dst = node(fields_[1]);
    if (options_.drop_self_loops && src == dst) return;
    src_.push_back(src);
    dst_.push_back(dst);
    if (options_.has_weights) weights_.push_back(weight);
  }

  // Common column names of edge-list headers ("source,target", "from to", "src dst", ...).
  static bool is_column_name(std::string_view s) {
    std::string lower;
    for (char c : s) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    for (const char* name : {"source", "src", "from", "source_id", "src_id", "from_id", "node1",
                             "node_1", "id1", "citing", "cited", "follower", "user1"}) {
      if (lower == name) return true;
    }
    return false;
  }

  std::int64_t node(std::string_view id) {
    std::uint64_t value;
    if (parse_canonical_uint(id, value)) {
      bool inserted = false;
      const std::int64_t index =
          numeric_ids_.find_or_insert(value, static_cast<std::int64_t>(next_id_), inserted);
      if (inserted) add_node(value, false);
      return index;
    }
    all_numeric_ = false;
    key_.assign(id);  // reused, so that ids already seen cost no allocation
    auto it = string_ids_.find(key_);
    if (it != string_ids_.end()) return it->second;
    string_ids_.emplace(key_, static_cast<std::int64_t>(next_id_));
    string_names_.push_back(key_);
    add_node(string_names_.size() - 1, true);
    return static_cast<std::int64_t>(next_id_ - 1);
  }

  // `value`: the integer id, or for a string id its index in string_names_.
  void add_node(std::uint64_t value, bool is_string) {
    ++next_id_;
    numeric_value_.push_back(value);
    is_string_.push_back(is_string);
    if (value >= max_as_is_id) all_numeric_ = false;
  }

  // Original ids as text; integer ids were parsed from canonical decimal text, so printing
  // them gives back exactly what the file said.
  std::vector<std::string> node_id_texts() {
    std::vector<std::string> ids(next_id_);
    for (std::uint64_t v = 0; v < next_id_; ++v) {
      ids[v] = is_string_[v] ? std::move(string_names_[numeric_value_[v]])
                             : std::to_string(numeric_value_[v]);
    }
    return ids;
  }

  const std::string& path_;
  const convert_options& options_;
  std::uint64_t line_no_ = 0;
  std::array<std::string_view, 4> fields_{};
  std::size_t num_fields_ = 0;
  bool seen_data_line_ = false;
  std::string pending_;  // a first data line that may be a header
  std::uint64_t pending_line_ = 0;
  std::uint64_t end_marker_line_ = 0;
  std::string end_marker_text_;

  integer_id_map numeric_ids_;
  std::unordered_map<std::string, std::int64_t> string_ids_;
  std::uint64_t next_id_ = 0;
  bool all_numeric_ = true;
  std::string key_;
  std::vector<std::string> string_names_;
  std::vector<std::uint64_t> numeric_value_;
  std::vector<bool> is_string_;

  std::vector<std::int64_t> src_, dst_;
  std::vector<float> weights_;
  convert_stats stats_;
};

}  // namespace

host_csr convert_edge_list(const std::string& path, const convert_options& options,
                           convert_stats* stats) {
  // "-" is the standard input (a pipe: `zcat edges.txt.gz | wholestore convert ...`); the
  // file is read front to back in chunks, so pipes and FIFOs work as regular files do.
  const bool from_stdin = path == "-";
  const std::string name = from_stdin ? "standard input" : path;
  std::unique_ptr<std::FILE, file_closer> f(from_stdin ? stdin : std::fopen(path.c_str(), "rb"));
  if (!f) {
    int err = errno;
    WM_FAIL(wholememory::system_error,
            path << ": cannot open (" << wholememory::errno_text(err) << ")");
  }
  edge_list_parser parser(name, options);
  std::uint64_t bytes_read = 0;
  // `buffer` holds the unfinished last line of the previous chunk followed by the new chunk.
  std::string buffer;
  bool last_was_cr = false;  // a CRLF split across two chunks is one line end, not two
  bool first_chunk = true;
  while (true) {
    const std::size_t keep = buffer.size();
    buffer.resize(keep + read_chunk_bytes);
    const std::size_t got = std::fread(&buffer[keep], 1, read_chunk_bytes, f.get());
    buffer.resize(keep + got);
    bytes_read += got;
    if (options.progress) options.progress(bytes_read);
    WM_EXPECTS(!std::ferror(f.get()), name << ": read error");
    const bool eof = got == 0;
    std::size_t start = 0;
    if (keep == 0 && last_was_cr && !buffer.empty() && buffer[0] == '\n') start = 1;
    if (first_chunk) {
      // A UTF-8 byte order mark is not part of the first id (it made the header heuristic
      // take the first edge for a header).  A file shorter than the mark cannot hold one.
      first_chunk = false;
      if (buffer.compare(0, 3, "\xEF\xBB\xBF") == 0) {
        start = 3;
        parser.set_byte_order_mark();
      }
    }
    last_was_cr = false;
    const char* data = buffer.data();
    const std::size_t size = buffer.size();
    std::size_t i = start;
    // Next '\n' and '\r' at or after i, searched again only once passed, so a file with
    // only bare CR line ends is not rescanned for '\n' on every line.
    auto find = [&](char c, std::size_t from) {
      const void* hit = std::memchr(data + from, c, size - from);
      return hit ? static_cast<std::size_t>(static_cast<const char*>(hit) - data) : size;
    };
    std::size_t next_lf = find('\n', i), next_cr = find('\r', i);
    while (i < size) {
      if (next_lf < i) next_lf = find('\n', i);
      if (next_cr < i) next_cr = find('\r', i);
      const std::size_t e = std::min(next_lf, next_cr);
      if (e == size) break;
      const char* end = data + e;
      parser.line(std::string_view(data + start, e - start));
      i = e + 1;
      if (*end == '\r') {
        if (i < size && data[i] == '\n') {
          ++i;
        } else if (i == size) {
          last_was_cr = true;
        }
      }
      start = i;
    }
    if (eof) {
      if (start < size) parser.line(std::string_view(data + start, size - start));
      break;
    }
    buffer.erase(0, start);
  }
  host_csr g = parser.finish();
  if (stats) {
    *stats = parser.stats();
    stats->bytes = bytes_read;
  }
  return g;
}

}  // namespace wholestore::graph
