/*
 * Checking CUDA runtime, driver and NCCL calls.
 *
 * For CUDA sources of any layer (it includes the CUDA headers, so only code built with CUDA
 * includes it).  Each *_TRY macro throws through WM_FAIL with the failing call's text
 * and the library's own error name and string; an allocation failure becomes out_of_memory,
 * anything else cuda_error (nccl_error for NCCL).  The *_WARN forms only print to stderr, for
 * destructors and cleanup paths, which never throw.  WM_NCCL_TRY needs <nccl.h> where it is
 * used.
 */
#pragma once

#include <wholememory/error.hpp>
#include <wholememory/log.hpp>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstdio>

namespace wholememory {

namespace detail {
/// Name and text of a driver API result ("CUDA_ERROR_OUT_OF_MEMORY (2): out of memory").
/// Defined with the library's driver entry points (src/cuda/cuda_memory.cpp).
std::string cu_result_text(CUresult res);

/// The debug-build wait of WM_CUDA_CHECK_LAUNCH(stream): waits for `stream` unless it is
/// capturing a CUDA graph (a capture forbids the wait, and the kernel has not run yet).
inline cudaError_t sync_unless_capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  const cudaError_t err = cudaStreamIsCapturing(stream, &status);
  if (err != cudaSuccess) return err;
  return status == cudaStreamCaptureStatusNone ? cudaStreamSynchronize(stream) : cudaSuccess;
}

/// The debug-build wait of WM_CUDA_CHECK_LAUNCH(): the whole device (not capture-safe).
inline cudaError_t sync_unless_capturing() { return cudaDeviceSynchronize(); }

/// Release builds: the stream argument of WM_CUDA_CHECK_LAUNCH is still type-checked.
inline void launch_check_stream() {}
inline void launch_check_stream(cudaStream_t) {}
}  // namespace detail

/// Name and text of a runtime API error ("cudaErrorMemoryAllocation: out of memory").
inline std::string cuda_error_text(cudaError_t err) {
  return std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err);
}

/// Makes `device` (and its primary context) current for the lifetime of the guard and restores
/// the caller's device afterwards (restoring never throws).
class device_guard {
 public:
  explicit device_guard(int device) {
    cudaError_t err = cudaGetDevice(&previous_);
    if (err != cudaSuccess) {
      cudaGetLastError();
      WM_FAIL(::wholememory::cuda_error, "cudaGetDevice failed: " << cuda_error_text(err));
    }
    // Also when it is current already: cudaSetDevice makes the primary context current,
    // which driver API calls that follow rely on.
    err = cudaSetDevice(device);
    if (err != cudaSuccess) {
      cudaGetLastError();
      WM_FAIL(::wholememory::cuda_error,
              "cudaSetDevice(" << device << ") failed: " << cuda_error_text(err));
    }
  }
  device_guard(const device_guard&) = delete;
  device_guard& operator=(const device_guard&) = delete;
  ~device_guard() {
    int now = -1;
    if (cudaGetDevice(&now) == cudaSuccess && now != previous_) cudaSetDevice(previous_);
  }

 private:
  int previous_ = 0;
};

}  // namespace wholememory

