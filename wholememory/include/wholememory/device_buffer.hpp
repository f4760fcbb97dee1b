/*
 * device_buffer: plain device memory of one GPU, owned.  For the scratch and staging buffers of
 * the layers above the memory layer (samplers, embedding tables, apps), so that every device
 * allocation goes through the one allocator module.  Move-only; the destructor frees (never
 * throws).  Not stream-ordered: allocation and free synchronize like cudaMalloc/cudaFree, so
 * keep buffers across calls rather than making one per call.
 */
#pragma once

#include <cstddef>
#include <memory>

namespace wholememory {

namespace detail {
class resource;
}

class device_buffer {
 public:
  /// An empty buffer: data() is nullptr, size() 0, device() -1.
  device_buffer() noexcept;
  /// `bytes` bytes on CUDA device `device` (data() is nullptr for 0 bytes).  Throws
  /// out_of_memory, cuda_error, or logic_error for a device that does not exist or a build
  /// without CUDA.
  device_buffer(std::size_t bytes, int device);
  device_buffer(device_buffer&&) noexcept;
  device_buffer& operator=(device_buffer&&) noexcept;
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;
  ~device_buffer();

  void* data() noexcept { return ptr_; }
  const void* data() const noexcept { return ptr_; }
  template <typename T>
  T* data_as() noexcept {
    return static_cast<T*>(ptr_);
  }
  template <typename T>
  const T* data_as() const noexcept {
    return static_cast<const T*>(ptr_);
  }
  std::size_t size() const noexcept { return bytes_; }
  int device() const noexcept { return device_; }
  bool empty() const noexcept { return bytes_ == 0; }

  /// Makes the buffer hold at least `bytes` bytes on `device`; the contents are not kept when it
  /// grows (growth is geometric: at least twice the old size).  Returns data().
  void* reserve_discard(std::size_t bytes, int device);

  /// Frees the memory now; the buffer becomes empty.
  void reset() noexcept;

 private:
  std::unique_ptr<detail::resource> owner_;
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
  int device_ = -1;
};

}  // namespace wholememory
