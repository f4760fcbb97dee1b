/*
 * Owned CUDA streams and events: the one home of the stream and event resources that the
 * layers above the memory layer (the trainer, the benches, the samplers) and the library itself
 * create, so that no caller pairs a raw create with a destroy.
 *
 * Contract.  `cuda_stream` and `cuda_event` are move-only and own one handle each, made on the
 * calling thread's current device; the destructor destroys it (never throws: a failure is
 * logged and the object goes on being destroyed).  Destroying a stream does not wait for its
 * work: CUDA releases the stream once the work enqueued so far has finished, so an owner that
 * must know its work is done synchronizes first.  A moved-from object, and one made from
 * `nullptr`, holds no handle: value() is nullptr and destruction does nothing (the default
 * constructor, by contrast, makes a stream or event).  Both convert
 * implicitly to the raw handle (cudaStream_t, cudaEvent_t), the cheap non-owning view that
 * functions and kernels take.
 *
 * Without CUDA.  The types exist in a build without CUDA (WHOLESTORE_WITH_CUDA=OFF), as the rest
 * of the library's stream parameters do: construction holds no handle (nullptr, the stream that
 * host-only builds pass everywhere), and synchronize, record and wait do nothing.  What needs
 * the device's clock, elapsed_ms, throws logic_error.
 *
 * Like stream.hpp, this header needs no CUDA header; the flags below have the values of the
 * CUDA runtime's flags of the same meaning.
 */
#pragma once

#include <wholememory/stream.hpp>

#include <cstddef>

namespace wholememory {

/// How a new stream orders itself against the legacy default stream (stream 0).
enum class stream_flags : unsigned {
  /// Synchronizes with the legacy default stream, as cudaStreamCreate's streams do
  /// (cudaStreamDefault).
  blocking = 0x0,
  /// Runs independently of the legacy default stream (cudaStreamNonBlocking).
  non_blocking = 0x1,
};

/// Whether a new event records time.  Events without timing are cheaper to record and to wait
/// for; only timed events can be given to elapsed_ms.
enum class event_flags : unsigned {
  timing = 0x0,          ///< cudaEventDefault
  disable_timing = 0x2,  ///< cudaEventDisableTiming
};

/// A CUDA stream, owned.  Move-only; destroys its stream on destruction (never throws).
class cuda_stream {
 public:
  /// A new stream on the calling thread's current device, non-blocking unless `flags` says
  /// otherwise.  Throws cuda_error when CUDA refuses (no device, out of resources); holds no
  /// stream in a build without CUDA.
  explicit cuda_stream(stream_flags flags = stream_flags::non_blocking);
  /// No stream (`cuda_stream s = nullptr;`, for a member made later or never): value() is
  /// nullptr until a stream is moved in.
  constexpr cuda_stream(std::nullptr_t) noexcept {}
  cuda_stream(cuda_stream&& other) noexcept;
  cuda_stream& operator=(cuda_stream&& other) noexcept;
  cuda_stream(const cuda_stream&) = delete;
  cuda_stream& operator=(const cuda_stream&) = delete;
  ~cuda_stream();

  /// The stream handle (nullptr when the object holds none); the object still owns it.
  cudaStream_t value() const noexcept { return stream_; }
  /// The non-owning view that functions taking a stream accept.
  operator cudaStream_t() const noexcept { return stream_; }

  /// Waits for the work enqueued on the stream so far; nothing when the object holds no stream
  /// (or in a build without CUDA).  Throws cuda_error when that work failed.
  void synchronize() const;

  /// The same for destructors and cleanup paths: a failure is logged, never thrown.
  void synchronize_no_throw() const noexcept;

  /// Destroys the stream now (without waiting for its work, see above); the object then holds
  /// none.  Never throws.
  void reset() noexcept;

 private:
  cudaStream_t stream_ = nullptr;
};

/// A CUDA event, owned.  Move-only; destroys its event on destruction (never throws).
class cuda_event {
 public:
  /// A new event on the calling thread's current device, without timing unless `flags` says
  /// otherwise.  Throws cuda_error when CUDA refuses; holds no event in a build without CUDA.
  explicit cuda_event(event_flags flags = event_flags::disable_timing);
  /// No event (`cuda_event e = nullptr;`, for a member made on first use): value() is nullptr
  /// until an event is moved in.
  constexpr cuda_event(std::nullptr_t) noexcept {}
  cuda_event(cuda_event&& other) noexcept;
  cuda_event& operator=(cuda_event&& other) noexcept;
  cuda_event(const cuda_event&) = delete;
  cuda_event& operator=(const cuda_event&) = delete;
  ~cuda_event();

  /// The event handle (nullptr when the object holds none); the object still owns it.
  cudaEvent_t value() const noexcept { return event_; }
  /// The non-owning view that functions taking an event accept.
  operator cudaEvent_t() const noexcept { return event_; }

  /// Records the event at the current end of `stream`'s work; asynchronous.  Throws
  /// logic_error when the object holds no event (in a build with CUDA), cuda_error when CUDA
  /// refuses; does nothing in a build without CUDA.
  void record(cudaStream_t stream);

  /// Makes the work enqueued on `stream` from now on wait for the work the event's last record
  /// captured (a no-op when it was never recorded); asynchronous, the host does not wait.
  /// Throws like record().
  void wait(cudaStream_t stream) const;

  /// Waits on the host for the work the event's last record captured.  Throws like record().
  void synchronize() const;

  /// Destroys the event now (recorded work goes on); the object then holds none.  Never
  /// throws.
  void reset() noexcept;

 private:
  cudaEvent_t event_ = nullptr;
};

/// Milliseconds between two recorded timing events (event_flags::timing), `end` after `start`;
/// does not wait (record both, then synchronize on `end` first).  Throws logic_error when either
/// holds no event or in a build without CUDA, cuda_error when CUDA refuses (an event not
/// recorded or not complete yet, an event without timing).
float elapsed_ms(const cuda_event& start, const cuda_event& end);

}  // namespace wholememory
