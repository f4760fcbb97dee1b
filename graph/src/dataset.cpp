// Datasets on disk, the reading side: strict manifest parsing, array files with checksums, CSR
// validation and degree statistics (writing is in dataset_write.cpp).  See
// docs/dataset-format.md for the format itself.
#include <graph/dataset.hpp>

#include "csr_check.hpp"
#include "dataset_files.hpp"

#include <wholememory/allocation.hpp>
#include <wholememory/convert.hpp>
#include <wholememory/error.hpp>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <sstream>
#include <type_traits>

namespace wholestore::graph {

namespace detail {

std::string join(const std::string& dir, const std::string& name) {
  return (std::filesystem::path(dir) / name).string();
}

file_ptr open_file(const std::string& path, const char* mode) {
  file_ptr f(std::fopen(path.c_str(), mode));
  if (!f) {
    int err = errno;
    WM_FAIL(wholememory::system_error,
            path << ": cannot open (" << wholememory::errno_text(err) << ")");
  }
  return f;
}

std::string hex64(std::uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "0x%016llx", static_cast<unsigned long long>(v));
  return buf;
}

void check_labels(const host_csr& graph, const std::string& source) {
  const std::uint64_t n = graph.num_nodes;
  WM_EXPECTS(graph.node_labels.empty() == graph.node_split.empty(),
             source << ": node_labels and node_split go together (" << graph.node_labels.size()
                    << " and " << graph.node_split.size() << " entries)");
  if (graph.node_labels.empty()) return;
  WM_EXPECTS(graph.node_labels.size() == n && graph.node_split.size() == n,
             source << ": node_labels has " << graph.node_labels.size() << " and node_split "
                    << graph.node_split.size() << " entries, expected num_nodes = " << n);
  WM_EXPECTS(graph.num_classes >= 1, source << ": node_labels without num_classes");
  for (std::uint64_t v = 0; v < n; ++v) {
    const std::int32_t c = graph.node_labels[v];
    WM_EXPECTS(c == unlabelled || (c >= 0 && static_cast<std::uint32_t>(c) < graph.num_classes),
               source << ": node " << v << " has label " << c << ", outside [0, num_classes = "
                      << graph.num_classes << ") and not " << unlabelled << " (unlabelled)");
    const std::uint8_t s = graph.node_split[v];
    WM_EXPECTS(s <= split_none, source << ": node " << v << " has split " << int(s)
                                       << "; 0 train, 1 validation, 2 test, 3 none");
    // A node a trainer or an evaluation would read must have a class to read.
    WM_EXPECTS(s == split_none || c != unlabelled,
               source << ": node " << v << " is in split " << int(s)
                      << " (0 train, 1 validation, 2 test) but unlabelled (label " << unlabelled
                      << ")");
  }
}

void validate_csr(const host_csr& graph, const std::string& source) {
  const std::uint64_t n = graph.num_nodes, m = graph.num_edges();
  WM_EXPECTS(n < std::numeric_limits<std::uint64_t>::max() && graph.row_offsets.size() == n + 1,
             source << ": row_offsets has " << graph.row_offsets.size()
                    << " entries, expected num_nodes + 1 = " << n + 1);
  WM_EXPECTS(graph.edge_weights.empty() || graph.edge_weights.size() == m,
             source << ": edge_weights has " << graph.edge_weights.size()
                    << " entries, expected 0 or num_edges = " << m);
  WM_EXPECTS(graph.node_features.size() == n * graph.feature_dim,
             source << ": node_features has " << graph.node_features.size()
                    << " entries, expected num_nodes * feature_dim = " << n * graph.feature_dim);
  WM_EXPECTS(graph.node_ids.empty() || graph.node_ids.size() == n,
             source << ": node_ids has " << graph.node_ids.size()
                    << " entries, expected 0 or num_nodes = " << n);
  check_labels(graph, source);
  detail::csr_checker check(source, n, m);
  check.row_offsets(graph.row_offsets.data(), 0, graph.row_offsets.size());
  check.col_indices(graph.col_indices.data(), 0, graph.col_indices.size());
  check.edge_weights(graph.edge_weights.data(), 0, graph.edge_weights.size());
  check.finish();
}

}  // namespace detail

