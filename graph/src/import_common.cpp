// Labels, splits and messages shared by the importers (import_common.hpp).
#include "import_common.hpp"

#include <graph/import.hpp>

#include "text_lines.hpp"

#include <wholememory/allocation.hpp>
#include <wholememory/error.hpp>

#include <algorithm>
#include <filesystem>
#include <limits>
#include <ostream>

namespace wholestore::graph {

namespace detail {

std::ostream& operator<<(std::ostream& os, const input_position& at) {
  if (at.is_line) return os << at.path << ":" << at.index;
  return os << at.path << ", " << at.unit << " " << at.index;
}

void fail_node_id(std::int64_t id, std::uint64_t num_nodes, const char* what,
                  const input_position& at) {
  WM_FAIL(wholememory::logic_error,
          at << ": " << what << " " << id << " is outside [0, num_nodes = " << num_nodes << ")");
}

void check_node_count(std::uint64_t num_nodes, const std::string& source) {
  constexpr std::uint64_t max_nodes = std::uint64_t{1} << 40;
  WM_EXPECTS(num_nodes < max_nodes,
             source << ": num_nodes " << num_nodes << " is not below 2^40 = " << max_nodes);
  const std::uint64_t offsets = (num_nodes + 1) * sizeof(std::int64_t);
  const std::size_t available = wholememory::available_host_bytes();
  if (available != 0 && offsets > available) {
    WM_FAIL(wholememory::out_of_memory, source << ": num_nodes " << num_nodes << " needs "
                                               << offsets / 1048576
                                               << " MiB of row offsets alone, and this host has "
                                               << available / 1048576 << " MiB available");
  }
}

void set_labels(host_csr& g, std::vector<std::int64_t>&& labels, const std::string& path,
                bool rows_are_lines, std::optional<std::uint32_t> num_classes) {
  WM_EXPECTS(labels.size() == g.num_nodes,
             path << ": " << labels.size()
                  << " labels, expected one per node (num_nodes = " << g.num_nodes << ")");
  WM_EXPECTS(!num_classes || (*num_classes >= 1 && *num_classes < (std::uint32_t{1} << 31)),
             path << ": num_classes " << *num_classes << " must be in [1, 2^31)");
  // Rows of a text file are its lines, counted from 1.
  const std::uint64_t base = rows_are_lines ? 1 : 0;
  const std::int64_t limit = num_classes ? static_cast<std::int64_t>(*num_classes)
                                         : std::numeric_limits<std::int32_t>::max();
  std::int64_t largest = -1;
  for (std::uint64_t v = 0; v < labels.size(); ++v) {
    const std::int64_t c = labels[v];
    WM_EXPECTS(c >= unlabelled && c < limit,
               (input_position{path, v + base, rows_are_lines})
                   << ": label " << c << " of node " << v << " is outside [0, "
                   << (num_classes ? "num_classes = " + std::to_string(*num_classes)
                                   : std::string("2^31 - 1"))
                   << ") and not " << unlabelled << " (unlabelled)");
    largest = std::max(largest, c);
  }
  WM_EXPECTS(num_classes || largest >= 0 || labels.empty(),
             path << ": every node is unlabelled (" << unlabelled
                  << "): no classes to store (leave the labels out)");
  g.num_classes = num_classes ? *num_classes : static_cast<std::uint32_t>(largest + 1);
  if (g.num_classes == 0) g.num_classes = 1;  // a graph of 0 nodes
  g.node_labels.resize(labels.size());
  for (std::size_t v = 0; v < labels.size(); ++v) {
    g.node_labels[v] = static_cast<std::int32_t>(labels[v]);
  }
  std::vector<std::int64_t>().swap(labels);
}

const char* split_name(std::uint8_t split) {
  switch (split) {
    case split_train:
      return "train";
    case split_valid:
      return "valid";
    case split_test:
      return "test";
    default:
      return "none";
  }
}

split_builder::split_builder(const host_csr& g) : g_(g), split_(g.num_nodes, split_none) {}

void split_builder::begin(std::uint8_t split, const std::string& path) {
  current_ = split;
  files_[split] = path;
  repeat_hint_.clear();
}

void split_builder::add(std::int64_t node, const input_position& at) {
  check_node_id(node, g_.num_nodes, "node id", at);
  std::uint8_t& s = split_[static_cast<std::uint64_t>(node)];
  WM_EXPECTS(s != current_, at << ": node " << node << " is listed twice in "
                               << split_name(current_) << repeat_hint_);
  WM_EXPECTS(s == split_none, at << ": node " << node << " is in " << split_name(current_)
                                 << " and already in " << split_name(s) << " (" << files_[s]
                                 << "); the splits must not overlap");
  WM_EXPECTS(g_.node_labels[static_cast<std::uint64_t>(node)] != unlabelled,
             at << ": node " << node << " is in " << split_name(current_)
                << " but unlabelled (label " << unlabelled << ")");
  s = current_;
}

std::uint64_t file_bytes(const std::string& path) {
  std::error_code ec;
  const std::uint64_t size = std::filesystem::file_size(path, ec);
  return ec ? 0 : size;
}

}  // namespace detail

bool gzip_supported() { return detail::have_gzip(); }

}  // namespace wholestore::graph
