// The argument checks and messages both random-walk paths share (walks_host.cpp).
#pragma once

#include <graph/walks.hpp>

#include <cstddef>
#include <string>

namespace wholestore::graph::detail {

/// Throws logic_error for a call the walkers refuse (empty graph, a distributed graph unless
/// `distributed_ok`, bad length, p or q, null arrays), naming `op`.
void check_walk_call(const csr_graph& graph, std::size_t count, const walk_options& o,
                     const void* starts, const void* out, const char* op,
                     bool distributed_ok = false);

std::string corrupt_graph_message(const char* op);

}  // namespace wholestore::graph::detail
