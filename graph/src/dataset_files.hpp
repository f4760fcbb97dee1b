/*
 * What the dataset reader (dataset.cpp) and writer (dataset_write.cpp) share: file names and
 * sizes of the format, stdio files with RAII, and the CSR's validation.  Internal to
 * graph/src.
 */
#pragma once

#include <graph/dataset.hpp>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

namespace wholestore::graph::detail {

constexpr const char* manifest_name = "manifest.yaml";
/// The files a dataset may hold besides the manifest (docs/dataset-format.md).
constexpr const char* dataset_file_names[] = {
    "row_offsets.bin", "col_indices.bin", "edge_weights.bin", "node_features.bin",
    "node_labels.bin", "node_split.bin",  "node_ids.txt"};
constexpr std::uint64_t fnv_offset_basis = 14695981039346656037ull;  // FNV-1a 64's start
/// Big enough to keep the disk busy, small enough not to matter next to the arrays.
constexpr std::size_t io_chunk_bytes = std::size_t{4} << 20;
/// Node count from which column indices need int64.
constexpr std::uint64_t int32_node_limit = std::uint64_t{1} << 31;

/// dir/name.
std::string join(const std::string& dir, const std::string& name);

struct file_closer {
  void operator()(std::FILE* f) const {
    if (f) std::fclose(f);
  }
};
using file_ptr = std::unique_ptr<std::FILE, file_closer>;

/// fopen that throws system_error naming the path.
file_ptr open_file(const std::string& path, const char* mode);

/// "0x" and 16 hex digits.
std::string hex64(std::uint64_t v);

/// Throws logic_error naming `source` and the first rule of a CSR that `graph` breaks (array
/// sizes, then rule 6 of docs/dataset-format.md through csr_check.hpp).
void validate_csr(const host_csr& graph, const std::string& source);

/// node_labels and node_split: together, num_nodes each, labels in [0, num_classes) or
/// `unlabelled`, split values 0 to 3 (split_none), every node of splits 0-2 labelled.  Throws
/// logic_error naming `source` and the first bad node.
void check_labels(const host_csr& graph, const std::string& source);

}  // namespace wholestore::graph::detail
