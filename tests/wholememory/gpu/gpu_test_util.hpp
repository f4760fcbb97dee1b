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
#include <string>

namespace wholestore_test {

/// What a forked child saw of CUDA: the number of visible devices, or the error that stopped it
/// from counting them (no driver, a broken runtime).
struct cuda_probe {
  int devices = 0;
  std::string error;  ///< empty when cudaGetDeviceCount succeeded
};

/// Asks CUDA in a short-lived forked child, so that this process never initializes CUDA.
inline const cuda_probe& probe_cuda_forked() {
  static const cuda_probe probe = [] {
    cuda_probe out;
    int fds[2];
    if (::pipe(fds) != 0) {
      out.error = "pipe failed";
      return out;
    }
    pid_t pid = ::fork();
    if (pid < 0) {
      out.error = "fork failed";
      return out;
    }
    if (pid == 0) {
      ::close(fds[0]);
      int n = 0;
      const cudaError_t err = cudaGetDeviceCount(&n);
      std::string text = err == cudaSuccess ? std::to_string(n)
                                            : std::string("error ") + cudaGetErrorName(err) + ": " +
                                                  cudaGetErrorString(err);
      ssize_t ignored = ::write(fds[1], text.data(), text.size());
      (void)ignored;
      ::_exit(0);
    }
    ::close(fds[1]);
    std::string text;
    char buf[256];
    for (ssize_t got; (got = ::read(fds[0], buf, sizeof buf)) > 0;) text.append(buf, got);
    ::close(fds[0]);
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (text.rfind("error ", 0) == 0) {
      out.error = text.substr(6);
    } else if (text.empty() || !WIFEXITED(status)) {
      out.error = "the CUDA probe died (status " + std::to_string(status) + ")";
    } else {
      out.devices = std::atoi(text.c_str());
    }
    return out;
  }();
  return probe;
}

/// Number of visible CUDA devices; 0 when CUDA reports an error.
inline int cuda_device_count_forked() {
  const cuda_probe& p = probe_cuda_forked();
  return p.error.empty() ? p.devices : 0;
}

/// True where GPUs must be usable ($WHOLESTORE_EXPECT_GPU=1, set by the GPU machine's scripts):
/// there a CUDA error or no visible device fails the GPU tests instead of skipping them.
inline bool gpus_expected() {
  const char* v = std::getenv("WHOLESTORE_EXPECT_GPU");
  return v != nullptr && std::string(v) == "1";
}

/// Skips the current test unless at least `n` CUDA devices are visible.  Where GPUs are
/// expected (gpus_expected), a CUDA error or no device at all fails the test instead; fewer
/// devices than `n` still skips, saying how many there are.
#define WHOLESTORE_REQUIRE_GPUS(n)                                                               \
  do {                                                                                           \
    const ::wholestore_test::cuda_probe& wm_probe_ = ::wholestore_test::probe_cuda_forked();     \
    if (::wholestore_test::gpus_expected() &&                                                    \
        (!wm_probe_.error.empty() || wm_probe_.devices == 0)) {                                  \
      FAIL() << "GPUs are expected here (WHOLESTORE_EXPECT_GPU=1) but CUDA "                     \
             << (wm_probe_.error.empty() ? std::string("sees no device") : wm_probe_.error);     \
    }                                                                                            \
    if (!wm_probe_.error.empty()) GTEST_SKIP() << "no usable CUDA: " << wm_probe_.error;         \
    if (wm_probe_.devices < (n)) {                                                               \
      GTEST_SKIP() << "needs " << (n) << " CUDA device(s), " << wm_probe_.devices << " visible"; \
    }                                                                                            \
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
