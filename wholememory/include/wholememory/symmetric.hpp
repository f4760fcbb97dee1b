/*
 * Symmetric memory in the style of nvmath-python's distributed utilities: every rank of a job
 * on one host holds a block of the same size, and every rank addresses every block directly
 * (peer GPUs' device memory over NVLink / PCIe peer mappings, or shared host memory), so a
 * kernel can read or write "rank r's element i" with a load or a store.
 *
 * Built on chunked WholeMemory (one allocation per rank, mapped by every local process through
 * CUDA IPC or a shared segment): no second allocator, and every guarantee of that type holds
 * (collective create and free, a dead peer ends in the bootstrap's timeout, not a hang).
 *
 *   auto env = wholememory::symmetric_init();                  // from launch / torchrun / mpirun
 *   auto heap = wholememory::symmetric_memory::allocate(env.comm, bytes, memory_location::device);
 *   auto at = heap.accessor<float>(device);                    // pass to a kernel
 *   //   at(r, i) is element i of rank r's block, from any rank
 *   heap.free();                                               // collective
 */
#pragma once

#include <wholememory/allocation.hpp>
#include <wholememory/communicator.hpp>
#include <wholememory/host_device.hpp>
#include <wholememory/memory_type.hpp>
#include <wholememory/ptr_gen.hpp>

#include <cstddef>
#include <memory>
#include <vector>

namespace wholememory {

/// What symmetric_init sets up: the job's communicator and this rank's device (-1: none).
struct symmetric_env {
  std::shared_ptr<communicator> comm;
  int device = -1;
};

/// Sets up a job for symmetric memory, one GPU per process: with `comm` given, uses it (and
/// its device); otherwise makes the job's bootstrap from the launch environment
/// (`wholestore launch`, torchrun or mpirun; a job of one rank without one), selects
/// `device` (-1: the local rank modulo the visible GPUs, none in a build without CUDA or on a
/// machine without a GPU) and makes an NCCL communicator when every rank has its own GPU, else
/// the host communicator (ranks sharing a GPU, or no GPU).  Collective.
symmetric_env symmetric_init(int device = -1, std::shared_ptr<communicator> comm = nullptr);

/// "Element i of rank r's block" for host or device code: a copy of the block addresses
/// (a chunked_view) that the caller keeps alive (symmetric_memory::accessor hands out one in
/// the right address space).
template <typename T>
struct symmetric_accessor {
  const chunked_view* view = nullptr;
  WM_HOST_DEVICE T* operator()(int rank, std::size_t i) const {
    return static_cast<T*>(view->parts[rank]) + i;
  }
  WM_HOST_DEVICE T* block(int rank) const { return static_cast<T*>(view->parts[rank]); }
};

/// One block per rank, all of block_bytes(), each addressable from every rank.  Move-only.
class symmetric_memory {
 public:
  /// Every rank asks for `bytes` (> 0) in `location`.  When the ranks ask for different sizes
  /// this throws mismatch_error on every rank naming them, unless `make_symmetric`, in which
  /// case every block gets the largest size and requested_bytes(r) keeps rank r's own request.
  /// The ranks must be on one host (as continuous and chunked memory).  Collective.
  static symmetric_memory allocate(std::shared_ptr<communicator> comm, std::size_t bytes,
                                   memory_location location, bool make_symmetric = false);

  symmetric_memory() noexcept = default;
  symmetric_memory(symmetric_memory&&) noexcept = default;
  symmetric_memory& operator=(symmetric_memory&&) noexcept = default;
  symmetric_memory(const symmetric_memory&) = delete;
  symmetric_memory& operator=(const symmetric_memory&) = delete;
  ~symmetric_memory() = default;

  /// Frees every block.  Collective, like wholememory::free: a rank that frees while another
  /// does not gets the bootstrap's timeout (or a mismatch_error when the other rank is in a
  /// different collective), never a hang; both name the call.
  void free();

  explicit operator bool() const { return static_cast<bool>(memory_); }
  int ranks() const;
  int rank() const;
  std::size_t block_bytes() const { return block_bytes_; }
  std::size_t requested_bytes(int rank) const;
  memory_location location() const;

  /// Address of rank r's block in this process (host or device address by location).
  void* block(int rank) const;
  void* local_block() const { return block(rank()); }

  /// Accessor whose addresses live on `device` (kernels on that GPU), or on the host when
  /// device == -1.  Valid as long as this object.
  template <typename T>
  symmetric_accessor<T> accessor(int device = -1) const {
    return symmetric_accessor<T>{view(device)};
  }

  const allocation& memory() const { return memory_; }

 private:
  const chunked_view* view(int device) const;

  allocation memory_;
  std::size_t block_bytes_ = 0;
  std::vector<std::size_t> requested_;
  mutable std::unique_ptr<chunked_view> host_view_;
};

}  // namespace wholememory
