/*
 * The CUDA backend of the memory layer: device allocations of WholeMemory and their sharing
 * between the local ranks, plain device buffers, host registration and view copies.
 * Implemented in src/cuda/cuda_memory.cpp when the build has CUDA and by src/no_cuda.cpp
 * otherwise (which throws logic_error "built without CUDA" for device memory and does nothing
 * for host registration).
 *
 * Internal to wholememory (src/): the handle (allocation.cpp), the seed API, the NCCL
 * communicator, the GPU gather and the public device utilities (device.cpp) use it.  Other
 * layers reach it through <wholememory/device.hpp> and <wholememory/device_buffer.hpp>.  It
 * sits below the handle: it knows partitions and memory types, never the wholememory class.
 */
#pragma once

#include <wholememory/bootstrap.hpp>
#include <wholememory/communicator.hpp>
#include <wholememory/memory_type.hpp>
#include <wholememory/partition.hpp>
#include <wholememory/ptr_gen.hpp>

#include <cstddef>
#include <memory>
#include <vector>

namespace wholememory::detail {

/// Something mapped or allocated that its destructor releases (never throws).
class resource {
 public:
  virtual ~resource() = default;
};

/// True when the build has CUDA and at least one device is visible.
bool cuda_device_present();

/// The calling thread's current CUDA device.  Throws when none.
int current_device();

/// Result of a device allocation: the owner and where every part sits in this process.
struct device_allocation {
  std::unique_ptr<resource> owner;
  /// Continuous: address of byte 0 of the whole range; else nullptr.
  void* base = nullptr;
  /// Address of every part in this process (nullptr where not mapped); one per partition part.
  std::vector<void*> part_ptrs;
  /// CUDA device of every part.
  std::vector<int> part_devices;
};

/// Allocates device memory of `type` for `parts` (one part per rank of `bs`, the calling rank
/// on `device`).  Collective over `bs`.  Continuous: one VMM range mapping every local rank's
/// piece; chunked: one allocation per rank, opened by every local rank (CUDA IPC, or the
/// pointer itself between threads of one process); distributed: only the own part.  Throws
/// logic_error when peer access is missing between local GPUs (suggesting distributed or host
/// memory), out_of_memory, cuda_error.
device_allocation allocate_device(bootstrap& bs, const rank_topology& topology,
                                  const partition& parts, memory_type type, int device);

/// Single-process multi-GPU allocation: part i on devices[i]; continuous or chunked.
device_allocation allocate_device_single_process(const partition& parts, memory_type type,
                                                 const std::vector<int>& devices);

/// Registers host memory with CUDA (page-locked, mapped) when a device is present, so kernels
/// can read it at the same address.  Returns the registration (nullptr when no device).
std::unique_ptr<resource> register_host_memory(void* ptr, std::size_t bytes);

/// Plain device memory: `bytes` bytes on `device` (*ptr = nullptr for 0 bytes), behind the
/// public device_buffer and the library's own scratch words, so that raw cudaMalloc stays in
/// one module.  The returned owner frees it.  Throws out_of_memory, cuda_error.
std::unique_ptr<resource> allocate_device_buffer(std::size_t bytes, int device, void** ptr);

/// Copies `view` into device memory of `device`; the returned owner frees it.
std::unique_ptr<resource> copy_view_to_device(const chunked_view& view, int device,
                                              const chunked_view** device_ptr);

}  // namespace wholememory::detail
