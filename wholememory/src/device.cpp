// Device utilities usable without CUDA headers in the caller (device.hpp).
#include "cuda_memory.hpp"

#include <wholememory/device.hpp>
#include <wholememory/device_buffer.hpp>
#include <wholememory/error.hpp>

#include <algorithm>
#include <cstring>

#if defined(WHOLESTORE_HAS_CUDA)
#include <cuda_runtime_api.h>
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
    if (err != cudaSuccess)
      WM_FAIL(cuda_error, "cudaMemcpy of " << bytes << " bytes: " << cudaGetErrorString(err));
    return;
  }
#endif
  std::memcpy(dst, src, bytes);
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
