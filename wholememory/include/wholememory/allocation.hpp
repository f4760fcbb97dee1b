/*
 * WholeMemory: one allocation spread over the ranks of a communicator.
 *
 * Made and freed collectively.  Its bytes are split into parts, one per rank (or, in
 * single-process multi-GPU mode, one per listed GPU), at boundaries that are multiples of a
 * granularity (a row size, so that rows never straddle parts).  Three types, two locations:
 *
 *  | type        | device                                     | host                           |
 *  |-------------|--------------------------------------------|--------------------------------|
 *  | continuous  | one virtual range per process mapping every | one shared segment mapped by   |
 *  |             | local GPU's piece (CUDA VMM, fds exchanged) | every local process            |
 *  | chunked     | one allocation per rank, each mapped by all | one segment per rank, all      |
 *  |             | local processes (CUDA IPC)                  | mapped by all local processes  |
 *  | distributed | each rank maps only its own part            | each rank maps only its own    |
 *
 * Host memory is registered with CUDA when a GPU is present, so kernels read it directly.
 * Continuous and chunked memory need all ranks on one host; split the communicator by host
 * for one replica per host.  Continuous device memory is mapped in pieces of the VMM
 * granularity (2 MiB): a rank's part is the byte range the partition gives it; the up to
 * 2 MiB at its end may sit on the next GPU (see docs/architecture.md).
 */
#pragma once

#include <wholememory/communicator.hpp>
#include <wholememory/memory_type.hpp>
#include <wholememory/partition.hpp>
#include <wholememory/ptr_gen.hpp>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace wholememory {

/// Bytes this host can still give without swapping: MemAvailable, capped by the cgroup's
/// memory.max minus memory.current (cgroup v2) when a limit is set; 0 when unknown.  Reads
/// /proc and /sys on each call.
std::size_t available_host_bytes();

/// Options of allocation::create.
struct allocation_options {
  /// Part boundaries are multiples of this many bytes (>= 1); pass the row size in bytes.
  std::size_t granularity = 1;
  /// Optional caller-given bytes per part (one entry per rank, or per device in
  /// single-process multi-GPU mode); every rank must pass the same list, summing to the total.
  std::vector<std::size_t> part_bytes;
  /// Single-process multi-GPU mode: the CUDA devices to place the parts on (communicator of
  /// size 1 only).  Empty: one part per rank on the rank's current device.
  std::vector<int> devices;
  /// What the memory holds ("graph col_indices", "embedding table weights"): when the
  /// allocation fails (out of memory, a system call), the error leads with it, the total size,
  /// the type and the location.  Optional; not compared across ranks.
  std::string name;
};

/// Where one part lives and how this process reaches it.
struct part_info {
  std::size_t offset = 0;  ///< first byte of the part in the whole allocation
  std::size_t bytes = 0;   ///< size of the part
  int rank = 0;            ///< rank owning the part
  int device = -1;         ///< CUDA device holding it, -1 for host memory
  void* ptr = nullptr;     ///< address in this process, nullptr where not mapped here
};

namespace detail {
class memory_impl;
struct allocation_access;  // the library's own per-allocation state (not part of the API)
}  // namespace detail

/// Owning, move-only handle of one WholeMemory allocation.
class allocation {
 public:
  /// Allocates `total_bytes` over the ranks of `comm`.  Collective: every rank passes the same
  /// size, type, location and options (else mismatch_error on every rank).  Throws logic_error
  /// for unsupported combinations (continuous or chunked memory over several hosts, device
  /// memory without peer access between the local GPUs, device memory in a build without
  /// CUDA), out_of_memory when a part cannot be allocated.
  static allocation create(std::shared_ptr<communicator> comm, std::size_t total_bytes,
                           memory_type type, memory_location location,
                           const allocation_options& options = {});

  allocation() noexcept;
  allocation(allocation&&) noexcept;
  allocation& operator=(allocation&&) noexcept;
  allocation(const allocation&) = delete;
  allocation& operator=(const allocation&) = delete;
  /// Frees like free() but never throws: an error is logged to stderr, unless another
  /// exception is unwinding the stack (that one is the error to report).
  ~allocation();

  /// Frees the allocation.  Collective: waits for every rank (barrier) before releasing, so
  /// no rank unmaps memory another still reads; once the communicator is broken() (a peer
  /// died, stopped or timed out) it releases this rank's part without waiting.  This rank's
  /// part is released even when the barrier throws.  No-op on an empty handle.
  void free();

  explicit operator bool() const { return impl_ != nullptr; }

  std::size_t size() const;
  memory_type type() const;
  memory_location location() const;
  const partition& get_partition() const;
  communicator& comm() const;
  std::shared_ptr<communicator> comm_ptr() const;

  int num_parts() const;
  part_info part(int i) const;

  /// The part this rank owns.  Throws logic_error in single-process multi-GPU mode, where the
  /// one rank owns every part (use part(i)).
  part_info local_part() const;

  /// Continuous memory: address of byte 0 of the whole range in this process (a device address
  /// for device memory, a host address for host memory, also valid on the GPU when registered).
  /// Throws logic_error for the other types.
  void* data() const;

  /// Chunked or continuous memory: a view for host code (continuous memory gives one part
  /// spanning everything).  Throws logic_error for distributed memory.
  chunked_view host_view() const;

  /// The same view copied into device memory of `device`, for kernels that take a pointer.
  /// Made on first use and freed with the handle; synchronous.
  const chunked_view* device_view(int device) const;

 private:
  friend struct detail::allocation_access;
  explicit allocation(std::unique_ptr<detail::memory_impl> impl);
  std::unique_ptr<detail::memory_impl> impl_;
};

}  // namespace wholememory
