// Owned CUDA streams and events (cuda_stream.hpp).  Built with and without CUDA: without it the
// objects hold no handle and their operations do nothing, except elapsed_ms, which refuses.
#include <wholememory/cuda_stream.hpp>
#include <wholememory/error.hpp>
#include <wholememory/log.hpp>

#include <cstdint>
#include <utility>

#if defined(WHOLESTORE_HAS_CUDA)
#include <wholememory/cuda_check.hpp>

#include <cuda_runtime_api.h>

static_assert(static_cast<unsigned>(wholememory::stream_flags::blocking) == cudaStreamDefault);
static_assert(static_cast<unsigned>(wholememory::stream_flags::non_blocking) ==
              cudaStreamNonBlocking);
static_assert(static_cast<unsigned>(wholememory::event_flags::timing) == cudaEventDefault);
static_assert(static_cast<unsigned>(wholememory::event_flags::disable_timing) ==
              cudaEventDisableTiming);
#endif

namespace wholememory {

namespace {

#if defined(WHOLESTORE_HAS_CUDA)
// A destroy that failed, logged.  Owners with static or thread storage (the gather path's
// per-thread streams) are destroyed at exit, possibly after the runtime began to unload, which
// frees every handle with it: nothing to report then.
void log_destroy_failure(cudaError_t err, const char* what, const void* handle) {
  cudaGetLastError();
  if (err == cudaErrorCudartUnloading) return;
  WM_LOG(log_level::warn, what << " of " << reinterpret_cast<std::uintptr_t>(handle)
                               << " failed: " << cuda_error_text(err));
}
#endif

}  // namespace

// ---- cuda_stream ----------------------------------------------------------------------------

cuda_stream::cuda_stream(stream_flags flags) {
#if defined(WHOLESTORE_HAS_CUDA)
  WM_CUDA_TRY(cudaStreamCreateWithFlags(&stream_, static_cast<unsigned>(flags)));
#else
  (void)flags;
#endif
}

cuda_stream::cuda_stream(cuda_stream&& other) noexcept
    : stream_(std::exchange(other.stream_, nullptr)) {}

cuda_stream& cuda_stream::operator=(cuda_stream&& other) noexcept {
  if (this != &other) {
    reset();
    stream_ = std::exchange(other.stream_, nullptr);
  }
  return *this;
}

cuda_stream::~cuda_stream() { reset(); }

void cuda_stream::synchronize() const {
  if (stream_ == nullptr) return;
#if defined(WHOLESTORE_HAS_CUDA)
  const cudaError_t err = cudaStreamSynchronize(stream_);
  if (err != cudaSuccess) {
    cudaGetLastError();
    WM_FAIL(cuda_error, "cudaStreamSynchronize of stream "
                            << reinterpret_cast<std::uintptr_t>(stream_) << ": "
                            << cuda_error_text(err));
  }
#endif
}

void cuda_stream::synchronize_no_throw() const noexcept {
  if (stream_ == nullptr) return;
#if defined(WHOLESTORE_HAS_CUDA)
  const cudaError_t err = cudaStreamSynchronize(stream_);
  if (err != cudaSuccess) log_destroy_failure(err, "cudaStreamSynchronize", stream_);
#endif
}

void cuda_stream::reset() noexcept {
  if (stream_ == nullptr) return;
#if defined(WHOLESTORE_HAS_CUDA)
  const cudaError_t err = cudaStreamDestroy(stream_);
  if (err != cudaSuccess) log_destroy_failure(err, "cudaStreamDestroy", stream_);
#endif
  stream_ = nullptr;
}

// ---- cuda_event -----------------------------------------------------------------------------

cuda_event::cuda_event(event_flags flags) {
#if defined(WHOLESTORE_HAS_CUDA)
  WM_CUDA_TRY(cudaEventCreateWithFlags(&event_, static_cast<unsigned>(flags)));
#else
  (void)flags;
#endif
}

cuda_event::cuda_event(cuda_event&& other) noexcept
    : event_(std::exchange(other.event_, nullptr)) {}

cuda_event& cuda_event::operator=(cuda_event&& other) noexcept {
  if (this != &other) {
    reset();
    event_ = std::exchange(other.event_, nullptr);
  }
  return *this;
}

cuda_event::~cuda_event() { reset(); }

void cuda_event::record(cudaStream_t stream) {
#if defined(WHOLESTORE_HAS_CUDA)
  WM_EXPECTS(event_ != nullptr, "cuda_event::record on an object that holds no event");
  WM_CUDA_TRY(cudaEventRecord(event_, stream));
#else
  (void)stream;
#endif
}

void cuda_event::wait(cudaStream_t stream) const {
#if defined(WHOLESTORE_HAS_CUDA)
  WM_EXPECTS(event_ != nullptr, "cuda_event::wait on an object that holds no event");
  WM_CUDA_TRY(cudaStreamWaitEvent(stream, event_, 0));
#else
  (void)stream;
#endif
}

void cuda_event::synchronize() const {
#if defined(WHOLESTORE_HAS_CUDA)
  WM_EXPECTS(event_ != nullptr, "cuda_event::synchronize on an object that holds no event");
  WM_CUDA_TRY(cudaEventSynchronize(event_));
#endif
}

void cuda_event::reset() noexcept {
  if (event_ == nullptr) return;
#if defined(WHOLESTORE_HAS_CUDA)
  const cudaError_t err = cudaEventDestroy(event_);
  if (err != cudaSuccess) log_destroy_failure(err, "cudaEventDestroy", event_);
#endif
  event_ = nullptr;
}

float elapsed_ms(const cuda_event& start, const cuda_event& end) {
#if defined(WHOLESTORE_HAS_CUDA)
  WM_EXPECTS(start.value() != nullptr && end.value() != nullptr,
             "elapsed_ms: the " << (start.value() == nullptr ? "start" : "end")
                                << " object holds no event");
  float ms = 0;
  WM_CUDA_TRY(cudaEventElapsedTime(&ms, start.value(), end.value()));
  return ms;
#else
  (void)start;
  (void)end;
  WM_FAIL(logic_error,
          "elapsed_ms: timing events need a build with CUDA (WHOLESTORE_WITH_CUDA=ON)");
#endif
}

}  // namespace wholememory
