/*
 * Helpers of the GPU tests.
 *
 * CUDA cannot be used in a child forked from a process that has initialized CUDA, so the test
 * process itself never calls CUDA: it counts devices in a short-lived forked child, and every
 * test body that touches a GPU runs in forked ranks (fork_ranks), threads included (a forked
 * child that then starts threads).  Device buffers are wholememory::device_buffer.
 */
#pragma once

#include <wholememory/cuda_check.hpp>
#include <wholememory/device_buffer.hpp>

#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <memory>

namespace wholestore_test {

/// Number of visible CUDA devices, asked in a forked child so that this process never
/// initializes CUDA.  0 when CUDA reports an error (no driver, no device).
inline int cuda_device_count_forked() {
  static const int count = [] {
    pid_t pid = ::fork();
    if (pid < 0) return 0;
    if (pid == 0) {
      int n = 0;
      if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
      ::_exit(std::min(n, 100));
    }
    int status = 0;
    if (::waitpid(pid, &status, 0) != pid) return 0;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 0;
  }();
  return count;
}

/// Skips the current test unless at least `n` CUDA devices are visible.
#define WHOLESTORE_REQUIRE_GPUS(n)                                                           \
  do {                                                                                       \
    const int wm_have_gpus_ = ::wholestore_test::cuda_device_count_forked();                 \
    if (wm_have_gpus_ < (n)) {                                                               \
      GTEST_SKIP() << "needs " << (n) << " CUDA device(s), " << wm_have_gpus_ << " visible"; \
    }                                                                                        \
  } while (0)

/// Device memory (wholememory::device_buffer) with the tests' short accessors.
class device_buffer {
 public:
  device_buffer(std::size_t bytes, int device) : buffer_(bytes, device) {}
  void* get() const { return ptr(); }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr());
  }

 private:
  void* ptr() const { return const_cast<void*>(buffer_.data()); }
  wholememory::device_buffer buffer_;
};

/// cudaMemcpy, then a wait on the legacy stream: a copy from pageable host memory may return
/// before its DMA has landed, and kernels on non-blocking streams do not wait for it.
inline cudaError_t copy_and_wait(void* dst, const void* src, std::size_t bytes,
                                 cudaMemcpyKind kind) {
  cudaError_t err = cudaMemcpy(dst, src, bytes, kind);
  if (err != cudaSuccess) return err;
  return cudaStreamSynchronize(cudaStreamLegacy);
}

/// A non-blocking CUDA stream on the current device, destroyed on destruction.
class cuda_stream {
 public:
  cuda_stream() { WM_CUDA_TRY(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
  cuda_stream(const cuda_stream&) = delete;
  cuda_stream& operator=(const cuda_stream&) = delete;
  ~cuda_stream() { WM_CUDA_WARN(cudaStreamDestroy(stream_)); }
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

}  // namespace wholestore_test
