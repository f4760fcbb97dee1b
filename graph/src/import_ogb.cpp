// import_ogb (graph/import.hpp): OGB's raw node-property-prediction layout, csv or csv.gz, read
// line by line with the file and line of every bad value in its message.
#include <graph/import.hpp>

#include "edge_csr.hpp"
#include "import_common.hpp"
#include "text_lines.hpp"

#include <wholememory/error.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace wholestore::graph {

namespace {

namespace fs = std::filesystem;
using detail::input_position;

std::string shown(std::string_view line) {
  std::string s(line.substr(0, 200));
  if (line.size() > 200) s += "...";
  return s;
}

bool is_blank_line(std::string_view line) {
  return std::all_of(line.begin(), line.end(), [](char c) { return c == ' ' || c == '\t'; });
}

// dir/<name>.csv, else dir/<name>.csv.gz; empty when neither is there.
std::string find_csv(const fs::path& dir, const std::string& name) {
  std::error_code ec;
  for (const char* ext : {".csv", ".csv.gz"}) {
    const fs::path p = dir / (name + ext);
    if (fs::is_regular_file(p, ec)) return p.string();
  }
  return "";
}

std::string require_csv(const fs::path& dir, const std::string& name, const char* what) {
  std::string path = find_csv(dir, name);
  WM_EXPECTS(!path.empty(), (dir / name).string()
                                << ".csv(.gz): missing; OGB's raw layout has " << what
                                << " there (docs/dataset-format.md, \"OGB raw layout\")");
  return path;
}

// A file of one line holding one count (num-node-list, num-edge-list).
std::uint64_t read_count(const std::string& path, convert_stats& stats) {
  detail::line_reader in(path);
  std::string_view line;
  std::optional<std::uint64_t> count;
  while (in.next(line)) {
    if (is_blank_line(line)) continue;
    WM_EXPECTS(!count, path << ":" << in.line_number()
                            << ": a second line; import_ogb reads single-graph datasets (node "
                               "property prediction), whose list has one line");
    std::int64_t v = 0;
    std::vector<std::string_view> fields;
    WM_EXPECTS(
        detail::split_csv(line, fields) == 1 && detail::parse_int64(fields[0], v) && v >= 0,
        path << ":" << in.line_number() << ": expected one count, found '" << shown(line) << "'");
    count = static_cast<std::uint64_t>(v);
  }
  WM_EXPECTS(count, path << ": empty; expected one line with a count");
  stats.bytes += in.bytes_read();
  return *count;
}

void read_edges(const std::string& path, std::uint64_t n, detail::edge_arrays& edges,
                convert_stats& stats, const convert_options& options) {
  detail::line_reader in(path);
  std::string_view line;
  std::vector<std::string_view> fields;
  std::uint64_t reported = 0;
  while (in.next(line)) {
    if (is_blank_line(line)) continue;
    std::int64_t u = 0, v = 0;
    WM_EXPECTS(detail::split_csv(line, fields) == 2 && detail::parse_int64(fields[0], u) &&
                   detail::parse_int64(fields[1], v),
               path << ":" << in.line_number() << ": expected 'src,dst' (two node ids), found '"
                    << shown(line) << "'");
    const input_position at{path, in.line_number(), true};
    detail::check_node_id(u, n, "source id", at);
    detail::check_node_id(v, n, "destination id", at);
    edges.src.push_back(u);
    edges.dst.push_back(v);
    if (options.progress && in.bytes_read() != reported) {
      reported = in.bytes_read();
      options.progress(stats.bytes + reported);
    }
  }
  stats.bytes += in.bytes_read();
  stats.lines += in.line_number();
  stats.edges = edges.src.size();
}

// N lines of F comma-separated floats (F from the first line).
void read_features(const std::string& path, host_csr& g, convert_stats& stats) {
  detail::line_reader in(path);
  std::string_view line;
  std::vector<std::string_view> fields;
  std::uint64_t rows = 0;
  while (in.next(line)) {
    const std::size_t f = detail::split_csv(line, fields);
    if (rows == 0) {
      WM_EXPECTS(f >= 1 && !is_blank_line(line),
                 path << ":1: expected the features of node 0, found an empty line");
      g.feature_dim = f;
      g.node_features.reserve(g.num_nodes * f);
    }
    WM_EXPECTS(rows < g.num_nodes, path << ":" << in.line_number()
                                        << ": more lines than nodes (num_nodes = " << g.num_nodes
                                        << " from num-node-list)");
    WM_EXPECTS(f == g.feature_dim, path << ":" << in.line_number() << ": " << f
                                        << " values, expected " << g.feature_dim
                                        << " (as on line 1): '" << shown(line) << "'");
    for (std::size_t k = 0; k < f; ++k) {
      float x = 0;
      WM_EXPECTS(detail::parse_float(fields[k], x),
                 path << ":" << in.line_number() << ": value " << k + 1 << " '" << fields[k]
                      << "' of node " << rows << " is not a number");
      g.node_features.push_back(x);
    }
    ++rows;
  }
  WM_EXPECTS(rows == g.num_nodes, path << ": " << rows << " lines, expected one per node "
                                       << "(num_nodes = " << g.num_nodes << ")");
  stats.bytes += in.bytes_read();
}

bool is_nan_text(std::string_view s) {
  if (s.size() != 3) return false;
  return std::tolower(static_cast<unsigned char>(s[0])) == 'n' &&
         std::tolower(static_cast<unsigned char>(s[1])) == 'a' &&
         std::tolower(static_cast<unsigned char>(s[2])) == 'n';
}

// N lines of one class each; empty, nan or -1: unlabelled.  An integral float ("3.0") is a
// class too (pandas writes a label column with NaNs in it as floats).
std::vector<std::int64_t> read_labels(const std::string& path, std::uint64_t n,
                                      convert_stats& stats) {
  detail::line_reader in(path);
  std::string_view line;
  std::vector<std::string_view> fields;
  std::vector<std::int64_t> labels;
  labels.reserve(n);
  while (in.next(line)) {
    const std::size_t f = detail::split_csv(line, fields);
    WM_EXPECTS(f <= 1, path << ":" << in.line_number() << ": " << f
                            << " columns; one class per node is read (multi-task labels, as in "
                               "ogbn-proteins, are not): '"
                            << shown(line) << "'");
    const std::string_view text = f == 0 ? std::string_view() : fields[0];
    std::int64_t c = 0;
    float x = 0;
    if (text.empty() || is_nan_text(text)) {
      c = unlabelled;
    } else if (!detail::parse_int64(text, c)) {
      WM_EXPECTS(detail::parse_float(text, x) && std::isfinite(x) && std::floor(x) == x &&
                     std::fabs(x) < 2147483648.0f,
                 path << ":" << in.line_number() << ": label '" << text
                      << "' is not a class (an integer; empty or nan for unlabelled)");
      c = static_cast<std::int64_t>(x);
    }
    labels.push_back(c);
  }
  stats.bytes += in.bytes_read();
  return labels;
}

void read_split(const std::string& path, detail::split_builder& splits, convert_stats& stats) {
  detail::line_reader in(path);
  std::string_view line;
  std::vector<std::string_view> fields;
  while (in.next(line)) {
    if (is_blank_line(line)) continue;
    std::int64_t v = 0;
    WM_EXPECTS(
        detail::split_csv(line, fields) == 1 && detail::parse_int64(fields[0], v),
        path << ":" << in.line_number() << ": expected one node id, found '" << shown(line) << "'");
    splits.add(v, input_position{path, in.line_number(), true});
  }
  stats.bytes += in.bytes_read();
}

// split/<name>: `name`, or the only directory under split/; empty when there is no split/.
fs::path pick_split(const fs::path& dir, const std::string& name) {
  const fs::path root = dir / "split";
  std::error_code ec;
  if (!name.empty()) {
    const fs::path chosen = root / name;
    WM_EXPECTS(fs::is_directory(chosen, ec), chosen.string() << ": no such split directory");
    return chosen;
  }
  if (!fs::is_directory(root, ec)) return {};
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(root)) {
    if (entry.is_directory()) names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  if (names.empty()) return {};
  if (names.size() > 1) {
    std::string list;
    for (const std::string& s : names) list += (list.empty() ? "" : ", ") + s;
    WM_FAIL(wholememory::logic_error, root.string() << " holds " << names.size() << " splits ("
                                                    << list << "); name one (the `split` key)");
  }
  return root / names[0];
}

}  // namespace

