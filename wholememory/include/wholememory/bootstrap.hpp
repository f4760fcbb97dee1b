/*
 * Bootstrap: moves a few bytes between the ranks of a job, out of band.
 *
 * A bootstrap is how ranks find each other before any communicator exists, and how they
 * exchange small descriptors (allocation sizes, shareable handles, NCCL ids) afterwards.  It
 * never carries bulk data.  Implementations:
 *  - threads of one process (make_thread_bootstraps),
 *  - processes that meet at a small TCP store hosted by rank 0 (make_tcp_bootstrap), which is
 *    what `wholestore launch`, torchrun-style and mpirun environments use (bootstrap_from_env),
 *  - a user-supplied subclass (the seed API adapts its CollectiveCommunicator this way).
 *
 * Every collective here checks that all ranks called the same operation with the same sizes
 * and fails on every rank with wholememory::mismatch_error when they did not.  A rank that
 * dies or does not arrive makes the others fail with wholememory::timeout_error after the
 * bootstrap's timeout, never hang.
 */
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace wholememory {

/// Longest accepted collective timeout, seconds (a year): a longer one is surely a typo, and
/// its count of milliseconds stays far from overflowing.
inline constexpr std::int64_t max_timeout_seconds = std::int64_t{365} * 24 * 3600;

/// The accepted timeouts, for error messages: "a number of seconds in (0, 31536000]".
std::string timeout_range_text();

/// Parses a timeout in seconds: a finite number in (0, max_timeout_seconds], fractions
/// allowed, rounded up to whole milliseconds (never to zero).  nullopt for anything else: empty
/// or trailing text, nan, inf, zero, negative, too large.
std::optional<std::chrono::milliseconds> parse_timeout_seconds(const std::string& text);

/// $WHOLESTORE_TIMEOUT, or nullopt when it is not set.  Throws logic_error naming the variable,
/// its value and the accepted range when it is set to anything parse_timeout_seconds refuses
/// (the empty string included).
std::optional<std::chrono::milliseconds> timeout_from_env();

/// Default timeout of collectives: $WHOLESTORE_TIMEOUT seconds when set (timeout_from_env),
/// else 300 s.  The wholestore commands apply the same variable over their configs'
/// `timeout_s` (docs/reliability.md).
std::chrono::milliseconds default_timeout();

/// Out-of-band byte exchange among the ranks of a job.  All members are collective unless
/// stated otherwise; none synchronizes a CUDA stream.
class bootstrap {
 public:
  virtual ~bootstrap() = default;

  /// This rank, 0 <= rank() < size().
  virtual int rank() const = 0;
  /// Number of ranks.
  virtual int size() const = 0;
  /// Timeout after which a collective that is missing a peer throws timeout_error.
  virtual std::chrono::milliseconds timeout() const = 0;
  /// True once a collective failed in a way that leaves the ranks out of step (a peer died,
  /// left or timed out): every later collective would fail too, so cleanup skips them.  Not
  /// collective, never blocks.  The default (user-supplied bootstraps): false.
  virtual bool broken() const { return false; }

  /// Every rank contributes `bytes` bytes from `send`; `recv` receives size() * bytes, in rank
  /// order.  All ranks must pass the same `bytes` (else mismatch_error on every rank).
  virtual void allgather(const void* send, void* recv, std::size_t bytes) = 0;

  /// Copies `bytes` bytes from `root`'s buffer into every rank's buffer.
  virtual void broadcast(void* buffer, std::size_t bytes, int root);

  /// Returns when every rank has entered the barrier.
  virtual void barrier();

  /// Splits the ranks into groups of equal `color`, ordered by (`key`, old rank).  Every rank
  /// of this bootstrap must call it; each gets a bootstrap of its own group.  A negative color
  /// returns nullptr (the rank takes part in no group).
  virtual std::unique_ptr<bootstrap> split(int color, int key) = 0;

  /// A bootstrap over the listed ranks only (ascending, unique, containing this rank; new rank
  /// = position in the list).  Collective over the members only: the other ranks do not take
  /// part, which is what the seed API's `ranks` subsets need.  Calls for the same member list
  /// pair up in order.  The default implementation throws logic_error.
  virtual std::unique_ptr<bootstrap> subset(const std::vector<int>& members);

  /// Allgather of byte strings of any length per rank (lengths may differ).
  std::vector<std::string> allgatherv(const std::string& mine);

  /// The collectives (allgather, broadcast, barrier rounds) this bootstrap has made so far,
  /// counted by the built-in bootstraps.  A multi-rank training step should make none in its
  /// steady state: benchmarks print the count per step and tests assert that it stays put.
  /// Not collective.
  std::uint64_t rounds() const { return rounds_.load(std::memory_order_relaxed); }

 protected:
  /// An implementation calls this once per collective round it makes.
  void count_round() { rounds_.fetch_add(1, std::memory_order_relaxed); }

 private:
  std::atomic<std::uint64_t> rounds_{0};
};

/// Runs this rank's part of one phase of a collective call, `body`, then exchanges every
/// rank's outcome over `bs`, so that all ranks go on or all throw and none is left waiting in
/// a later collective.  When any rank's body threw, throws on every rank the same message,
/// "<call>: rank R failed <phase>: <reason>" (R the lowest failing rank), with the exception
/// type rank R threw (std::runtime_error for types outside error.hpp).  Returns every rank's
/// payload (what `body` returned), in rank order.  A dead peer ends in the bootstrap's
/// timeout_error.  Collective.
std::vector<std::string> agree(bootstrap& bs, const std::string& call, const std::string& phase,
                               const std::function<std::string()>& body);

/// Checks that every rank holds the same value for each key (every rank passes the same keys,
/// in the same order, with its own values: the effective settings or the digest of inputs
/// that must match before a shared structure is built from them).  Throws mismatch_error on
/// every rank naming the first key that differs and which ranks hold which value:
/// "<call>: the ranks disagree on batch_size: ranks 0, 2 have 1024, rank 1 has 512".
/// Collective.
void agree_on_values(bootstrap& bs, const std::string& call,
                     const std::vector<std::pair<std::string, std::string>>& values);

/// One bootstrap per thread for `size` ranks living as threads of this process.  Hand
/// element i to the thread that plays rank i.
std::vector<std::unique_ptr<bootstrap>> make_thread_bootstraps(
    int size, std::chrono::milliseconds timeout = default_timeout());

/// Longest job token, bytes.
inline constexpr std::size_t max_job_token_bytes = 128;

/// A bootstrap over a TCP store: rank 0 listens on `port` of `host` (port 0: rank 0 picks a
/// free port, which only makes sense for tests that pass it on themselves), the others
/// connect, retrying until `timeout`.  Collective: all ranks call it.
///
/// `job_token` (empty, or up to max_job_token_bytes printable characters without blanks) tells
/// this job's processes from those of another job that reach the same host:port: the store
/// refuses a process whose token differs, and once every rank has connected it refuses any
/// newcomer; the refused process throws logic_error saying so, and the job goes on undisturbed.
/// Between processes with the same token, another job size or a rank taken twice during the
/// rendezvous is a mismatch_error on every rank.  Without tokens (all empty) a stranger that
/// arrives before every rank has connected cannot be told from a misconfigured rank.  The token
/// is a guard against accidents, not a secret.  The bootstraps of split() and subset() inherit it.
std::unique_ptr<bootstrap> make_tcp_bootstrap(int rank, int size, const std::string& host, int port,
                                              std::chrono::milliseconds timeout = default_timeout(),
                                              const std::string& job_token = {});

/// $WHOLESTORE_JOB_TOKEN (which `wholestore launch` sets to a fresh random value per job), or
/// the empty string when it is not set.  Throws logic_error naming the variable when it is set
/// but empty, longer than max_job_token_bytes or not printable ASCII without blanks.
std::string job_token_from_env();

/// What the launch environment says about this process.
struct launch_env {
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  int local_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  std::string job_token;  ///< job_token_from_env(), else launcher_job_token(); empty when none
};

/// A job token from the launcher's own id of the job, for ranks started by torchrun or mpirun
/// without WHOLESTORE_JOB_TOKEN: "torchrun-" + $TORCHELASTIC_RUN_ID (torchrun's rendezvous id,
/// ignored when it is "none", torchrun's default without --rdzv-id) for a torch-style
/// environment, "mpirun-" + $PMIX_NAMESPACE or $OMPI_MCA_ess_base_jobid (Open MPI 5 and 4) for
/// an mpirun one.  Characters a token cannot hold become '_'; an id too long for a token is
/// replaced by its 64-bit FNV-1a hash in hex.  Empty when the launcher gives no id.
std::string launcher_job_token(bool torch_environment);

/// Reads RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT (set by
/// `wholestore launch` and torchrun), else OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK,
/// _LOCAL_SIZE (mpirun; address defaults to 127.0.0.1:29500 unless MASTER_* are set), and
/// WHOLESTORE_JOB_TOKEN (else the launcher's job id: launcher_job_token).
/// Returns nullopt when neither set is present; throws logic_error on malformed values.
std::optional<launch_env> read_launch_env();

/// Where the job's store is: MASTER_ADDR (default 127.0.0.1) and WHOLESTORE_MASTER_PORT when
/// set, else MASTER_PORT (default 29500), plus one under torchrun with its agent store
/// (TORCHELASTIC_USE_AGENT_STORE=True: the agent already listens on MASTER_PORT, and
/// torch.distributed's process groups meet there).  Throws logic_error on malformed values.
std::pair<std::string, int> master_address_from_env();

/// A TCP bootstrap from read_launch_env(), with its job token; throws logic_error when no
/// launch environment is present.  Collective.
std::unique_ptr<bootstrap> bootstrap_from_env(
    std::chrono::milliseconds timeout = default_timeout());

/// The bootstrap of a program that may or may not have been launched as several ranks: from
/// the launch environment when there is one (bootstrap_from_env), else a job of one rank.
std::unique_ptr<bootstrap> make_job_bootstrap(
    std::chrono::milliseconds timeout = default_timeout());

}  // namespace wholememory
