/*
 * The parts of the extension module wholestore._core, one function per layer; module.cpp calls
 * them in order (memory first: the others take its Communicator).
 */
#pragma once

#include <nanobind/nanobind.h>
#include <wholememory/bootstrap.hpp>
#include <wholememory/communicator.hpp>

#include <exception>
#include <memory>

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

/// Remembers the calling thread as Python's main thread (the one that runs signal handlers).
void note_main_thread();
/// Exception translator for wholememory::interrupted_error: runs Python's pending signal
/// handlers (KeyboardInterrupt), else raises `interrupted_type` with the message.
void translate_interrupt(const std::exception_ptr& p, void* interrupted_type);

/// Communicator, WholeMemory (Memory), device helpers, file IO of one allocation.
void bind_memory(nb::module_& m);
/// Embedding tables (Table) and their checkpoints.
void bind_embedding(nb::module_& m);
/// Host graphs, datasets (gen, convert, read, write), graphs in WholeMemory, the samplers.
void bind_graph(nb::module_& m);
/// SymmetricMemory (symmetric.cpp).
void bind_symmetric(nb::module_& m);

}  // namespace wholestore::python