host_csr import_ogb(const std::string& dir, const convert_options& options,
                    const std::string& split, convert_stats* stats_out) {
  WM_EXPECTS(!options.has_weights && !options.numeric_ids_as_is,
             "import_ogb: has_weights and numeric_ids_as_is are for edge-list text");
  std::error_code ec;
  WM_EXPECTS(fs::is_directory(dir, ec),
             dir << ": not a directory (import_ogb reads OGB's raw layout: DIR/raw/edge.csv.gz, "
                    "DIR/raw/num-node-list.csv.gz, DIR/split/<name>/train.csv.gz, ...)");
  const fs::path raw = fs::path(dir) / "raw";
  WM_EXPECTS(fs::is_directory(raw, ec), raw.string() << ": missing; OGB's raw layout keeps the "
                                                        "graph there");
  // Every file is found before anything is read, so a missing one costs no reading.
  const std::string nodes_file = require_csv(raw, "num-node-list", "the node count");
  const std::string edges_file = require_csv(raw, "edge", "the edges");
  const std::string edge_count_file = find_csv(raw, "num-edge-list");
  const std::string features_file = find_csv(raw, "node-feat");
  const std::string labels_file = find_csv(raw, "node-label");
  const fs::path split_dir = pick_split(dir, split);
  std::string split_files[3];
  if (!split_dir.empty()) {
    WM_EXPECTS(!labels_file.empty(), split_dir.string() << ": splits without labels ("
                                                        << (raw / "node-label").string()
                                                        << ".csv(.gz) is missing)");
    for (std::uint8_t k = 0; k < 3; ++k) {
      split_files[k] = require_csv(split_dir, detail::split_name(k), "a node list");
    }
  }
  auto progress = [&](const convert_stats& s) {
    if (options.progress) options.progress(s.bytes);
  };

  convert_stats stats;
  host_csr g;
  g.num_nodes = read_count(nodes_file, stats);
  detail::check_node_count(g.num_nodes, nodes_file);
  detail::edge_arrays edges;
  read_edges(edges_file, g.num_nodes, edges, stats, options);
  if (!edge_count_file.empty()) {
    const std::uint64_t expected = read_count(edge_count_file, stats);
    WM_EXPECTS(expected == edges.src.size(), edges_file << ": " << edges.src.size()
                                                        << " edges, and " << edge_count_file
                                                        << " says " << expected);
  }
  progress(stats);
  detail::build_csr(g, std::move(edges), options);
  if (!features_file.empty()) {
    read_features(features_file, g, stats);
    progress(stats);
  }
  if (!labels_file.empty()) {
    detail::set_labels(g, read_labels(labels_file, g.num_nodes, stats), labels_file, true,
                       std::nullopt);
    detail::split_builder splits(g);
    for (std::uint8_t k = 0; k < 3 && !split_dir.empty(); ++k) {
      splits.begin(k, split_files[k]);
      read_split(split_files[k], splits, stats);
    }
    g.node_split = splits.take();
    progress(stats);
  }
  if (stats_out) *stats_out = stats;
  return g;
}

}  // namespace wholestore::graph
