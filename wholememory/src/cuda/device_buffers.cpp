// Plain device buffers, host registration and the device helpers of the allocator module
// (cuda_memory.hpp, memory_owners.hpp): every cudaMalloc of the library goes through
// device_malloc here.
#include "cuda_memory.hpp"
#include "memory_owners.hpp"

#include <wholememory/cuda_check.hpp>
#include <wholememory/error.hpp>

#include <cuda_runtime.h>

#include <iomanip>
#include <memory>
#include <sstream>
#include <string>

namespace wholememory::detail {

std::string human_bytes(std::size_t bytes) {
  static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024.0 && unit < 5) {
    value /= 1024.0;
    ++unit;
  }
  std::ostringstream os;
  if (unit == 0) {
    os << bytes << " B";
  } else {
    os << std::setprecision(4) << value << ' ' << units[unit] << " (" << bytes << " bytes)";
  }
  return os.str();
}

/// Number of visible devices, 0 when CUDA reports an error (no driver, no device).
int visible_device_count() {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return count;
}

void expect_valid_device(int device) {
  int count = visible_device_count();
  WM_EXPECTS(device >= 0 && device < count,
             "CUDA device " << device << " is not one of the " << count << " visible devices");
}

/// cudaMalloc with the size and device in the out-of-memory message.
void* device_malloc(std::size_t bytes, int device) {
  if (bytes == 0) return nullptr;
  void* ptr = nullptr;
  cudaError_t err = cudaMalloc(&ptr, bytes);
  if (err != cudaSuccess) {
    cudaGetLastError();
    if (err == cudaErrorMemoryAllocation) {
      WM_FAIL(out_of_memory, "out of memory allocating "
                                 << human_bytes(bytes) << " on device " << device
                                 << ": cudaMalloc failed: " << cuda_error_text(err));
    }
    WM_FAIL(cuda_error, "cudaMalloc of " << human_bytes(bytes) << " on device " << device
                                         << " failed: " << cuda_error_text(err));
  }
  return ptr;
}

bool cuda_device_present() { return visible_device_count() > 0; }

int current_device() {
  WM_EXPECTS(cuda_device_present(), "no CUDA device is visible to this process");
  int device = -1;
  WM_CUDA_TRY(cudaGetDevice(&device));
  return device;
}

std::unique_ptr<resource> register_host_memory(void* ptr, std::size_t bytes) {
  if (bytes == 0 || ptr == nullptr || !cuda_device_present()) return nullptr;
  cudaError_t err = cudaHostRegister(ptr, bytes, cudaHostRegisterPortable | cudaHostRegisterMapped);
  if (err != cudaSuccess) {
    cudaGetLastError();
    if (err == cudaErrorMemoryAllocation) {
      WM_FAIL(out_of_memory, "out of memory registering "
                                 << human_bytes(bytes)
                                 << " of host memory with CUDA: " << cuda_error_text(err));
    }
    WM_FAIL(cuda_error, "cudaHostRegister of " << human_bytes(bytes) << " at " << ptr
                                               << " failed: " << cuda_error_text(err));
  }
  auto owner = std::make_unique<host_registration>(ptr);
  void* device_ptr = nullptr;
  WM_CUDA_TRY(cudaHostGetDevicePointer(&device_ptr, ptr, 0));
  if (device_ptr != ptr) {
    WM_FAIL(cuda_error,
            "registered host memory at "
                << ptr << " has device address " << device_ptr
                << "; wholestore needs unified addressing (the same address on host and "
                   "device)");
  }
  return owner;
}

std::unique_ptr<resource> allocate_device_buffer(std::size_t bytes, int device, void** ptr) {
  WM_EXPECTS(ptr != nullptr, "allocate_device_buffer needs an output pointer");
  *ptr = nullptr;
  expect_valid_device(device);
  device_guard guard(device);
  void* p = device_malloc(bytes, device);
  auto owner = std::make_unique<buffer_owner>(device, p);
  *ptr = p;
  return owner;
}

std::unique_ptr<resource> copy_view_to_device(const chunked_view& view, int device,
                                              const chunked_view** device_ptr) {
  WM_EXPECTS(device_ptr != nullptr, "copy_view_to_device needs an output pointer");
  *device_ptr = nullptr;
  expect_valid_device(device);
  device_guard guard(device);
  void* p = device_malloc(sizeof(chunked_view), device);
  auto owner = std::make_unique<buffer_owner>(device, p);
  // The legacy stream, then a wait on it: the copy has landed when this returns, whatever
  // stream the caller's kernels use next.
  WM_CUDA_TRY(
      cudaMemcpyAsync(p, &view, sizeof(chunked_view), cudaMemcpyHostToDevice, cudaStreamLegacy));
  WM_CUDA_TRY(cudaStreamSynchronize(cudaStreamLegacy));
  *device_ptr = static_cast<const chunked_view*>(p);
  return owner;
}

}  // namespace wholememory::detail
