/*
 * Interrupting the library's long waits.
 *
 * A collective can wait up to its timeout (300 s by default) for a peer that is late, hung or
 * gone.  request_interrupt() asks every such wait of this process to end now: the waits of the
 * TCP bootstrap, the host communicator and the NCCL communicator check the request between
 * short polls (at most 100 ms apart) and throw interrupted_error.  Like a timeout, an
 * interrupted collective leaves its communicator unusable (the peers fail too instead of
 * waiting), so a job that was interrupted ends.
 *
 * request_interrupt() is async-signal-safe: a SIGINT handler may call it.  The Python package
 * does so around each call into the library (Ctrl-C raises KeyboardInterrupt there).  The
 * request stays until clear_interrupt().
 */
#pragma once

#include <wholememory/error.hpp>

namespace wholememory {

/// A wait that request_interrupt() ended.  A timeout_error: the collective did not complete,
/// and the communicator it ran on is as unusable as after a timeout.
class interrupted_error : public timeout_error {
 public:
  using timeout_error::timeout_error;
};

/// Asks every wait of the library in this process to throw interrupted_error.  Async-signal-safe.
void request_interrupt() noexcept;
/// Withdraws the request (waits started later run to completion or timeout again).
void clear_interrupt() noexcept;
/// Whether an interrupt was requested and not cleared.  Async-signal-safe.
bool interrupt_requested() noexcept;

/// How long a wait may sleep or poll before it checks for an interrupt again.
inline constexpr int interrupt_poll_ms = 100;

}  // namespace wholememory
