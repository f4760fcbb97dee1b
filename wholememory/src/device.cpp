// Device utilities usable without CUDA headers in the caller (device.hpp).
#include "cuda_memory.hpp"

#include <wholememory/device.hpp>
#include <wholememory/device_buffer.hpp>
#include <wholememory/error.hpp>
#include <wholememory/host_identity.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <sstream>
#include <vector>

#if defined(WHOLESTORE_HAS_CUDA)
#include <cuda_runtime_api.h>
#include <nccl.h>
#endif

namespace wholememory {

int device_count() {
#if defined(WHOLESTORE_HAS_CUDA)
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error
    return 0;
  }
  return count;
#else
  return 0;
#endif
}

void set_device(int device) {
  int count = device_count();
  WM_EXPECTS(device >= 0 && device < count,
             "CUDA device " << device << " does not exist; " << count << " visible");
#if defined(WHOLESTORE_HAS_CUDA)
  cudaError_t err = cudaSetDevice(device);
  if (err != cudaSuccess)
    WM_FAIL(cuda_error, "cudaSetDevice(" << device << "): " << cudaGetErrorString(err));
#endif
}

int current_device() { return detail::current_device(); }

int default_device(const communicator& comm) {
  int count = device_count();
  WM_EXPECTS(count > 0, "rank " << comm.rank() << " needs a CUDA device and none is visible");
  return comm.local_rank() % count;
}

void copy_bytes(void* dst, const void* src, std::size_t bytes) {
  if (bytes == 0) return;
#if defined(WHOLESTORE_HAS_CUDA)
  if (device_count() > 0) {
    cudaError_t err = cudaMemcpy(dst, src, bytes, cudaMemcpyDefault);
    // From pageable host memory cudaMemcpy may return before the DMA lands; wait for it, so
    // that work on any stream (non-blocking ones too) sees the bytes.
    if (err == cudaSuccess) err = cudaStreamSynchronize(cudaStreamLegacy);
    if (err != cudaSuccess)
      WM_FAIL(cuda_error, "cudaMemcpy of " << bytes << " bytes: " << cudaGetErrorString(err));
    return;
  }
#endif
  std::memcpy(dst, src, bytes);
}

int device_of_pointer(const void* ptr) {
#if defined(WHOLESTORE_HAS_CUDA)
  if (ptr == nullptr || device_count() == 0) return other_host_memory;
  cudaPointerAttributes a{};
  const cudaError_t err = cudaPointerGetAttributes(&a, ptr);
  if (err != cudaSuccess) {
    cudaGetLastError();
    WM_FAIL(cuda_error, "cudaPointerGetAttributes: " << cudaGetErrorString(err));
  }
  if (a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged) return a.device;
  return a.type == cudaMemoryTypeHost ? pinned_host_memory : other_host_memory;
#else
  (void)ptr;
  return other_host_memory;
#endif
}

void synchronize_stream(cudaStream_t stream) {
#if defined(WHOLESTORE_HAS_CUDA)
  const cudaError_t err = cudaStreamSynchronize(stream);
  if (err != cudaSuccess) {
    WM_FAIL(cuda_error, "cudaStreamSynchronize of stream "
                            << reinterpret_cast<std::uintptr_t>(stream) << ": "
                            << cudaGetErrorString(err));
  }
#else
  (void)stream;
#endif
}

cuda_environment describe_cuda_environment() {
  cuda_environment env;
#if defined(WHOLESTORE_HAS_CUDA)
  env.cuda_built = true;
  // Each query on its own: a machine without a driver still reports the runtime and NCCL.
  if (cudaDriverGetVersion(&env.driver_version) != cudaSuccess) env.driver_version = 0;
  if (cudaRuntimeGetVersion(&env.runtime_version) != cudaSuccess) env.runtime_version = 0;
  if (ncclGetVersion(&env.nccl_version) != ncclSuccess) env.nccl_version = 0;
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    cudaGetLastError();  // the "no device" error is sticky for the next call otherwise
    env.note = std::string("cudaGetDeviceCount: ") + cudaGetErrorString(err);
    return env;
  }
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp prop{};
    err = cudaGetDeviceProperties(&prop, d);
    if (err != cudaSuccess) {
      cudaGetLastError();
      env.note = "cudaGetDeviceProperties(" + std::to_string(d) + "): " + cudaGetErrorString(err);
      continue;
    }
    gpu_description gpu;
    gpu.device = d;
    gpu.name = prop.name;
    gpu.compute_major = prop.major;
    gpu.compute_minor = prop.minor;
    gpu.memory_bytes = prop.totalGlobalMem;
    char bus_id[32] = {};
    if (cudaDeviceGetPCIBusId(bus_id, sizeof(bus_id), d) == cudaSuccess) {
      gpu.pci_bus_id = bus_id;
    } else {
      cudaGetLastError();
    }
    env.gpus.push_back(std::move(gpu));
  }
