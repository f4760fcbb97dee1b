/*
 * What the two importers (import_ondisk.cpp, import_ogb.cpp) share: where in an input a value
 * was read (for messages), labels and the train/valid/test sets turned into node_labels,
 * node_split and num_classes with the checks of graph/import.hpp.  Internal to graph/src.
 */
#pragma once

#include <graph/dataset.hpp>

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

namespace wholestore::graph::detail {

/// A place in an input file: a 1-based line of a text file, or a 0-based row (or `unit`) of a
/// .npy array.  Printed "path:line" or "path, row r".
struct input_position {
  const std::string& path;
  std::uint64_t index;
  bool is_line;
  const char* unit = "row";  ///< what index counts in a .npy array ("column" for [2, E] edges)
};
std::ostream& operator<<(std::ostream& os, const input_position& at);

/// Throws logic_error at `at` naming the id, `what` it is ("source id") and the range.
[[noreturn]] void fail_node_id(std::int64_t id, std::uint64_t num_nodes, const char* what,
                               const input_position& at);

/// Throws (fail_node_id) unless 0 <= id < num_nodes.
inline void check_node_id(std::int64_t id, std::uint64_t num_nodes, const char* what,
                          const input_position& at) {
  if (id < 0 || static_cast<std::uint64_t>(id) >= num_nodes) fail_node_id(id, num_nodes, what, at);
}

/// Throws logic_error naming `source` when `num_nodes` is past 2^40 (what the edge-list
/// converter keeps ids below), and wholememory::out_of_memory when its row offsets alone would
/// not fit in the host's available memory: a hostile count fails by name, not in an allocation.
void check_node_count(std::uint64_t num_nodes, const std::string& source);

/// Checks the labels read from `path` (-1 unlabelled, else a class; below num_classes when it
/// is given) and sets g.node_labels and g.num_classes (given, or the largest label + 1).
/// Throws logic_error naming the file, the row and the value; also when no node has a label.
void set_labels(host_csr& g, std::vector<std::int64_t>&& labels, const std::string& path,
                bool rows_are_lines, std::optional<std::uint32_t> num_classes);

/// Collects the train/valid/test node sets into node_split (split_none elsewhere), checking each
/// node as it comes: in [0, num_nodes), not twice in a split, not in two splits, labelled.
class split_builder {
 public:
  /// `g` holds node_labels already (set_labels) and num_nodes.
  explicit split_builder(const host_csr& g);
  /// Starts the node set of `split` (split_train, split_valid or split_test) read from `path`.
  void begin(std::uint8_t split, const std::string& path);
  /// Adds `node`, read at `at` of the current file.
  void add(std::int64_t node, const input_position& at);
  /// A hint added to the message of a repeated node (for uint8 id arrays that were masks).
  void set_repeat_hint(std::string hint) { repeat_hint_ = std::move(hint); }
  /// The split of every node.
  std::vector<std::uint8_t> take() { return std::move(split_); }

 private:
  const host_csr& g_;
  std::vector<std::uint8_t> split_;
  std::string files_[3];
  std::uint8_t current_ = split_train;
  std::string repeat_hint_;
};

/// "train", "valid", "test".
const char* split_name(std::uint8_t split);

/// Size of the file at `path`, 0 when it cannot be read (for statistics only).
std::uint64_t file_bytes(const std::string& path);

}  // namespace wholestore::graph::detail
