/*
 * The corrupt values the hostile-graph tests write into a loaded CSR (CPU sampler in
 * csr_validation_test.cpp, GPU sampler and walker in gpu/hostile_memory_gpu_test.cpp): each
 * breaks one of the CSR's rules that the samplers and walkers check on every read.  And what
 * the loaders say, on every rank, of a broken dataset or host graph (csr_validation_test.cpp,
 * csr_graph_layout_test.cpp).
 */
#pragma once

#include "common/multiprocess.hpp"

#include <graph/csr_graph.hpp>
#include <graph/dataset.hpp>
#include <wholememory/communicator.hpp>
#include <wholememory/error.hpp>

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

namespace wholestore_test {

struct csr_corruption {
  const char* array;       ///< "row_offsets" or "col_indices"
  std::uint64_t position;  ///< element of that array
  std::int64_t value;      ///< what is written there
};

/// For a graph of more than 500 nodes and 4000 edges; `last_row` is the row offset (of the last
/// row's start or end) that is sent past the edges.
inline std::vector<csr_corruption> csr_corruptions(std::uint64_t last_row) {
  return {
      {"row_offsets", 500, 3},                      // decreasing: a negative degree
      {"row_offsets", 500, std::int64_t{1} << 40},  // far past the edges
      {"row_offsets", 500, -(std::int64_t{1} << 40)},
      {"row_offsets", last_row, 20000},  // the last row runs past the edges
      {"col_indices", 4000, std::numeric_limits<std::int32_t>::max()},
      {"col_indices", 4000, -1},
  };
}

/// What load_graph(dir) and make_graph(graph) throw on each of `ranks` thread ranks for a
/// distributed graph in host memory, in rank order ("(loaded)" / "(made)" where they do not).
struct load_and_make_errors {
  std::vector<std::string> load, make;
};
inline load_and_make_errors distributed_load_and_make_errors(
    int ranks, const std::string& dir, const wholestore::graph::host_csr& graph) {
  load_and_make_errors out;
  out.load.resize(static_cast<std::size_t>(ranks));
  out.make.resize(static_cast<std::size_t>(ranks));
  thread_ranks(ranks, [&](std::shared_ptr<wholememory::bootstrap> bs) {
    auto comm = wholememory::make_host_communicator(bs);
    const auto r = static_cast<std::size_t>(comm->rank());
    wholestore::graph::load_options opts;
    opts.type = wholememory::memory_type::distributed;
    try {
      wholestore::graph::load_graph(comm, dir, opts);
      out.load[r] = "(loaded)";
    } catch (const wholememory::logic_error& e) {
      out.load[r] = e.what();
    }
    try {
      wholestore::graph::make_graph(comm, graph, opts);
      out.make[r] = "(made)";
    } catch (const wholememory::logic_error& e) {
      out.make[r] = e.what();
    }
  });
  return out;
}

}  // namespace wholestore_test