namespace {

namespace fs = std::filesystem;
using detail::file_ptr;
using detail::hex64;
using detail::io_chunk_bytes;
using detail::join;
using detail::manifest_name;
using detail::open_file;
using wholememory::dtype;

// Reads a whole array file of Src elements into `dst` as Dst.  Sizes were checked by
// read_manifest; a short read here means the file changed under us.
template <typename Dst, typename Src>
void read_array(const std::string& dir, const array_file& a, std::vector<Dst>& dst) {
  const std::string path = join(dir, a.name);
  file_ptr f = open_file(path, "rb");
  dst.resize(a.count);
  const std::size_t chunk = io_chunk_bytes / sizeof(Src);
  std::vector<Src> buf;
  for (std::size_t done = 0; done < a.count; done += chunk) {
    std::size_t n = std::min<std::size_t>(chunk, a.count - done);
    Src* target;
    if constexpr (std::is_same<Dst, Src>::value) {
      target = dst.data() + done;
    } else {
      buf.resize(n);
      target = buf.data();
    }
    std::size_t got = std::fread(target, sizeof(Src), n, f.get());
    WM_EXPECTS(got == n, path << ": truncated while reading: expected " << a.bytes << " bytes, got "
                              << (done + got) * sizeof(Src));
    if constexpr (!std::is_same<Dst, Src>::value) {
      for (std::size_t i = 0; i < n; ++i) {
        if constexpr (std::is_integral<Dst>::value) {
          dst[done + i] = static_cast<Dst>(buf[i]);
        } else {
          dst[done + i] = wholememory::convert_element<Dst>(buf[i]);
        }
      }
    }
  }
}

// ---- manifest parsing ----

struct manifest_entry {
  std::string value;
  int line;
};

class manifest_parser {
 public:
  manifest_parser(std::string path, std::map<std::string, manifest_entry> entries)
      : path_(std::move(path)), entries_(std::move(entries)) {}

  bool has(const std::string& key) const { return entries_.count(key) != 0; }

  const manifest_entry& entry(const std::string& key) const {
    auto it = entries_.find(key);
    WM_EXPECTS(it != entries_.end(), path_ << ": missing required key '" << key << "'");
    return it->second;
  }

  std::string where(const std::string& key) const {
    return path_ + ":" + std::to_string(entry(key).line);
  }

  std::uint64_t get_u64(const std::string& key, bool hex = false) const {
    const manifest_entry& e = entry(key);
    const std::string& s = e.value;
    std::size_t start = 0;
    int base = 10;
    if (hex) {
      WM_EXPECTS(s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X'),
                 where(key) << ": " << key << " '" << s << "' is not a 0x-prefixed hex number");
      start = 2;
      base = 16;
    }
    bool ok = s.size() > start && s.size() - start <= 20;
    for (std::size_t i = start; ok && i < s.size(); ++i) {
      ok = base == 16 ? std::isxdigit(static_cast<unsigned char>(s[i])) != 0
                      : (s[i] >= '0' && s[i] <= '9');
    }
    errno = 0;
    unsigned long long v = ok ? std::strtoull(s.c_str() + start, nullptr, base) : 0;
    WM_EXPECTS(ok && errno == 0,
               where(key) << ": " << key << " '" << s << "' is not an unsigned 64-bit number");
    return v;
  }

  bool get_bool(const std::string& key) const {
    const std::string& s = entry(key).value;
    WM_EXPECTS(s == "true" || s == "false",
               where(key) << ": " << key << " '" << s << "' is not true or false");
    return s == "true";
  }

  const std::string& get_string(const std::string& key) const { return entry(key).value; }

  dtype get_dtype(const std::string& key) const {
    const std::string& s = entry(key).value;
    try {
      return wholememory::parse_dtype(s);
    } catch (const wholememory::logic_error&) {
      WM_FAIL(wholememory::logic_error, where(key)
                                            << ": " << key << " '" << s << "' is not a dtype name");
    }
  }

