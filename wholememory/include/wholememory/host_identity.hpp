/*
 * The name a process's host goes by in a job: what every "same host?" question of the library
 * compares (rank_topology, the host communicator's refusal to span hosts, continuous and chunked
 * memory's local ranks, GPU sharing).
 *
 * $WHOLESTORE_HOST_ID, when set, replaces the machine's host name: ranks on one machine with
 * different values behave as ranks on different hosts, so that multi-host paths run on one
 * machine (`wholestore launch -n 4 --hosts 2` sets it, and NCCL_HOSTID, which makes NCCL treat
 * the ranks as separate hosts too and connect them through its network transport).
 */
#pragma once

#include <string>

namespace wholememory {

/// $WHOLESTORE_HOST_ID when set, else gethostname().  Throws logic_error for a value that is
/// empty, longer than max_host_identity bytes or holds a control character, naming the variable.
std::string host_identity();

/// Longest accepted host identity, bytes (a host name is at most 64).
inline constexpr std::size_t max_host_identity = 255;

}  // namespace wholememory
