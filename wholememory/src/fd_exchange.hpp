/*
 * Passing file descriptors between the processes of one host.
 *
 * Each call opens an abstract-namespace Unix socket per rank (no file system entry), sends the
 * caller's descriptor to every other rank of its host with SCM_RIGHTS, and receives theirs.
 * Threads of one process take part the same way (the kernel duplicates the descriptor).
 */
#pragma once

#include "posix.hpp"

#include <wholememory/bootstrap.hpp>
#include <wholememory/communicator.hpp>

#include <vector>

namespace wholememory::detail {

/// Collective over every rank of `bs` (ranks on other hosts take part in the bootstrap rounds
/// only).  `fd` may be -1 (nothing to share).  Returns one entry per rank of this host, indexed
/// by local rank: a descriptor for that rank's file (a duplicate of `fd` for this rank), or an
/// invalid unique_fd where that rank passed -1.  Throws system_error or timeout_error.
std::vector<unique_fd> allgather_local_fds(bootstrap& bs, const rank_topology& topology, int fd);

}  // namespace wholememory::detail
