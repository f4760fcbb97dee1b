/*
 * The parts of the extension module wholestore._core, one function per layer; module.cpp calls
 * them in order (memory first: the others take its Communicator).
 */
#pragma once

#include <nanobind/nanobind.h>
#include <wholememory/bootstrap.hpp>
#include <wholememory/communicator.hpp>

#include <memory>

namespace wholestore::python {

namespace nb = nanobind;

/// Python's Communicator: a communicator and the bootstrap it was made from (kept for the
/// small out-of-band exchanges and for making an NCCL communicator over the same ranks).
struct py_comm {
  std::shared_ptr<wholememory::bootstrap> bs;
  std::shared_ptr<wholememory::communicator> comm;
};

/// Communicator, WholeMemory (Memory), device helpers, file IO of one allocation.
void bind_memory(nb::module_& m);
/// Embedding tables (Table) and their checkpoints.
void bind_embedding(nb::module_& m);
/// Host graphs, datasets (gen, convert, read, write), graphs in WholeMemory, the samplers.
void bind_graph(nb::module_& m);
/// SymmetricMemory (symmetric.cpp).
void bind_symmetric(nb::module_& m);

}  // namespace wholestore::python
