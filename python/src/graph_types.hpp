/*
 * The host-side graph objects of wholestore._core that more than one part of the module takes:
 * graph.cpp binds them (HostGraph, EdgeSplit) and train.cpp trains on them.
 */
#pragma once

#include <graph/dataset.hpp>
#include <graph/edge_split.hpp>

namespace wholestore::python {

/// Python's HostGraph: a whole CSR graph in host memory.
struct py_host_graph {
  graph::host_csr g;
};

/// Python's EdgeSplit: a training graph and its held-out edges and non-edges (split_edges).
struct py_edge_split {
  graph::edge_split split;
};

}  // namespace wholestore::python