  // A plain file name inside the dataset directory: no path separators, no "..".
  std::string get_file_name(const std::string& key) const {
    const std::string& s = entry(key).value;
    WM_EXPECTS(!s.empty() && s != "." && s != ".." && s.find('/') == std::string::npos &&
                   s.find('\\') == std::string::npos,
               where(key) << ": " << key << " '" << s
                          << "' must be a file name inside the dataset directory");
    return s;
  }

  array_file get_array(const std::string& prefix) const {
    array_file a;
    a.name = get_file_name(prefix + ".file");
    a.type = get_dtype(prefix + ".dtype");
    a.count = get_u64(prefix + ".count");
    a.bytes = get_u64(prefix + ".bytes");
    a.checksum = get_u64(prefix + ".checksum", true);
    const std::uint64_t size = wholememory::dtype_size(a.type);
    WM_EXPECTS(
        a.count <= std::numeric_limits<std::uint64_t>::max() / size && a.bytes == a.count * size,
        where(prefix + ".bytes") << ": " << prefix << ".bytes is " << a.bytes
                                 << ", expected count * dtype size = " << a.count << " * " << size);
    return a;
  }

  // True when any key of the optional array `prefix` is present; then all must be.
  bool has_array(const std::string& prefix) const {
    for (const char* field : {".file", ".dtype", ".count", ".bytes", ".checksum"}) {
      if (has(prefix + field)) return true;
    }
    return false;
  }

  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::map<std::string, manifest_entry> entries_;
};

bool is_known_key(const std::string& key) {
  static const char* const plain[] = {
      "format_version", "num_nodes",     "num_edges",      "directed",          "direction",
      "feature_dim",    "node_ids_file", "node_ids_bytes", "node_ids_checksum", "num_classes"};
  for (const char* k : plain) {
    if (key == k) return true;
  }
  for (const char* prefix : {"row_offsets", "col_indices", "edge_weights", "node_features",
                             "node_labels", "node_split"}) {
    for (const char* field : {".file", ".dtype", ".count", ".bytes", ".checksum"}) {
      if (key == std::string(prefix) + field) return true;
    }
  }
  return false;
}

std::string trim(const std::string& s) {
  std::size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  std::size_t e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

std::map<std::string, manifest_entry> parse_manifest_lines(const std::string& path) {
  // A directory opens as an empty stream on Linux: say what it is instead of "missing key".
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  WM_EXPECTS(!fs::exists(st) || fs::is_regular_file(st),
             path << ": the manifest is not a regular file (it is "
                  << (fs::is_directory(st) ? "a directory" : "a special file") << ")");
  std::ifstream in(path, std::ios::binary);
  WM_EXPECTS(in.is_open(), path << ": cannot open the manifest (missing or unreadable)");
  std::map<std::string, manifest_entry> entries;
  std::string raw;
  int line_no = 0;
  while (std::getline(in, raw)) {
    ++line_no;
    std::string line = trim(raw);
    if (line.empty() || line[0] == '#') continue;
    std::size_t colon = line.find(": ");
    if (colon == std::string::npos && line.back() == ':') colon = line.size() - 1;
    WM_EXPECTS(colon != std::string::npos && colon > 0,
               path << ":" << line_no << ": expected 'key: value', got '" << line << "'");
    std::string key = trim(line.substr(0, colon));
    std::string value = trim(line.substr(colon + 1));
    // Values are written unquoted and never contain " #", so a comment can follow them.
    std::size_t hash = value.find(" #");
    if (hash != std::string::npos) value = trim(value.substr(0, hash));
    WM_EXPECTS(is_known_key(key), path << ":" << line_no << ": unknown key '" << key << "'");
    WM_EXPECTS(entries.count(key) == 0, path << ":" << line_no << ": key '" << key
                                             << "' repeats line " << entries[key].line);
    entries[key] = manifest_entry{value, line_no};
  }
  return entries;
}

// Checks that the file of `a` exists with exactly a.bytes bytes.
void check_file_size(const std::string& dir, const array_file& a) {
  const std::string path = join(dir, a.name);
  std::error_code ec;
  std::uint64_t size = fs::file_size(path, ec);
  WM_EXPECTS(!ec, path << ": cannot read its size (" << ec.message() << ")");
  WM_EXPECTS(size == a.bytes, path << ": " << (size < a.bytes ? "truncated" : "too long")
                                   << ": expected " << a.bytes << " bytes, found " << size);
}

std::uint64_t file_checksum(const std::string& path) {
  file_ptr f = open_file(path, "rb");
  std::vector<char> buf(io_chunk_bytes);
  std::uint64_t h = detail::fnv_offset_basis;
  std::size_t got;
  while ((got = std::fread(buf.data(), 1, buf.size(), f.get())) > 0) {
    h = fnv1a64(buf.data(), got, h);
  }
  WM_EXPECTS(!std::ferror(f.get()), path << ": read error while computing its checksum");
  return h;
}

}  // namespace

const char* edge_direction_name(edge_direction d) { return d == edge_direction::in ? "in" : "out"; }

std::uint64_t fnv1a64(const void* data, std::size_t bytes, std::uint64_t seed) {
  const auto* p = static_cast<const unsigned char*>(data);
  std::uint64_t h = seed;
  for (std::size_t i = 0; i < bytes; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

manifest read_manifest(const std::string& dir) {
  std::error_code ec;
  WM_EXPECTS(fs::is_directory(dir, ec),
             dir << ": no such dataset directory"
                 << (fs::exists(dir, ec) ? " (it is not a directory)" : " (it does not exist)"));
  const std::string path = join(dir, manifest_name);
  manifest_parser p(path, parse_manifest_lines(path));
  manifest m;
  const std::uint64_t version = p.get_u64("format_version");
  WM_EXPECTS(version == static_cast<std::uint64_t>(dataset_format_version),
             p.where("format_version")
                 << ": format_version " << version << " is not supported (this build reads version "
                 << dataset_format_version << ")");
  m.num_nodes = p.get_u64("num_nodes");
  m.num_edges = p.get_u64("num_edges");
  m.directed = p.get_bool("directed");
  if (p.has("direction")) {  // absent in datasets written before it: rows by source
    const std::string& d = p.get_string("direction");
    WM_EXPECTS(d == "out" || d == "in", p.where("direction")
                                            << ": direction '" << d
                                            << "' is not out (rows by source) or in (rows by "
                                               "destination)");
    m.direction = d == "in" ? edge_direction::in : edge_direction::out;
  }

  m.row_offsets = p.get_array("row_offsets");
  WM_EXPECTS(m.row_offsets.type == dtype::int64, p.where("row_offsets.dtype")
                                                     << ": row_offsets.dtype must be int64");
  WM_EXPECTS(m.num_nodes < std::numeric_limits<std::uint64_t>::max() &&
                 m.row_offsets.count == m.num_nodes + 1,
             p.where("row_offsets.count") << ": row_offsets.count " << m.row_offsets.count
                                          << " does not match num_nodes + 1 = " << m.num_nodes + 1);

  m.col_indices = p.get_array("col_indices");
  WM_EXPECTS(m.col_indices.type == dtype::int64 ||
                 (m.col_indices.type == dtype::int32 && m.num_nodes < detail::int32_node_limit),
             p.where("col_indices.dtype")
                 << ": col_indices.dtype " << wholememory::dtype_name(m.col_indices.type)
                 << " cannot hold ids of " << m.num_nodes << " nodes (int32 below 2^31, int64)");
  WM_EXPECTS(m.col_indices.count == m.num_edges,
             p.where("col_indices.count") << ": col_indices.count " << m.col_indices.count
                                          << " does not match num_edges " << m.num_edges);

  if (p.has_array("edge_weights")) {
    m.edge_weights = p.get_array("edge_weights");
    WM_EXPECTS(m.edge_weights->type == dtype::float32,
               p.where("edge_weights.dtype") << ": edge_weights.dtype must be float32");
    WM_EXPECTS(m.edge_weights->count == m.num_edges,
               p.where("edge_weights.count") << ": edge_weights.count " << m.edge_weights->count
                                             << " does not match num_edges " << m.num_edges);
  }
  if (p.has_array("node_features")) {
    m.node_features = p.get_array("node_features");
    m.feature_dim = p.get_u64("feature_dim");
    const dtype t = m.node_features->type;
    WM_EXPECTS(t == dtype::float32 || t == dtype::float16 || t == dtype::bfloat16,
               p.where("node_features.dtype")
                   << ": node_features.dtype must be float32, float16 or bfloat16");
    WM_EXPECTS(m.feature_dim > 0 &&
                   m.num_nodes <= std::numeric_limits<std::uint64_t>::max() / m.feature_dim &&
                   m.node_features->count == m.num_nodes * m.feature_dim,
               p.where("node_features.count") << ": node_features.count " << m.node_features->count
                                              << " does not match num_nodes * feature_dim = "
                                              << m.num_nodes << " * " << m.feature_dim);
  } else {
    WM_EXPECTS(!p.has("feature_dim"), p.where("feature_dim")
                                          << ": feature_dim given without node_features.*");
  }
  if (p.has("node_ids_file")) {
    m.node_ids_file = p.get_file_name("node_ids_file");
    const std::string ids = join(dir, m.node_ids_file);
    WM_EXPECTS(fs::is_regular_file(ids), p.where("node_ids_file")
                                             << ": " << ids << " does not exist");
    // Written together since they were introduced; absent together in older datasets.
    WM_EXPECTS(p.has("node_ids_bytes") == p.has("node_ids_checksum"),
               p.where(p.has("node_ids_bytes") ? "node_ids_bytes" : "node_ids_checksum")
                   << ": node_ids_bytes and node_ids_checksum go together");
    if (p.has("node_ids_bytes")) {
      m.node_ids_bytes = p.get_u64("node_ids_bytes");
      m.node_ids_checksum = p.get_u64("node_ids_checksum", true);
      std::error_code ec;
      const std::uint64_t on_disk = fs::file_size(ids, ec);
      WM_EXPECTS(!ec && on_disk == *m.node_ids_bytes,
                 ids << ": " << (ec ? ec.message() : std::to_string(on_disk) + " bytes")
                     << ", the manifest says " << *m.node_ids_bytes << " bytes ("
                     << p.where("node_ids_bytes") << "; truncated or modified)");
    }
  } else {
    for (const char* key : {"node_ids_bytes", "node_ids_checksum"}) {
      WM_EXPECTS(!p.has(key), p.where(key) << ": " << key << " given without node_ids_file");
    }
  }

  WM_EXPECTS(p.has_array("node_labels") == p.has_array("node_split"),
             p.where(p.has_array("node_labels") ? "node_labels.file" : "node_split.file")
                 << ": node_labels and node_split go together");
  if (p.has_array("node_labels")) {
    m.node_labels = p.get_array("node_labels");
    m.node_split = p.get_array("node_split");
    const std::uint64_t classes = p.get_u64("num_classes");
    WM_EXPECTS(classes >= 1 && classes < (std::uint64_t{1} << 31),
               p.where("num_classes") << ": num_classes " << classes << " must be in [1, 2^31)");
    m.num_classes = static_cast<std::uint32_t>(classes);
    WM_EXPECTS(m.node_labels->type == dtype::int32, p.where("node_labels.dtype")
                                                        << ": node_labels.dtype must be int32");
    WM_EXPECTS(m.node_split->type == dtype::uint8, p.where("node_split.dtype")
                                                       << ": node_split.dtype must be uint8");
    for (const auto* a : {&*m.node_labels, &*m.node_split}) {
      const std::string name = a == &*m.node_labels ? "node_labels" : "node_split";
      WM_EXPECTS(a->count == m.num_nodes, p.where(name + ".count")
                                              << ": " << name << ".count " << a->count
                                              << " does not match num_nodes " << m.num_nodes);
    }
  } else {
    WM_EXPECTS(!p.has("num_classes"), p.where("num_classes")
                                          << ": num_classes given without node_labels.*");
  }

  check_file_size(dir, m.row_offsets);
  check_file_size(dir, m.col_indices);
  if (m.edge_weights) check_file_size(dir, *m.edge_weights);
  if (m.node_features) check_file_size(dir, *m.node_features);
  if (m.node_labels) check_file_size(dir, *m.node_labels);
  if (m.node_split) check_file_size(dir, *m.node_split);
  return m;
}

void verify_checksums(const std::string& dir, const manifest& m) {
  std::vector<const array_file*> files = {&m.row_offsets, &m.col_indices};
  if (m.edge_weights) files.push_back(&*m.edge_weights);
  if (m.node_features) files.push_back(&*m.node_features);
  if (m.node_labels) files.push_back(&*m.node_labels);
  if (m.node_split) files.push_back(&*m.node_split);
  for (const array_file* a : files) {
    const std::string path = join(dir, a->name);
    const std::uint64_t actual = file_checksum(path);
    WM_EXPECTS(actual == a->checksum, path << ": checksum mismatch: manifest says "
                                           << hex64(a->checksum) << ", file has " << hex64(actual)
                                           << " (corrupt or modified)");
  }
  verify_node_ids(dir, m);
}

void verify_node_ids(const std::string& dir, const manifest& m) {
  // The ids: one line per node, whether or not the manifest has their checksum (issue 36:
  // `sample` loaded a file with more lines than nodes when it had none), and the checksum
  // where it has one.  A line break inside an id would shift every later one; the writer
  // refuses those, so a count that differs is damage.
  if (!m.node_ids_file.empty()) {
    const std::string path = join(dir, m.node_ids_file);
    file_ptr f = open_file(path, "rb");
    std::vector<char> buf(io_chunk_bytes);
    std::uint64_t h = detail::fnv_offset_basis, lines = 0;
    std::size_t got;
    while ((got = std::fread(buf.data(), 1, buf.size(), f.get())) > 0) {
      h = fnv1a64(buf.data(), got, h);
      lines += static_cast<std::uint64_t>(std::count(buf.data(), buf.data() + got, '\n'));
    }
    WM_EXPECTS(!std::ferror(f.get()), path << ": read error while computing its checksum");
    WM_EXPECTS(!m.node_ids_checksum || h == *m.node_ids_checksum,
               path << ": checksum mismatch: manifest says " << hex64(*m.node_ids_checksum)
                    << ", file has " << hex64(h) << " (corrupt or modified)");
    WM_EXPECTS(lines == m.num_nodes,
               path << ": has " << lines << " lines, expected num_nodes = " << m.num_nodes);
  }
}

namespace {

// read_dataset holds every array in host memory: a manifest whose sizes cannot fit is refused
// before minutes of hashing (issue 36: 80 GB of claimed zeros in sparse files were hashed first,
// then the allocation failed).
void check_fits_in_host_memory(const std::string& dir, const manifest& m) {
  const auto bytes_of = [](const array_file& a, std::size_t element) { return a.count * element; };
  std::size_t need = bytes_of(m.row_offsets, 8) + bytes_of(m.col_indices, 8);
  if (m.edge_weights) need += bytes_of(*m.edge_weights, 4);
  if (m.node_features) need += bytes_of(*m.node_features, 4);  // read as float32
  if (m.node_labels) need += bytes_of(*m.node_labels, 4);
  if (m.node_split) need += bytes_of(*m.node_split, 1);
  const std::size_t available = wholememory::available_host_bytes();
  if (available != 0 && need > available) {
    WM_FAIL(wholememory::out_of_memory,
            "dataset " << dir << " needs " << need / 1048576
                       << " MiB of host memory to be read whole, and this host has "
                       << available / 1048576
                       << " MiB available (MemAvailable, or the cgroup's limit); nothing was "
                          "read.  Load it over several ranks or hosts (load_graph reads each "
                          "rank's part), or check the manifest's counts");
  }
}

}  // namespace

host_csr read_dataset(const std::string& dir) {
  const manifest m = read_manifest(dir);
  check_fits_in_host_memory(dir, m);
  verify_checksums(dir, m);
  host_csr g;
  g.num_nodes = m.num_nodes;
  g.directed = m.directed;
  g.direction = m.direction;
  read_array<std::int64_t, std::int64_t>(dir, m.row_offsets, g.row_offsets);
  if (m.col_indices.type == dtype::int32) {
    read_array<std::int64_t, std::int32_t>(dir, m.col_indices, g.col_indices);
  } else {
    read_array<std::int64_t, std::int64_t>(dir, m.col_indices, g.col_indices);
  }
  if (m.edge_weights) read_array<float, float>(dir, *m.edge_weights, g.edge_weights);
  if (m.node_features) {
    g.feature_dim = m.feature_dim;
    switch (m.node_features->type) {
      case dtype::float16:
        read_array<float, wholememory::half_t>(dir, *m.node_features, g.node_features);
        break;
      case dtype::bfloat16:
        read_array<float, wholememory::bfloat16_t>(dir, *m.node_features, g.node_features);
        break;
      default:
        read_array<float, float>(dir, *m.node_features, g.node_features);
        break;
    }
  }
  if (m.node_labels) {
    g.num_classes = m.num_classes;
    read_array<std::int32_t, std::int32_t>(dir, *m.node_labels, g.node_labels);
    read_array<std::uint8_t, std::uint8_t>(dir, *m.node_split, g.node_split);
  }
  if (!m.node_ids_file.empty()) {
    const std::string path = join(dir, m.node_ids_file);
    std::ifstream in(path, std::ios::binary);
    WM_EXPECTS(in.is_open(), path << ": cannot open");
    std::string line;
    g.node_ids.reserve(m.num_nodes);
    while (std::getline(in, line)) g.node_ids.push_back(line);
    WM_EXPECTS(
        g.node_ids.size() == m.num_nodes,
        path << ": has " << g.node_ids.size() << " lines, expected num_nodes = " << m.num_nodes);
  }
  // Checksums match the manifest, but a manifest written by other tools may still describe a
  // broken CSR; check it before anyone indexes with it.
  detail::validate_csr(g, "dataset " + dir);
  return g;
}

degree_stats compute_degree_stats(const std::vector<std::int64_t>& row_offsets) {
  degree_stats s;
  if (row_offsets.size() < 2) return s;
  const std::size_t n = row_offsets.size() - 1;
  std::vector<std::uint64_t> deg(n);
  s.min = std::numeric_limits<std::uint64_t>::max();
  double sum = 0;
  for (std::size_t v = 0; v < n; ++v) {
    WM_EXPECTS(row_offsets[v + 1] >= row_offsets[v],
               "compute_degree_stats: row_offsets decreases at node " << v);
    const std::uint64_t d = static_cast<std::uint64_t>(row_offsets[v + 1] - row_offsets[v]);
    deg[v] = d;
    s.min = std::min(s.min, d);
    s.max = std::max(s.max, d);
    sum += static_cast<double>(d);
    s.isolated += d == 0;
    // Bucket k holds 2^(k-1) <= d < 2^k, i.e. k is the bit width of d.
    std::size_t k = 0;
    for (std::uint64_t x = d; x != 0; x >>= 1) ++k;
    if (s.log2_histogram.size() <= k) s.log2_histogram.resize(k + 1, 0);
    ++s.log2_histogram[k];
  }
  s.mean = sum / static_cast<double>(n);
  auto mid = deg.begin() + static_cast<std::ptrdiff_t>(n / 2);
  std::nth_element(deg.begin(), mid, deg.end());
  if (n % 2 == 1) {
    s.median = static_cast<double>(*mid);
  } else {
    const std::uint64_t upper = *mid;
    const std::uint64_t lower = *std::max_element(deg.begin(), mid);
    s.median = (static_cast<double>(lower) + static_cast<double>(upper)) / 2.0;
  }
  return s;
}

}  // namespace wholestore::graph
