// Ctrl-C during a call into the library (bindings.hpp, released_call).
#include "bindings.hpp"

#include <wholememory/interrupt.hpp>

#include <pthread.h>
#include <signal.h>

namespace wholestore::python {

namespace {

pthread_t main_thread;
bool main_thread_known = false;
int depth = 0;  // nesting of released_call on the main thread
struct sigaction previous_sigint {};

void on_sigint(int sig, siginfo_t* info, void* context) {
  wholememory::request_interrupt();
  // Python's own handler (or whatever was installed) still sees the signal: it raises
  // KeyboardInterrupt, or runs the user's handler, once the call returns.
  if ((previous_sigint.sa_flags & SA_SIGINFO) != 0) {
    if (previous_sigint.sa_sigaction != nullptr) previous_sigint.sa_sigaction(sig, info, context);
  } else if (previous_sigint.sa_handler != SIG_DFL && previous_sigint.sa_handler != SIG_IGN) {
    previous_sigint.sa_handler(sig);
  }
}

/// Installs on_sigint in front of the current SIGINT handler when that is a handler function
/// (Python's, normally): SIG_IGN and SIG_DFL are left alone (the process ignores Ctrl-C, or
/// Ctrl-C ends it anyway).
bool install() {
  struct sigaction current {};
  if (::sigaction(SIGINT, nullptr, &current) != 0) return false;
  const bool function = (current.sa_flags & SA_SIGINFO) != 0
                            ? current.sa_sigaction != nullptr
                            : current.sa_handler != SIG_DFL && current.sa_handler != SIG_IGN;
  if (!function) return false;
  previous_sigint = current;
  struct sigaction ours {};
  ours.sa_sigaction = on_sigint;
  ours.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&ours.sa_mask);
  return ::sigaction(SIGINT, &ours, nullptr) == 0;
}

}  // namespace

void note_main_thread() {
  main_thread = ::pthread_self();
  main_thread_known = true;
}

released_call::released_call() {
  if (main_thread_known && ::pthread_equal(::pthread_self(), main_thread) && depth++ == 0) {
    wholememory::clear_interrupt();
    installed_ = install();
  }
}

released_call::~released_call() {
  if (!main_thread_known || !::pthread_equal(::pthread_self(), main_thread)) return;
  if (installed_) ::sigaction(SIGINT, &previous_sigint, nullptr);
  if (--depth == 0) wholememory::clear_interrupt();
}

void translate_interrupt(const std::exception_ptr& p, void* interrupted_type) {
  try {
    std::rethrow_exception(p);
  } catch (const wholememory::interrupted_error& e) {
    // The signal that ended the wait is pending in Python: let Python handle it now
    // (KeyboardInterrupt by default).  A handler that does not raise gets Interrupted.
    if (PyErr_CheckSignals() != 0) return;
    PyErr_SetString(static_cast<PyObject*>(interrupted_type), user_message(e.what()).c_str());
  }
}

}  // namespace wholestore::python
