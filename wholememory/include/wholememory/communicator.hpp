/*
 * Communicator: the collectives the memory layer needs, over one of two backends.
 *
 *  - host backend: processes (or threads) of one host exchange data through a shared-memory
 *    segment (an anonymous memfd passed between the local processes, so nothing is ever left
 *    in /dev/shm); buffers are host memory; calls complete before they return.
 *  - NCCL backend: buffers are device memory of the rank's GPU; calls are enqueued on the given
 *    stream and return at once; synchronize() waits with a timeout.
 *
 * Every collective checks, where that is cheap, that all ranks called the same operation with
 * matching arguments (count, dtype, root, alltoallv counts) and throws mismatch_error on every
 * rank otherwise.  A peer that dies or does not arrive ends in timeout_error on the others.
 */
#pragma once

#include <wholememory/bootstrap.hpp>
#include <wholememory/dtype.hpp>
#include <wholememory/stream.hpp>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace wholememory {

enum class backend { host, nccl };

/// Name of a backend ("host", "nccl").
const char* backend_name(backend b);

/// Where the ranks of a communicator live.  Computed once at creation from host names and pids.
struct rank_topology {
  int local_rank = 0;             ///< index of this rank among the ranks of its host
  int local_size = 1;             ///< ranks on this host
  int num_hosts = 1;              ///< distinct hosts in the communicator
  std::vector<int> local_ranks;   ///< global ranks on this host, ascending
  std::vector<long> pids;         ///< process id of every rank (threads share one)
  std::vector<int> host_of_rank;  ///< host index (0..num_hosts-1) of every rank
  /// True when every rank of the communicator is a thread of this process.
  bool single_process() const;
};

/// Collective communication among the ranks of a job.  Owned through shared_ptr: memory
/// handles keep their communicator alive.
class communicator {
 public:
  virtual ~communicator() = default;
  communicator(const communicator&) = delete;
  communicator& operator=(const communicator&) = delete;

  int rank() const { return bootstrap_->rank(); }
  int size() const { return bootstrap_->size(); }
  int local_rank() const { return topology_.local_rank; }
  int local_size() const { return topology_.local_size; }
  const rank_topology& topology() const { return topology_; }
  std::chrono::milliseconds timeout() const { return bootstrap_->timeout(); }
  /// The bootstrap this communicator was made from (for small out-of-band exchanges).
  bootstrap& get_bootstrap() const { return *bootstrap_; }

  virtual backend get_backend() const = 0;
  /// CUDA device of this rank for the NCCL backend, -1 for the host backend.
  virtual int device() const = 0;

  /// Waits until every rank has arrived.  Host backend: returns after the barrier.  NCCL:
  /// enqueued on `stream`.
  virtual void barrier(cudaStream_t stream) = 0;
  /// Copies `count` elements from root's `buffer` into every rank's `buffer`.
  virtual void broadcast(void* buffer, std::size_t count, dtype type, int root,
                         cudaStream_t stream) = 0;
  /// Each rank sends `count` elements; `recv` holds size() * count elements in rank order.
  virtual void allgather(const void* send, void* recv, std::size_t count, dtype type,
                         cudaStream_t stream) = 0;
  /// Rank i sends send_counts[j] elements from send + send_displs[j] to rank j, which receives
  /// them at recv + recv_displs[i]; recv_counts[i] on rank j must equal send_counts[j] on
  /// rank i.  Counts and displacements are in elements and are host arrays of size().
  virtual void alltoallv(const void* send, const std::size_t* send_counts,
                         const std::size_t* send_displs, void* recv, const std::size_t* recv_counts,
                         const std::size_t* recv_displs, dtype type, cudaStream_t stream) = 0;
  /// Element-wise sum over all ranks; `send` may equal `recv`.
  virtual void allreduce_sum(const void* send, void* recv, std::size_t count, dtype type,
                             cudaStream_t stream) = 0;
  /// The same collectives for arguments every rank already holds agreed (counts that crossed in
  /// an earlier collective of this communicator, a size fixed by an object the ranks made
  /// together): no per-call argument round.  The checked forms make one on the NCCL backend (a
  /// bootstrap allgather of a call descriptor, and one of the counts matrix for alltoallv), a
  /// TCP round trip that a multi-rank training step cannot afford several times.  Arguments
  /// that differ after all give wrong results or a timeout, not mismatch_error.  The host
  /// backend's checks are cheap: there these are the checked calls.
  virtual void allgather_agreed(const void* send, void* recv, std::size_t count, dtype type,
                                cudaStream_t stream) {
    allgather(send, recv, count, type, stream);
  }
  virtual void alltoallv_agreed(const void* send, const std::size_t* send_counts,
                                const std::size_t* send_displs, void* recv,
                                const std::size_t* recv_counts, const std::size_t* recv_displs,
                                dtype type, cudaStream_t stream) {
    alltoallv(send, send_counts, send_displs, recv, recv_counts, recv_displs, type, stream);
  }
  virtual void allreduce_sum_agreed(const void* send, void* recv, std::size_t count, dtype type,
                                    cudaStream_t stream) {
    allreduce_sum(send, recv, count, type, stream);
  }
  /// Waits for the collectives enqueued on `stream` to finish, failing with timeout_error
  /// (and aborting the communicator) when a peer does not complete within timeout().  The
  /// host backend returns at once.
  virtual void synchronize(cudaStream_t stream) = 0;

  /// True once a collective of this communicator (or of its bootstrap) failed in a way that
  /// leaves the ranks out of step: a peer died, stopped or timed out, or an NCCL error aborted
  /// the communicator.  Destructors check it to release their resources locally instead of
  /// waiting in a collective that cannot complete.  Not collective, never blocks.
  virtual bool broken() const { return bootstrap_->broken(); }

  /// Splits into sub-communicators of the same backend by `color` (ordered by key, then rank).
  /// Collective over this communicator; a negative color returns nullptr.
  virtual std::shared_ptr<communicator> split(int color, int key) = 0;

  /// Splits by host: one communicator per host holding that host's ranks.
  std::shared_ptr<communicator> split_by_host();

 protected:
  communicator(std::shared_ptr<bootstrap> bs, rank_topology topology)
      : bootstrap_(std::move(bs)), topology_(std::move(topology)) {}

  std::shared_ptr<bootstrap> bootstrap_;
  rank_topology topology_;
};

/// Gathers host identities (host_identity.hpp) and pids over `bs` and derives the topology.
/// Collective.
rank_topology discover_topology(bootstrap& bs);

/// Host backend over shared memory.  All ranks must be on one host (else logic_error naming the
/// hosts).  Collective.
std::shared_ptr<communicator> make_host_communicator(std::shared_ptr<bootstrap> bs);

/// The host communicator of this rank's host: over every rank of `bs` when they share one host,
/// else over the ranks of this host only (a split of `bs`), the communicator of a per-host
/// replica in a job over several hosts.  Collective over `bs`.
std::shared_ptr<communicator> make_local_host_communicator(std::shared_ptr<bootstrap> bs);

/// NCCL backend on CUDA device `device` (the caller's current device when -1).  Collective.
/// Throws logic_error in a build without CUDA.
std::shared_ptr<communicator> make_nccl_communicator(std::shared_ptr<bootstrap> bs,
                                                     int device = -1);

}  // namespace wholememory
