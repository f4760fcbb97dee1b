// The argument checks and messages both random-walk paths share (walks_host.cpp).
#pragma once

#include <graph/walks.hpp>

#include <wholememory/communicator.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace wholestore::graph::detail {

/// Throws logic_error for a call the walkers refuse (empty graph, bad length, p or q, null
/// arrays), naming `op`.
void check_walk_call(const csr_graph& graph, std::size_t count, const walk_options& o,
                     const void* starts, const void* out, const char* op);

std::string corrupt_graph_message(const char* op);

/// random_walks_host on a distributed graph (walks_distributed_host.cpp): collective over its
/// host communicator; `threads` (>= 1) for each owner's step.
void walk_distributed_host(const csr_graph& g, const std::int64_t* starts, std::size_t count,
                           const walk_options& o, std::int64_t* out, unsigned threads);

/// The start of a walk on a distributed graph, collective over its communicator: every rank's
/// length, p, q, walk count and first bad start (bad_position -1: none) are allgathered, and
/// every rank throws logic_error alike when they differ, for a communicator of
/// another backend than `needed`, a bad start (named on its rank, "rank r passed" on the
/// others) or edges that do not follow their nodes.  Returns every rank's walk count.
std::vector<std::int64_t> agree_distributed_walk(const csr_graph& g, std::size_t count,
                                                 const walk_options& o, std::int64_t bad_position,
                                                 std::int64_t bad_value,
                                                 wholememory::backend needed, const char* op);

}  // namespace wholestore::graph::detail
