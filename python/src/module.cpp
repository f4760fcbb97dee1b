// wholestore._core: the extension module.  Exceptions of the library become Python exceptions
// (errors.cpp): WholestoreError is the base of all; logic_error -> LogicError (a ValueError),
// IndexOutOfRangeError (also an IndexError) for an index outside its table, NotFoundError (a
// FileNotFoundError) for a missing file, mismatch_error -> MismatchError (a LogicError), the
// runtime failures -> RuntimeError subclasses, timeout_error -> PeerTimeoutError (also a
// TimeoutError), out_of_memory -> OutOfMemoryError (a MemoryError), the trainer's
// train_diverged -> TrainingDiverged (a RuntimeError); a wait ended by Ctrl-C raises
// KeyboardInterrupt (or Interrupted, a PeerTimeoutError, when Python's SIGINT handler does not
// raise).  Messages leave out the library's source locations unless WHOLESTORE_DEBUG=1.
#include "bindings.hpp"

namespace nb = nanobind;

NB_MODULE(_core, m) {
  m.doc() = "wholestore's C++ library (use the package wholestore, not this module)";
  m.attr("__version__") = WHOLESTORE_VERSION_STRING;

  // The exception classes and their translators (Ctrl-C's included: bindings.hpp,
  // released_call), before the bindings that raise them.
  wholestore::python::bind_errors(m);
  // Signal handlers run on the thread that imported threading's main thread: record it.
  {
    nb::object threading = nb::module_::import_("threading");
    if (nb::cast<unsigned long>(threading.attr("main_thread")().attr("ident")) ==
        nb::cast<unsigned long>(threading.attr("get_ident")()))
      wholestore::python::note_main_thread();
  }

  wholestore::python::bind_memory(m);
  wholestore::python::bind_embedding(m);
  wholestore::python::bind_graph(m);
  wholestore::python::bind_symmetric(m);
  wholestore::python::bind_train(m);
}
