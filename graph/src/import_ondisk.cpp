// import_ondisk (graph/import.hpp): the arrays an on-disk description names, every .npy header
// checked before any array is read, then edges, weights, features, labels and splits.
#include <graph/import.hpp>

#include "edge_csr.hpp"
#include "import_common.hpp"
#include "npy_read.hpp"
#include "text_lines.hpp"

#include <wholememory/error.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

namespace wholestore::graph {

namespace {

using detail::input_position;
using detail::npy_dtype;
using detail::npy_header;
using detail::read_npy_elements;
using detail::read_npy_header;

// Elements of a [E, 2] array read per chunk when splitting it into sources and destinations.
constexpr std::uint64_t pair_chunk = std::uint64_t{1} << 20;

bool is_npy_name(const std::string& path) {
  if (path.size() < 4) return false;
  std::string tail = path.substr(path.size() - 4);
  for (char& c : tail) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return tail == ".npy";
}

// The rows of a [N] or [N, 1] array (labels, weights), or throws naming `what`.
std::uint64_t column_rows(const npy_header& h, const char* what) {
  WM_EXPECTS(h.shape.size() == 1 || (h.shape.size() == 2 && h.shape[1] == 1),
             h.path << ": shape " << h.shape_text() << "; " << what << " are one value per row, "
                    << "[n] or [n, 1]");
  return h.shape[0];
}

// The headers of every .npy the description names, checked for dtype and rank before any array
// is read, so that a wrong file costs no minutes of reading the edges first.
struct ondisk_headers {
  std::optional<npy_header> edges, weights, features, labels;
  std::optional<npy_header> splits[3];
};

ondisk_headers read_headers(const ondisk_source& s) {
  ondisk_headers h;
  if (is_npy_name(s.edges)) {
    h.edges = read_npy_header(s.edges);
    WM_EXPECTS(h.edges->type == npy_dtype::int32 || h.edges->type == npy_dtype::int64,
               s.edges << ": dtype " << detail::npy_dtype_name(h.edges->type)
                       << "; edges are node ids, int32 or int64");
    const auto& shape = h.edges->shape;
    WM_EXPECTS(shape.size() == 2 && (shape[0] == 2 || shape[1] == 2),
               s.edges << ": shape " << h.edges->shape_text()
                       << " is neither [2, E] (sources in row 0) nor [E, 2]");
  }
  if (!s.edge_weights.empty()) {
    h.weights = read_npy_header(s.edge_weights);
    WM_EXPECTS(detail::npy_is_float(h.weights->type),
               s.edge_weights << ": dtype " << detail::npy_dtype_name(h.weights->type)
                              << "; edge weights are float32 or float16");
    column_rows(*h.weights, "edge weights");
  }
  if (!s.node_features.empty()) {
    h.features = read_npy_header(s.node_features);
    WM_EXPECTS(detail::npy_is_float(h.features->type),
               s.node_features << ": dtype " << detail::npy_dtype_name(h.features->type)
                               << "; node features are float32 or float16");
    WM_EXPECTS(h.features->shape.size() == 2 && h.features->shape[1] >= 1,
               s.node_features << ": shape " << h.features->shape_text()
                               << "; node features are [num_nodes, feature_dim >= 1]");
  }
  if (!s.labels.empty()) {
    h.labels = read_npy_header(s.labels);
    WM_EXPECTS(detail::npy_is_integer(h.labels->type),
               s.labels << ": dtype " << detail::npy_dtype_name(h.labels->type)
                        << "; labels are integers (int32, int64 or uint8; -1 unlabelled)");
    column_rows(*h.labels, "labels");
  }
  const std::string* split_files[3] = {&s.train, &s.valid, &s.test};
  for (std::uint8_t k = 0; k < 3; ++k) {
    if (split_files[k]->empty()) continue;
    WM_EXPECTS(!s.labels.empty(), *split_files[k] << ": a " << detail::split_name(k)
                                                  << " split needs labels, and none are given");
    h.splits[k] = read_npy_header(*split_files[k]);
    const npy_header& sh = *h.splits[k];
    WM_EXPECTS(sh.type != npy_dtype::float16 && sh.type != npy_dtype::float32,
               sh.path << ": dtype " << detail::npy_dtype_name(sh.type)
                       << "; a split is node ids (int32, int64, uint8) or a bool mask");
    WM_EXPECTS(sh.shape.size() == 1, sh.path << ": shape " << sh.shape_text()
                                             << "; a split is one-dimensional (node ids, or a "
                                                "bool mask of num_nodes)");
  }
  return h;
}

// The node count: given, else the rows of the features or labels (which must agree), else
// unknown until the edges are read (nullopt).
std::optional<std::uint64_t> node_count(const ondisk_source& s, const ondisk_headers& h) {
  if (s.num_nodes) return s.num_nodes;
  if (h.features && h.labels) {
    WM_EXPECTS(h.features->shape[0] == h.labels->shape[0],
               s.node_features << " has " << h.features->shape[0] << " rows and " << s.labels << " "
                               << h.labels->shape[0]
                               << "; both are one row per node (or set num_nodes)");
  }
  if (h.features) return h.features->shape[0];
  if (h.labels) return h.labels->shape[0];
  return std::nullopt;
}

void read_npy_edges(const npy_header& h, detail::edge_arrays& edges) {
  if (h.shape[0] == 2) {  // [2, E]: sources, then destinations
    const std::uint64_t m = h.shape[1];
    edges.src.resize(m);
    edges.dst.resize(m);
    read_npy_elements(h, 0, m, edges.src.data());
    read_npy_elements(h, m, m, edges.dst.data());
    return;
  }
  const std::uint64_t m = h.shape[0];  // [E, 2]: pairs
  edges.src.resize(m);
  edges.dst.resize(m);
  std::vector<std::int64_t> pairs(2 * std::min(m, pair_chunk));
  for (std::uint64_t done = 0; done < m;) {
    const std::uint64_t n = std::min(m - done, pair_chunk);
    read_npy_elements(h, 2 * done, 2 * n, pairs.data());
    for (std::uint64_t i = 0; i < n; ++i) {
      edges.src[done + i] = pairs[2 * i];
      edges.dst[done + i] = pairs[2 * i + 1];
    }
    done += n;
  }
}

// `src,dst` lines: blank and `#` lines skipped, a first data line that does not start with an
// integer taken for a header.  Ids are checked here when the node count is known; otherwise
// line_of_edge keeps each edge's line for check_edge_ids.
void read_csv_edges(const std::string& path, detail::edge_arrays& edges, convert_stats& stats,
                    std::vector<std::uint64_t>& line_of_edge, const convert_options& options,
                    std::optional<std::uint64_t> known_nodes) {
  detail::line_reader in(path);
  std::vector<std::string_view> fields;
  std::string_view line;
  bool seen_data = false;
  std::uint64_t reported = 0;
  while (in.next(line)) {
    std::size_t b = 0;
    while (b < line.size() && (line[b] == ' ' || line[b] == '\t')) ++b;
    if (b == line.size() || line[b] == '#') continue;
    const std::size_t n = detail::split_csv(line, fields);
    std::int64_t u = 0, v = 0;
    if (!seen_data) {
      seen_data = true;
      if (n >= 1 && !detail::parse_int64(fields[0], u)) {
        stats.header_line = in.line_number();
        stats.header_text = std::string(line.substr(0, 200));
        continue;
      }
    }
    const std::string shown(line.substr(0, 200));
    WM_EXPECTS(n == 2, path << ":" << in.line_number() << ": expected 'src,dst', found " << n
                            << " field(s)"
                            << (n == 3 ? " (edge weights come from edge_weights, a .npy)" : "")
                            << ": '" << shown << "'");
    WM_EXPECTS(detail::parse_int64(fields[0], u) && detail::parse_int64(fields[1], v),
               path << ":" << in.line_number() << ": node ids are integers: '" << shown << "'");
    if (known_nodes) {
      const input_position at{path, in.line_number(), true};
      detail::check_node_id(u, *known_nodes, "source id", at);
      detail::check_node_id(v, *known_nodes, "destination id", at);
    } else {
      line_of_edge.push_back(in.line_number());
    }
    edges.src.push_back(u);
    edges.dst.push_back(v);
    if (options.progress && in.bytes_read() != reported) {
      reported = in.bytes_read();
      options.progress(stats.bytes + reported);
    }
  }
  stats.bytes += in.bytes_read();
}

// Ids of .npy edges, and of csv edges read before the node count was known.
void check_edge_ids(const ondisk_source& s, const std::optional<npy_header>& h,
                    const detail::edge_arrays& edges,
                    const std::vector<std::uint64_t>& line_of_edge, std::uint64_t n) {
  if (!h && line_of_edge.empty()) return;  // csv, checked while read
  const bool by_columns = h && h->shape[0] == 2;
  for (std::uint64_t e = 0; e < edges.src.size(); ++e) {
    const input_position at{s.edges, h ? e : line_of_edge[e], !h, by_columns ? "column" : "row"};
    detail::check_node_id(edges.src[e], n, "source id", at);
    detail::check_node_id(edges.dst[e], n, "destination id", at);
  }
}

}  // namespace

host_csr import_ondisk(const ondisk_source& source, const convert_options& options,
                       convert_stats* stats_out) {
  WM_EXPECTS(!source.edges.empty(), "import_ondisk: no edges file given (the `edges` key)");
  WM_EXPECTS(!options.has_weights && !options.numeric_ids_as_is,
             "import_ondisk: has_weights and numeric_ids_as_is are for edge-list text; the "
             "weights come from edge_weights and ids are used as they are");
  const ondisk_headers h = read_headers(source);
  const std::optional<std::uint64_t> known_nodes = node_count(source, h);
  if (known_nodes) {
    detail::check_node_count(*known_nodes, source.num_nodes ? std::string("num_nodes")
                                           : h.features     ? source.node_features
                                                            : source.labels);
  }
  convert_stats stats;
  auto progress = [&] {
    if (options.progress) options.progress(stats.bytes);
  };

  detail::edge_arrays edges;
  std::vector<std::uint64_t> line_of_edge;  // csv only: the line of each edge, for messages
  if (h.edges) {
    read_npy_edges(*h.edges, edges);
    stats.bytes += detail::file_bytes(source.edges);
  } else {
    read_csv_edges(source.edges, edges, stats, line_of_edge, options, known_nodes);
  }
  stats.edges = edges.src.size();
  progress();
  std::uint64_t n = 0;
  if (known_nodes) {
    n = *known_nodes;
  } else {
    std::int64_t largest = -1;
    for (std::uint64_t e = 0; e < edges.src.size(); ++e) {
      largest = std::max({largest, edges.src[e], edges.dst[e]});
    }
    n = static_cast<std::uint64_t>(largest + 1);  // negative ids are refused just below
    detail::check_node_count(n, source.edges + " (its largest id + 1)");
  }
  check_edge_ids(source, h.edges, edges, line_of_edge, n);
  std::vector<std::uint64_t>().swap(line_of_edge);

  if (h.weights) {
    const std::uint64_t rows = h.weights->shape[0];
    WM_EXPECTS(rows == edges.src.size(),
               source.edge_weights << ": " << rows << " weights, expected " << edges.src.size()
                                   << ", one per edge of " << source.edges);
    edges.weights.resize(rows);
    read_npy_elements(*h.weights, 0, rows, edges.weights.data());
    for (std::uint64_t e = 0; e < rows; ++e) {
      const float w = edges.weights[e];
      WM_EXPECTS(std::isfinite(w) && w >= 0.0f,
                 (input_position{source.edge_weights, e, false})
                     << ": weight " << w
                     << " must be finite and >= 0 (rule 6: the weighted "
                        "sampler would take it for 0)");
    }
    stats.bytes += detail::file_bytes(source.edge_weights);
    progress();
  }

  host_csr g;
  g.num_nodes = n;
  convert_options rows = options;
  rows.symmetrize = options.symmetrize || source.symmetrize || !source.directed;
  rows.reverse = options.reverse || source.reverse;
  detail::build_csr(g, std::move(edges), rows);

  if (h.features) {
    const npy_header& f = *h.features;
    WM_EXPECTS(f.shape[0] == n, source.node_features << ": shape " << f.shape_text() << ": "
                                                     << f.shape[0]
                                                     << " rows, expected one per node "
                                                        "(num_nodes = "
                                                     << n << ")");
    g.feature_dim = f.shape[1];
    g.node_features.resize(f.count);
    read_npy_elements(f, 0, f.count, g.node_features.data());
    stats.bytes += detail::file_bytes(source.node_features);
    progress();
  }
  if (h.labels) {
    std::vector<std::int64_t> labels(h.labels->shape[0]);
    read_npy_elements(*h.labels, 0, labels.size(), labels.data());
    detail::set_labels(g, std::move(labels), source.labels, false, source.num_classes);
    stats.bytes += detail::file_bytes(source.labels);
    detail::split_builder splits(g);
    for (std::uint8_t k = 0; k < 3; ++k) {
      if (!h.splits[k]) continue;
      const npy_header& sh = *h.splits[k];
      splits.begin(k, sh.path);
      if (sh.type == npy_dtype::bool8) {
        WM_EXPECTS(sh.count == n, sh.path << ": a bool mask of " << sh.count
                                          << " entries, expected one per node (num_nodes = " << n
                                          << ")");
        std::vector<std::uint8_t> mask(sh.count);
        read_npy_elements(sh, 0, sh.count, mask.data());
        for (std::uint64_t v = 0; v < n; ++v) {
          if (mask[v]) splits.add(static_cast<std::int64_t>(v), input_position{sh.path, v, false});
        }
      } else {
        if (sh.type == npy_dtype::uint8) {
          splits.set_repeat_hint(" (uint8 is read as node ids; a mask has dtype bool, '|b1')");
        }
        std::vector<std::int64_t> ids(sh.count);
        read_npy_elements(sh, 0, sh.count, ids.data());
        for (std::uint64_t r = 0; r < ids.size(); ++r) {
          splits.add(ids[r], input_position{sh.path, r, false});
        }
      }
      stats.bytes += detail::file_bytes(sh.path);
    }
    g.node_split = splits.take();
    progress();
  }
  if (stats_out) *stats_out = stats;
  return g;
}

}  // namespace wholestore::graph
