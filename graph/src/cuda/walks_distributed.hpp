// gpu_walker's path for distributed graphs (walks_distributed.cu).  Internal.
#pragma once

#include <graph/csr_graph.hpp>
#include <graph/walks.hpp>
#include <wholememory/device_buffer.hpp>
#include <wholememory/stream.hpp>

#include <cstddef>
#include <cstdint>

namespace wholestore::graph::detail {

/// The sorted copies of a rank's own hub lists (walks_hubs.cuh), kept by the walker.
struct own_hub_lists {
  wholememory::device_buffer& begin;  // per own node
  wholememory::device_buffer& sorted;
  bool& tried;
};

/// DeepWalk and node2vec on a distributed graph whose edges follow its nodes, collective over the
/// graph's NCCL communicator (every rank calls with the same length, p and q and its own starts,
/// maybe none); starts and out in memory the GPU reads and writes, as gpu_walker::walk.  The caller
/// has checked the starts on this rank (bad_position: the first outside the graph, -1 for
/// none, and its value); every rank throws alike for any rank's bad start or disagreement.
/// `scratch` and `question_scratch` (node2vec's) grow as needed and are kept between calls;
/// node2vec's first call sorts copies of this rank's hub lists into `hubs`.
/// Waits for `stream` once at the end, and node2vec once per round of questions.
void walk_distributed_gpu(const csr_graph& g, const std::int64_t* starts, std::size_t count,
                          const walk_options& o, std::int64_t* out, std::int64_t bad_position,
                          std::int64_t bad_value, int device, wholememory::device_buffer& scratch,
                          wholememory::device_buffer& question_scratch, own_hub_lists hubs,
                          cudaStream_t stream);

}  // namespace wholestore::graph::detail
