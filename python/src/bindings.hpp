/*
 * The parts of the extension module wholestore._core, one function per layer; module.cpp calls
 * them in order (the exception classes first, then memory: the others take its Communicator).
 */
#pragma once

#include <nanobind/nanobind.h>
#include <wholememory/bootstrap.hpp>
#include <wholememory/communicator.hpp>

#include <condition_variable>
#include <cstddef>
#include <exception>
#include <memory>
#include <mutex>
#include <string>

namespace wholestore::python {

namespace nb = nanobind;

/// Python's Communicator: a communicator and the bootstrap it was made from (kept for the
/// small out-of-band exchanges and for making an NCCL communicator over the same ranks).
struct py_comm {
  std::shared_ptr<wholememory::bootstrap> bs;
  std::shared_ptr<wholememory::communicator> comm;
};

/// Releases the GIL for a call into the library.  On the main thread, Ctrl-C (SIGINT) during
/// the call also asks the library's waits to end (wholememory::request_interrupt): a call
/// waiting in a collective for a peer that is gone returns within about 100 ms with
/// interrupted_error instead of at its timeout, and translate_interrupt turns that into what
/// Python's own handler raises (KeyboardInterrupt).  The handler in front of Python's is
/// installed for the call only, and passes the signal on.
class released_call {
 public:
  released_call();
  ~released_call();
  released_call(const released_call&) = delete;
  released_call& operator=(const released_call&) = delete;

 private:
  bool installed_ = false;
  nb::gil_scoped_release release_;
};

/// What makes free() safe against calls on other threads.  Every call releases the GIL while
/// the library works, so without this a free() on one thread destroys the C++ object under a
/// call still running on another (issue 36: SIGSEGV).  An object that frees its memory holds
/// one call_guard:
///  - a method that releases the GIL takes a pass (enter()) with the GIL held, before its
///    released_call, and keeps it to the end of the call;
///  - a method that does not release the GIL only calls check();
///  - free() goes through close(): new calls are refused from then on (ValueError with the
///    object's "freed" message), the calls in flight are waited for with the GIL released (they
///    need it to return), then the object is freed, still without the GIL.  A collective free
///    stays collective: each rank waits for its own calls, then frees.  Ctrl-C during the wait
///    asks the library's waits to end (released_call), so a call waiting in a collective for a
///    peer that is gone returns and the free goes on;
///  - a call that must not run beside another of its kind on the same object (the library
///    keeps scratch buffers or a counter in the object: an embedding table's update, every
///    call of a device cache) also takes one_at_a_time() after its released_call.
class call_guard {
 public:
  /// A call in flight: holds the object alive until destroyed.
  class pass {
   public:
    pass(pass&& other) noexcept : guard_(other.guard_) { other.guard_ = nullptr; }
    pass(const pass&) = delete;
    pass& operator=(const pass&) = delete;
    pass& operator=(pass&&) = delete;
    ~pass() {
      if (guard_ == nullptr) return;
      std::lock_guard<std::mutex> lock(guard_->mutex_);
      if (--guard_->in_flight_ == 0) guard_->changed_.notify_all();
    }

   private:
    friend class call_guard;
    explicit pass(const call_guard* guard) : guard_(guard) {}
    const call_guard* guard_;
  };

  /// `freed_message`: what a call after free() raises (a string literal).
  explicit call_guard(const char* freed_message) : freed_message_(freed_message) {}
  /// Moves the state of an object with no call in flight (one returned by value to Python).
  call_guard(call_guard&& other) noexcept
      : freed_message_(other.freed_message_), state_(other.state_) {}
  call_guard(const call_guard&) = delete;
  call_guard& operator=(const call_guard&) = delete;
  call_guard& operator=(call_guard&&) = delete;

