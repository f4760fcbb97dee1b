/*
 * Small device utilities for code that must not include CUDA headers (apps, host code).
 * In a build without CUDA they report no devices and copy with memcpy.
 */
#pragma once

#include <wholememory/communicator.hpp>

#include <wholememory/stream.hpp>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace wholememory {

namespace detail {
class resource;
}

/// Number of visible CUDA devices; 0 without CUDA or when the query fails.
int device_count();

/// The calling thread's current CUDA device.  Throws logic_error in a build without CUDA,
/// cuda_error when the query fails.
int current_device();

/// Makes `device` the calling thread's current CUDA device.  Throws logic_error when it does
/// not exist (or in a build without CUDA).
void set_device(int device);

/// The device a rank should use by default: its local rank modulo the visible devices.
/// Throws logic_error when no device is visible.
int default_device(const communicator& comm);

/// How the ranks of a job sit on their GPUs: which physical GPUs (by host and PCI bus id) more
/// than one rank uses.  Several ranks per GPU is a normal setup (a 2-rank job on a 1-GPU
/// machine); WholeMemory of every type and the GPU sampler work with it over the host
/// communicator, but NCCL refuses it, so distributed memory on the GPU path needs one GPU per
/// rank.
struct gpu_sharing {
  int ranks = 0;              ///< ranks in the job
  int gpus = 0;               ///< distinct GPUs they use (over all hosts)
  int max_ranks_per_gpu = 0;  ///< most ranks on one GPU (0 when no rank uses a GPU)
  bool shared() const { return max_ranks_per_gpu > 1; }
  /// "ranks 0, 1 on GPU 0 (0000:1b:00.0) of host-a"-style list of the shared GPUs; empty when
  /// none is shared.
  std::string description;
};

/// Collective over `bs`: every rank passes the CUDA device it uses (-1 for none) and gets the
/// same answer.  Throws cuda_error when a device's PCI bus id cannot be read.
gpu_sharing describe_gpu_sharing(bootstrap& bs, int device);

/// Host memory registered with CUDA (page-locked and mapped at the same address on the device)
/// for as long as the object lives, so kernels and copies read it directly.  Does nothing when
/// no device is present (or in a build without CUDA).  Move-only; unregisters on destruction
/// (never throws).
class host_registration {
 public:
  host_registration() noexcept;
  /// Registers [ptr, ptr + bytes).  Throws out_of_memory or cuda_error when CUDA refuses.
  host_registration(void* ptr, std::size_t bytes);
  host_registration(host_registration&&) noexcept;
  host_registration& operator=(host_registration&&) noexcept;
  host_registration(const host_registration&) = delete;
  host_registration& operator=(const host_registration&) = delete;
  ~host_registration();
  /// True when the memory is registered (a device was present).
  bool active() const noexcept { return owner_ != nullptr; }

 private:
  std::unique_ptr<detail::resource> owner_;
};

/// One visible CUDA device, as describe_cuda_environment reports it.
struct gpu_description {
  int device = 0;                ///< this process's ordinal (after CUDA_VISIBLE_DEVICES)
  std::string name;              ///< e.g. "NVIDIA H200"
  std::string pci_bus_id;        ///< e.g. "0000:1b:00.0"
  int compute_major = 0;         ///< compute capability, e.g. 9
  int compute_minor = 0;         ///< e.g. 0
  std::size_t memory_bytes = 0;  ///< total device memory
};

/// What this process sees of CUDA and NCCL at run time, for version banners and reports (the
/// versions the library was compiled against are the build's business, not this one's).
struct cuda_environment {
  bool cuda_built = false;            ///< the library was built with CUDA and NCCL
  int driver_version = 0;             ///< cudaDriverGetVersion, e.g. 12040 for 12.4; 0: no driver
  int runtime_version = 0;            ///< cudaRuntimeGetVersion of the runtime loaded, e.g. 12040
  int nccl_version = 0;               ///< ncclGetVersion of the NCCL loaded, e.g. 22105 for 2.21.5
  std::vector<gpu_description> gpus;  ///< the visible devices, in ordinal order
  std::string note;  ///< why no device is listed when a query failed; empty otherwise
};

/// Asks the CUDA runtime, driver and NCCL what they are and which devices are visible.  Never
/// throws: a failed query leaves its fields 0 or empty and says why in `note`.  Leaves the
/// calling thread's current device as it was; not collective; in a build without CUDA, returns
/// `cuda_built == false` and nothing else.
cuda_environment describe_cuda_environment();

/// Copies `bytes` bytes between any two addresses this process can reach (host, device, or
/// WholeMemory); synchronous.
void copy_bytes(void* dst, const void* src, std::size_t bytes);

/// Where `ptr` points: the CUDA device that holds it (device or managed memory, >= 0),
/// pinned_host_memory for page-locked host memory, other_host_memory for any other address
/// (also for every address without a GPU or in a build without CUDA).  Throws cuda_error when
/// the runtime cannot tell.
inline constexpr int pinned_host_memory = -1;
inline constexpr int other_host_memory = -2;
int device_of_pointer(const void* ptr);

/// Waits for the work enqueued on `stream` so far (0: the legacy default stream); nothing in a
/// build without CUDA.  Throws cuda_error naming the stream when the wait fails.
void synchronize_stream(cudaStream_t stream);

}  // namespace wholememory