#endif
  return env;
}

namespace {
// One rank's GPU, as the others see it: the host it runs on (host_identity: ranks of simulated
// hosts on one machine do not share a GPU, as NCCL, given NCCL_HOSTID, sees it too) and the
// device's PCI bus id (the same GPU has the same bus id whatever CUDA_VISIBLE_DEVICES each
// process was given).
struct gpu_identity {
  char host[max_host_identity + 1];
  char bus_id[32];
  std::int32_t device;  // this process's ordinal, -1 for no GPU
};
}  // namespace

gpu_sharing describe_gpu_sharing(bootstrap& bs, int device) {
  gpu_identity mine{};
  const std::string host = host_identity();
  std::memcpy(mine.host, host.data(), std::min(host.size(), sizeof(mine.host) - 1));
  mine.device = device;
#if defined(WHOLESTORE_HAS_CUDA)
  if (device >= 0) {
    cudaError_t err = cudaDeviceGetPCIBusId(mine.bus_id, sizeof(mine.bus_id), device);
    if (err != cudaSuccess) {
      cudaGetLastError();
      WM_FAIL(cuda_error, "cudaDeviceGetPCIBusId(" << device << "): " << cudaGetErrorString(err));
    }
  }
#else
  WM_EXPECTS(device < 0, "CUDA device " << device << " in a build without CUDA");
#endif
  std::vector<gpu_identity> all(static_cast<std::size_t>(bs.size()));
  bs.allgather(&mine, all.data(), sizeof(mine));

  gpu_sharing out;
  out.ranks = bs.size();
  // Ranks per physical GPU, in rank order.
  std::map<std::pair<std::string, std::string>, std::vector<int>> by_gpu;
  for (int r = 0; r < bs.size(); ++r) {
    if (all[r].device < 0) continue;
    by_gpu[{std::string(all[r].host), std::string(all[r].bus_id)}].push_back(r);
  }
  out.gpus = static_cast<int>(by_gpu.size());
  std::ostringstream desc;
  for (const auto& [gpu, ranks] : by_gpu) {
    out.max_ranks_per_gpu = std::max(out.max_ranks_per_gpu, static_cast<int>(ranks.size()));
    if (ranks.size() < 2) continue;
    if (desc.tellp() > 0) desc << "; ";
    desc << "ranks ";
    for (std::size_t i = 0; i < ranks.size(); ++i) desc << (i ? ", " : "") << ranks[i];
    desc << " on GPU " << all[ranks[0]].device << " (" << gpu.second << ") of " << gpu.first;
  }
  out.description = desc.str();
  return out;
}

host_registration::host_registration() noexcept = default;
host_registration::host_registration(void* ptr, std::size_t bytes)
    : owner_(detail::register_host_memory(ptr, bytes)) {}
host_registration::host_registration(host_registration&&) noexcept = default;
host_registration& host_registration::operator=(host_registration&&) noexcept = default;
host_registration::~host_registration() = default;

device_buffer::device_buffer() noexcept = default;

device_buffer::device_buffer(std::size_t bytes, int device) : bytes_(bytes), device_(device) {
  owner_ = detail::allocate_device_buffer(bytes, device, &ptr_);
}

device_buffer::device_buffer(device_buffer&& other) noexcept
    : owner_(std::move(other.owner_)),
      ptr_(other.ptr_),
      bytes_(other.bytes_),
      device_(other.device_) {
  other.ptr_ = nullptr;
  other.bytes_ = 0;
  other.device_ = -1;
}

device_buffer& device_buffer::operator=(device_buffer&& other) noexcept {
  if (this != &other) {
    reset();
    owner_ = std::move(other.owner_);
    ptr_ = other.ptr_;
    bytes_ = other.bytes_;
    device_ = other.device_;
    other.ptr_ = nullptr;
    other.bytes_ = 0;
    other.device_ = -1;
  }
  return *this;
}

device_buffer::~device_buffer() = default;

void* device_buffer::reserve_discard(std::size_t bytes, int device) {
  if (bytes <= bytes_ && device == device_ && owner_ != nullptr) return ptr_;
  const std::size_t want = device == device_ ? std::max(bytes, 2 * bytes_) : bytes;
  reset();
  *this = device_buffer(want, device);
  return ptr_;
}

void device_buffer::reset() noexcept {
  owner_.reset();
  ptr_ = nullptr;
  bytes_ = 0;
  device_ = -1;
}

}  // namespace wholememory