/// Runs a CUDA runtime call; throws out_of_memory for cudaErrorMemoryAllocation, else
/// cuda_error.  Clears the (non-sticky) last error so later launch checks do not see it.
#define WM_CUDA_TRY(call)                                                           \
  do {                                                                              \
    cudaError_t wm_cuda_err_ = (call);                                              \
    if (wm_cuda_err_ != cudaSuccess) {                                              \
      cudaGetLastError();                                                           \
      if (wm_cuda_err_ == cudaErrorMemoryAllocation) {                              \
        WM_FAIL(::wholememory::out_of_memory,                                       \
                #call " failed: " << ::wholememory::cuda_error_text(wm_cuda_err_)); \
      }                                                                             \
      WM_FAIL(::wholememory::cuda_error,                                            \
              #call " failed: " << ::wholememory::cuda_error_text(wm_cuda_err_));   \
    }                                                                               \
  } while (0)

/// Runs a CUDA driver call; throws out_of_memory for CUDA_ERROR_OUT_OF_MEMORY, else cuda_error.
#define WM_CU_TRY(call)                                                                  \
  do {                                                                                   \
    CUresult wm_cu_res_ = (call);                                                        \
    if (wm_cu_res_ != CUDA_SUCCESS) {                                                    \
      if (wm_cu_res_ == CUDA_ERROR_OUT_OF_MEMORY) {                                      \
        WM_FAIL(::wholememory::out_of_memory,                                            \
                #call " failed: " << ::wholememory::detail::cu_result_text(wm_cu_res_)); \
      }                                                                                  \
      WM_FAIL(::wholememory::cuda_error,                                                 \
              #call " failed: " << ::wholememory::detail::cu_result_text(wm_cu_res_));   \
    }                                                                                    \
  } while (0)

/// Runs an NCCL call; throws nccl_error for anything but ncclSuccess (non-blocking
/// communicators handle ncclInProgress themselves before reaching this).
#define WM_NCCL_TRY(call)                                                   \
  do {                                                                      \
    ncclResult_t wm_nccl_res_ = (call);                                     \
    if (wm_nccl_res_ != ncclSuccess) {                                      \
      WM_FAIL(::wholememory::nccl_error,                                    \
              #call " failed: " << ncclGetErrorString(wm_nccl_res_) << " (" \
                                << static_cast<int>(wm_nccl_res_) << ")");  \
    }                                                                       \
  } while (0)

/// Checks the last kernel launch: WM_CUDA_CHECK_LAUNCH(stream) after a launch on `stream`.
/// Debug builds (no NDEBUG) also wait for the kernel so that an error points at the launch that
/// caused it: for the stream form, a wait for `stream` that is skipped while the stream is
/// capturing a CUDA graph (cudaStreamIsCapturing), so captures run in debug builds too.  The
/// older form without an argument waits for the whole device in debug builds, which a capture
/// forbids; prefer the stream form.
#ifdef NDEBUG
#define WM_CUDA_CHECK_LAUNCH(...)                            \
  do {                                                       \
    WM_CUDA_TRY(cudaGetLastError());                         \
    ::wholememory::detail::launch_check_stream(__VA_ARGS__); \
  } while (0)
#else
#define WM_CUDA_CHECK_LAUNCH(...)                                           \
  do {                                                                      \
    WM_CUDA_TRY(cudaGetLastError());                                        \
    WM_CUDA_TRY(::wholememory::detail::sync_unless_capturing(__VA_ARGS__)); \
  } while (0)
#endif

/// Like WM_CUDA_TRY but only reports the failure on stderr (destructors, cleanup).
#define WM_CUDA_WARN(call)                                                                         \
  do {                                                                                             \
    cudaError_t wm_cuda_err_ = (call);                                                             \
    if (wm_cuda_err_ != cudaSuccess) {                                                             \
      cudaGetLastError();                                                                          \
      WM_LOG(::wholememory::log_level::warn,                                                       \
             #call " failed: " << ::wholememory::cuda_error_text(wm_cuda_err_) << " (" << __FILE__ \
                               << ":" << __LINE__ << ")");                                         \
    }                                                                                              \
  } while (0)

/// Like WM_CU_TRY but only reports the failure on stderr (destructors, cleanup).
#define WM_CU_WARN(call)                                                                    \
  do {                                                                                      \
    CUresult wm_cu_res_ = (call);                                                           \
    if (wm_cu_res_ != CUDA_SUCCESS) {                                                       \
      WM_LOG(::wholememory::log_level::warn,                                                \
             #call " failed: " << ::wholememory::detail::cu_result_text(wm_cu_res_) << " (" \
                               << __FILE__ << ":" << __LINE__ << ")");                      \
    }                                                                                       \
  } while (0)
