/*
 * Private to the bootstrap implementations: what a rank declares when it enters a collective,
 * and the one agreement check that the thread and TCP bootstraps share, so both report a
 * mismatch with the same words.
 */
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace wholememory::detail {

/// The collectives a bootstrap carries.  Values travel on the wire (TCP bootstrap): never
/// renumber them.
enum class collective_op : std::uint32_t {
  connect = 1,  ///< the rendezvous in a bootstrap's constructor
  allgather = 2,
  broadcast = 3,
  barrier = 4,
  post = 5,   ///< mailbox: store a value under a key (outside the rounds; TCP only)
  fetch = 6,  ///< mailbox: wait for the value of a key (outside the rounds; TCP only)
};

/// "allgather", "broadcast", ...; "unknown" for values outside the enum.
const char* op_name(collective_op op);

/// What one rank passed to a collective.
struct round_args {
  collective_op op = collective_op::barrier;
  std::uint64_t seq = 0;    ///< the rank's count of collectives so far, this one included
  std::uint64_t bytes = 0;  ///< bytes per rank (allgather) or of the buffer (broadcast)
  std::int64_t root = 0;    ///< broadcast root; 0 for the other operations
};

/// Checks that every rank of a round passed the same operation, call number, size and root,
/// and that the root is a rank.  Returns an empty string when they agree, else a message that
/// names the disagreeing ranks and values, e.g. "allgather #3: rank 0 passed 8 bytes, rank 1
/// passed 16 bytes".  `args[r]` is rank r's.
std::string check_round(const std::vector<round_args>& args);

/// Checks a subset() member list: ascending, unique, within [0, size), containing `rank`.
/// Throws logic_error naming the problem.
void check_subset_members(const std::vector<int>& members, int rank, int size);

/// Checks a job token: at most max_job_token_bytes printable ASCII characters without blanks
/// (empty: no token).  Throws logic_error naming `what` and the rule.
void check_job_token(const std::string& token, const std::string& what);

/// "rank 2" or "ranks 1, 3, 4": for messages that name ranks.
std::string describe_ranks(const std::vector<int>& ranks);

}  // namespace wholememory::detail