  /// False once close() has begun.  With the GIL held.
  bool open() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return state_ == state::open;
  }
  /// Throws ValueError (`message`, default the freed message) once close() has begun.  With
  /// the GIL held.
  void check(const char* message = nullptr) const {
    if (!open()) throw nb::value_error(message != nullptr ? message : freed_message_);
  }
  /// check(), then a pass for the call.  With the GIL held, before releasing it.
  pass enter(const char* message = nullptr) const {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (state_ == state::open) {
        ++in_flight_;
        return pass(this);
      }
    }
    throw nb::value_error(message != nullptr ? message : freed_message_);
  }

  /// Waits until no other one_at_a_time() call of this object runs.  Take it after the
  /// released_call (never wait for it holding the GIL: the call holding it may need the GIL to
  /// return); it is given up before the GIL is taken back.
  std::unique_lock<std::mutex> one_at_a_time() const {
    return std::unique_lock<std::mutex>(one_at_a_time_);
  }

  /// Refuses new calls, waits for the calls in flight, then runs `free_memory` (both with the
  /// GIL released).  Returns false when another close() came first, after waiting for it to
  /// finish (a second free() is a no-op).  An exception of `free_memory` propagates; the
  /// object stays closed.  With the GIL held.
  template <typename Free>
  bool close(Free&& free_memory) {
    bool first = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (state_ == state::closed) return false;
      first = state_ == state::open;
      state_ = state::closing;
    }
    // The GIL is never taken while mutex_ is held (a thread in enter() holds the GIL and waits
    // for mutex_): `lock` is given up before `release` takes the GIL back.
    released_call release;
    std::unique_lock<std::mutex> lock(mutex_);
    if (!first) {
      changed_.wait(lock, [&] { return state_ == state::closed; });
      return false;
    }
    changed_.wait(lock, [&] { return in_flight_ == 0; });
    lock.unlock();
    try {
      free_memory();
    } catch (...) {
      mark_closed();
      throw;
    }
    mark_closed();
    return true;
  }

 private:
  enum class state { open, closing, closed };
  const char* freed_message_;
  // Mutable: a call in flight does not change the object (const methods take passes too).
  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  mutable std::size_t in_flight_ = 0;
  state state_ = state::open;
  mutable std::mutex one_at_a_time_;

  void mark_closed() {
    std::lock_guard<std::mutex> lock(mutex_);
    state_ = state::closed;
    changed_.notify_all();
  }
};

/// Remembers the calling thread as Python's main thread (the one that runs signal handlers).
void note_main_thread();
/// Exception translator for wholememory::interrupted_error: runs Python's pending signal
/// handlers (KeyboardInterrupt), else raises `interrupted_type` with the user_message.
void translate_interrupt(const std::exception_ptr& p, void* interrupted_type);

/// What Python shows of a library message: without the " (file.cpp:123[, failed: check])"
/// groups the library appends for developers, unless WHOLESTORE_DEBUG=1 (read at each call).
std::string user_message(const std::string& what);
/// The exception classes (errors.cpp): WholestoreError, the base of all, and one subclass per
/// library exception, each also the builtin a Python user expects (LogicError a ValueError,
/// IndexOutOfRangeError an IndexError, NotFoundError a FileNotFoundError, PeerTimeoutError a
/// TimeoutError, OutOfMemoryError a MemoryError), and their translators.  Called first.
void bind_errors(nb::module_& m);

/// Communicator, WholeMemory (Memory), device helpers, file IO of one allocation.
void bind_memory(nb::module_& m);
/// Embedding tables (Table) and their checkpoints.
void bind_embedding(nb::module_& m);
/// Host graphs, datasets (gen, convert, read, write), graphs in WholeMemory, the samplers.
void bind_graph(nb::module_& m);
/// SymmetricMemory (symmetric.cpp).
void bind_symmetric(nb::module_& m);
/// The node-embedding trainer (train_embeddings) and TrainingDiverged (train.cpp).
void bind_train(nb::module_& m);

}  // namespace wholestore::python
