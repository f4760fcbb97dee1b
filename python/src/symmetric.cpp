// Symmetric memory of wholestore._core: the heap behind wholestore.distributed (nvmath-python's
// allocate_symmetric_memory / free_symmetric_memory).  Views are bytes; the Python side gives
// them the caller's dtype and shape in the caller's framework.
#include "arrays.hpp"
#include "bindings.hpp"

#include <nanobind/stl/string.h>
#include <wholememory/device.hpp>
#include <wholememory/error.hpp>
#include <wholememory/symmetric.hpp>

#include <string>

namespace nb = nanobind;
namespace wm = wholememory;

namespace wholestore::python {
namespace {

/// One symmetric allocation.  Every block view is reported on this process's device (or the
/// host): a peer's block is mapped for this device's kernels, not for the peer GPU's context.
struct py_symmetric {
  wm::symmetric_memory heap;
  int device = -1;
  call_guard guard{"this symmetric memory was freed"};
};

}  // namespace

void bind_symmetric(nb::module_& m) {
  nb::class_<py_symmetric>(m, "SymmetricMemory",
                           "One block per rank, each addressable from every rank (collective).")
      .def(
          "__init__",
          [](py_symmetric* self, const py_comm& c, std::size_t bytes, const std::string& location,
             bool make_symmetric) {
            const wm::memory_location loc = wm::parse_memory_location(location);
            new (self) py_symmetric();
            {
              released_call release;
              self->heap = wm::symmetric_memory::allocate(c.comm, bytes, loc, make_symmetric);
            }
            self->device = loc == wm::memory_location::host ? -1 : wm::current_device();
          },
          nb::arg("comm"), nb::arg("bytes"), nb::arg("location"), nb::arg("make_symmetric"))
      .def_prop_ro("alive", [](const py_symmetric& s) { return s.guard.open(); })
      .def_prop_ro("block_bytes",
                   [](const py_symmetric& s) {
                     s.guard.check();
                     return s.heap.block_bytes();
                   })
      .def_prop_ro("ranks",
                   [](const py_symmetric& s) {
                     s.guard.check();
                     return s.heap.ranks();
                   })
      .def(
          "requested_bytes",
          [](const py_symmetric& s, int rank) {
            s.guard.check();
            return s.heap.requested_bytes(rank);
          },
          nb::arg("rank"))
      .def(
          "view",
          [](py_symmetric& s, int rank, std::size_t bytes) {
            s.guard.check();
            if (rank < 0 || rank >= s.heap.ranks()) {
              throw nb::index_error(("rank " + std::to_string(rank) + " is not in [0, " +
                                     std::to_string(s.heap.ranks()) + ")")
                                        .c_str());
            }
            if (bytes > s.heap.block_bytes()) {
              throw nb::value_error(("a view of " + std::to_string(bytes) +
                                     " bytes is larger than the block (" +
                                     std::to_string(s.heap.block_bytes()) + " bytes)")
                                        .c_str());
            }
            return make_view(s.heap.block(rank), bytes, 1, wm::dtype::uint8, s.device, true,
                             nb::find(&s));
          },
          nb::arg("rank"), nb::arg("bytes"),
          "The first `bytes` of rank `rank`'s block as a 1-D uint8 array (zero-copy).")
      .def(
          "free",
          [](py_symmetric& s) {
            s.guard.check();
            s.guard.close([&s] { s.heap.free(); });
          },
          "Frees every block (after the calls in flight on other threads).  Collective.");
}

}  // namespace wholestore::python
