// wholestore._core: the extension module.  Exceptions of the library become Python exceptions
// with the same message: logic_error -> LogicError (a ValueError), mismatch_error ->
// MismatchError (a LogicError), the runtime failures -> RuntimeError subclasses, out_of_memory
// -> OutOfMemoryError (a MemoryError).
#include "bindings.hpp"

#include <wholememory/error.hpp>

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
  nb::exception<wholememory::timeout_error>(m, "PeerTimeoutError", PyExc_RuntimeError);
  nb::exception<wholememory::out_of_memory>(m, "OutOfMemoryError", PyExc_MemoryError);

  wholestore::python::bind_memory(m);
  wholestore::python::bind_embedding(m);
  wholestore::python::bind_graph(m);
  wholestore::python::bind_symmetric(m);
}
