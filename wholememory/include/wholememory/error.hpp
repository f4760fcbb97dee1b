/*
 * Errors of the wholememory layer.
 *
 * Library code reports failures by throwing one of the exceptions below, raised through the
 * WM_* macros so that every message carries the file, the line and the failing condition or
 * call.  Messages name the bad value and the allowed range, and lead with the problem: the
 * source location and the failed check come last, in parentheses, for whoever debugs it
 * ("rank 1 (pid 42) died (host_communicator.cpp:596)").  The seed API (seed_api.hpp)
 * turns these into status codes at its boundary.
 */
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace wholememory {

/// A caller broke a precondition: bad argument, wrong size, id out of range.
class logic_error : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

/// Ranks called a collective with arguments that disagree (sizes, types, order).
class mismatch_error : public logic_error {
 public:
  using logic_error::logic_error;
};

/// A CUDA runtime or driver call failed.
class cuda_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// An NCCL call failed.
class nccl_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// An operating-system call failed (the message carries errno's text).
class system_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// An allocation could not be satisfied.
class out_of_memory : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A peer did not arrive in time, or is known to have died.
class timeout_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {

/// Formats "what (file:line)", or with a failed check "what (file:line, failed: check)", for
/// the exception messages: the problem first, where it was found last.
std::string format_location(const char* file, int line, const std::string& what,
                            const char* check = nullptr);

/// Throws `Exception` with the location (and the failed check, if any) appended.
template <typename Exception>
[[noreturn]] void throw_at(const char* file, int line, const std::string& what,
                           const char* check = nullptr) {
  throw Exception(format_location(file, line, what, check));
}

}  // namespace detail

/// Text of an errno value: "No such file or directory (errno 2)".  Thread-safe.
std::string errno_text(int err);

}  // namespace wholememory

/// Throws `type` with a message built by streaming `msg` (e.g. "size " << n << " > " << max).
#define WM_FAIL(type, msg)                                                        \
  do {                                                                            \
    std::ostringstream wm_fail_os_;                                               \
    wm_fail_os_ << msg;                                                           \
    ::wholememory::detail::throw_at<type>(__FILE__, __LINE__, wm_fail_os_.str()); \
  } while (0)

/// Checks a precondition; throws wholememory::logic_error with `msg`, then the condition.
#define WM_EXPECTS(cond, msg)                                                                   \
  do {                                                                                          \
    if (!(cond)) {                                                                              \
      std::ostringstream wm_expects_os_;                                                        \
      wm_expects_os_ << msg;                                                                    \
      ::wholememory::detail::throw_at<::wholememory::logic_error>(__FILE__, __LINE__,           \
                                                                  wm_expects_os_.str(), #cond); \
    }                                                                                           \
  } while (0)

/// Runs a POSIX call that returns -1 and sets errno on failure; throws wholememory::system_error.
#define WM_SYSCALL_TRY(call)                                              \
  do {                                                                    \
    if ((call) == -1) {                                                   \
      int wm_errno_ = errno;                                              \
      WM_FAIL(::wholememory::system_error,                                \
              #call " failed: " << ::wholememory::errno_text(wm_errno_)); \
    }                                                                     \
  } while (0)
