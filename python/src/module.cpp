// wholestore._core: the extension module.  Exceptions of the library become Python exceptions
// with the same message: logic_error -> LogicError (a ValueError), mismatch_error ->
// MismatchError (a LogicError), the runtime failures -> RuntimeError subclasses, out_of_memory
// -> OutOfMemoryError (a MemoryError), the trainer's train_diverged -> TrainingDiverged (a
// RuntimeError); a wait ended by Ctrl-C raises KeyboardInterrupt (or Interrupted, a
// PeerTimeoutError, when Python's SIGINT handler does not raise).
#include "bindings.hpp"

#include <wholememory/error.hpp>
#include <wholememory/interrupt.hpp>

namespace nb = nanobind;

NB_MODULE(_core, m) {
  m.doc() = "wholestore's C++ library (use the package wholestore, not this module)";
  m.attr("__version__") = WHOLESTORE_VERSION_STRING;

  // Translators registered later are tried first: derived classes after their bases.
  nb::exception<wholememory::logic_error> logic(m, "LogicError", PyExc_ValueError);
  nb::exception<wholememory::mismatch_error>(m, "MismatchError", logic);
  nb::exception<wholememory::cuda_error>(m, "CudaError", PyExc_RuntimeError);
  nb::exception<wholememory::nccl_error>(m, "NcclError", PyExc_RuntimeError);
  nb::exception<wholememory::system_error>(m, "SystemCallError", PyExc_RuntimeError);
  nb::exception<wholememory::timeout_error> peer_timeout(m, "PeerTimeoutError", PyExc_RuntimeError);
  nb::exception<wholememory::interrupted_error> interrupted(m, "Interrupted", peer_timeout);
  nb::exception<wholememory::out_of_memory>(m, "OutOfMemoryError", PyExc_MemoryError);

  // Ctrl-C during a call (bindings.hpp, released_call): tried before the translators above.
  nb::register_exception_translator(wholestore::python::translate_interrupt, interrupted.ptr());
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
