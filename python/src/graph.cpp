// Graphs of wholestore._core: host graphs and datasets (gen, convert, read, write), edge splits
// for link prediction, graphs in WholeMemory (load_graph, make_graph), feature gathers and the
// CPU and GPU samplers.  Graph frees through a call_guard (bindings.hpp): free() waits for the
// calls in flight on other threads, the GPU sampler's included.
#include "arrays.hpp"
#include "bindings.hpp"
#include "graph_types.hpp"

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>
#include <graph/convert.hpp>
#include <graph/csr_graph.hpp>
#include <graph/dataset.hpp>
#include <graph/edge_split.hpp>
#include <graph/generate.hpp>
#include <graph/negatives.hpp>
#include <graph/sampling.hpp>
#include <graph/walks.hpp>
#include <wholememory/device.hpp>
#include <wholememory/gather.hpp>

#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace wholestore::python {

namespace wm = wholememory;
namespace gr = wholestore::graph;

namespace {

struct py_graph {
  gr::csr_graph g;
  call_guard guard{"this graph was freed"};
};

struct py_negatives {
  std::unique_ptr<gr::negative_sampler> sampler;
  nb::object comm;  // keeps the communicator alive while the table lives
};

struct py_gpu_sampler {
  std::unique_ptr<gr::gpu_sampler> sampler;
  nb::object graph;  // keeps the graph alive while the sampler lives (its memory: see sample)
};

/// A numpy view of a host vector owned by `owner`.
template <typename T>
nb::object vector_view(std::vector<T>& v, std::size_t rows, std::size_t cols, bool one_dim,
                       nb::handle owner) {
  const std::size_t shape[2] = {rows, cols};
  return nb::cast(nb::ndarray<nb::numpy, T>(v.data(), one_dim ? 1 : 2, shape, owner),
                  nb::rv_policy::reference);
}

// Host graph inputs: CPU arrays of these dtypes (others are converted by nanobind's implicit
// conversion, e.g. int32 row offsets).
using i64_array = nb::ndarray<const std::int64_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using f32_array = nb::ndarray<const float, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using f32_matrix = nb::ndarray<const float, nb::ndim<2>, nb::c_contig, nb::device::cpu>;

/// Copies a 1-D CPU array.
template <typename Array>
auto copy_1d(const Array& a) {
  using T = std::remove_const_t<std::remove_pointer_t<decltype(a.data())>>;
  return std::vector<T>(a.data(), a.data() + a.shape(0));
}

/// Node pairs as a new [n, 2] int64 numpy array (row i: pairs[i]).
nb::object pair_matrix(const std::vector<std::pair<std::int64_t, std::int64_t>>& pairs) {
  auto* held = new std::vector<std::int64_t>();
  held->reserve(2 * pairs.size());
  for (const auto& [u, v] : pairs) {
    held->push_back(u);
    held->push_back(v);
  }
  nb::capsule owner(held,
                    [](void* p) noexcept { delete static_cast<std::vector<std::int64_t>*>(p); });
  const std::size_t shape[2] = {pairs.size(), 2};
  return nb::cast(nb::ndarray<nb::numpy, std::int64_t>(held->data(), 2, shape, owner),
                  nb::rv_policy::reference);
}

nb::dict array_file_dict(const gr::array_file& f) {
  nb::dict d;
  d["name"] = f.name;
  d["dtype"] = wm::dtype_name(f.type);
  d["count"] = f.count;
  d["bytes"] = f.bytes;
  d["checksum"] = f.checksum;
  return d;
}

nb::dict manifest_dict(const gr::manifest& m) {
  nb::dict d;
  d["format_version"] = m.format_version;
  d["num_nodes"] = m.num_nodes;
  d["num_edges"] = m.num_edges;
  d["directed"] = m.directed;
  d["feature_dim"] = m.feature_dim;
  d["row_offsets"] = array_file_dict(m.row_offsets);
  d["col_indices"] = array_file_dict(m.col_indices);
  d["edge_weights"] = m.edge_weights ? nb::object(array_file_dict(*m.edge_weights)) : nb::none();
  d["node_features"] = m.node_features ? nb::object(array_file_dict(*m.node_features)) : nb::none();
  d["node_ids_file"] = m.node_ids_file;
  d["num_classes"] = m.num_classes;
  d["node_labels"] = m.node_labels ? nb::object(array_file_dict(*m.node_labels)) : nb::none();
  d["node_split"] = m.node_split ? nb::object(array_file_dict(*m.node_split)) : nb::none();
  return d;
}

nb::dict block_dict(gr::block&& b) {
  nb::dict d;
  d["num_dst"] = b.num_dst;
  d["src_nodes"] = to_numpy(std::move(b.src_nodes));
  d["offsets"] = to_numpy(std::move(b.offsets));
  d["src_index"] = to_numpy(std::move(b.src_index));
  d["edge_ids"] = b.edge_ids.empty() ? nb::none() : to_numpy(std::move(b.edge_ids));
  return d;
}

/// Device arrays of a GPU block, owned by the sampler object (valid until its next sample).
nb::dict device_block_dict(const gr::device_block& b, int device, nb::handle owner) {
  auto view = [&](const void* p, std::size_t n, wm::dtype t) {
    return make_view(const_cast<void*>(p), n, 1, t, device, true, owner);
  };
  nb::dict d;
  d["num_dst"] = b.num_dst;
  d["src_nodes"] = view(b.src_nodes, static_cast<std::size_t>(b.num_src), wm::dtype::int64);
  d["offsets"] = view(b.offsets, static_cast<std::size_t>(b.num_dst + 1), wm::dtype::int64);
  d["src_index"] = view(b.src_index, static_cast<std::size_t>(b.num_edges), wm::dtype::int32);
  d["edge_ids"] = b.edge_ids
                      ? view(b.edge_ids, static_cast<std::size_t>(b.num_edges), wm::dtype::int64)
                      : nb::none();
  return d;
}

gr::sample_options sample_options_of(const std::vector<int>& fanouts, const std::string& method,
                                     std::uint64_t random_seed, bool edge_ids) {
  gr::sample_options o;
  o.fanouts = fanouts;
  o.method = gr::parse_sample_method(method);
  o.random_seed = random_seed;
  o.edge_ids = edge_ids;
  return o;
}

/// Seeds as int64: a contiguous 1-D int64 array (other integer dtypes: ValueError).
const std::int64_t* seeds_of(const in_array& seeds, std::size_t* count) {
  const wm::index_array idx = as_indices(seeds, "seeds");
  if (idx.type != wm::dtype::int64) throw nb::value_error("seeds must be int64");
  *count = idx.count;
  return static_cast<const std::int64_t*>(idx.data);
}

gr::load_options placement_of(const std::string& type, const std::string& location,
                              const std::optional<std::string>& features_type,
                              const std::optional<std::string>& features_location,
                              bool load_weights, bool load_features) {
  gr::load_options o;
  o.type = wm::parse_memory_type(type);
  o.location = wm::parse_memory_location(location);
  if (features_type) o.features_type = wm::parse_memory_type(*features_type);
  if (features_location) o.features_location = wm::parse_memory_location(*features_location);
  o.load_weights = load_weights;
  o.load_features = load_features;
  return o;
}

}  // namespace

void bind_graph(nb::module_& m) {
  // ---- host graphs and datasets ----
  nb::class_<py_host_graph>(m, "HostGraph", "A whole CSR graph in host memory.")
      .def(
          "__init__",
          [](py_host_graph* self, const i64_array& row_offsets, const i64_array& col_indices,
             std::optional<f32_array> edge_weights, std::optional<f32_matrix> node_features,
             bool directed) {
            gr::host_csr g;
            if (row_offsets.shape(0) < 1) {
              throw nb::value_error("row_offsets must hold num_nodes + 1 entries (at least 1)");
            }
            g.num_nodes = row_offsets.shape(0) - 1;
            g.row_offsets = copy_1d(row_offsets);
            g.col_indices = copy_1d(col_indices);
            if (edge_weights) g.edge_weights = copy_1d(*edge_weights);
            if (node_features) {
              if (node_features->shape(0) != g.num_nodes) {
                throw nb::value_error(
                    ("node_features has " + std::to_string(node_features->shape(0)) +
                     " rows, expected one per node (" + std::to_string(g.num_nodes) + ")")
                        .c_str());
              }
              g.feature_dim = node_features->shape(1);
              g.node_features.assign(node_features->data(),
                                     node_features->data() + node_features->size());
            }
            g.directed = directed;
            new (self) py_host_graph{std::move(g)};
          },
          nb::arg("row_offsets"), nb::arg("col_indices"), nb::arg("edge_weights") = nb::none(),
          nb::arg("node_features") = nb::none(), nb::arg("directed") = true)
      .def_prop_ro("num_nodes", [](const py_host_graph& h) { return h.g.num_nodes; })
      .def_prop_ro("num_edges", [](const py_host_graph& h) { return h.g.num_edges(); })
      .def_prop_ro("feature_dim", [](const py_host_graph& h) { return h.g.feature_dim; })
      .def_prop_ro("directed", [](const py_host_graph& h) { return h.g.directed; })
      .def_prop_ro("row_offsets",
                   [](py_host_graph& h) {
                     return vector_view(h.g.row_offsets, h.g.row_offsets.size(), 1, true,
                                        nb::find(&h));
                   })
      .def_prop_ro("col_indices",
                   [](py_host_graph& h) {
                     return vector_view(h.g.col_indices, h.g.col_indices.size(), 1, true,
                                        nb::find(&h));
                   })
      .def_prop_ro("edge_weights",
                   [](py_host_graph& h) -> nb::object {
                     if (h.g.edge_weights.empty()) return nb::none();
                     return vector_view(h.g.edge_weights, h.g.edge_weights.size(), 1, true,
                                        nb::find(&h));
                   })
      .def_prop_ro("node_features",
                   [](py_host_graph& h) -> nb::object {
                     if (h.g.node_features.empty()) return nb::none();
                     return vector_view(h.g.node_features, h.g.num_nodes, h.g.feature_dim, false,
                                        nb::find(&h));
                   })
      .def_prop_ro("node_ids", [](const py_host_graph& h) { return h.g.node_ids; })
      .def_prop_ro("num_classes", [](const py_host_graph& h) { return h.g.num_classes; })
      .def_prop_ro("node_labels",
                   [](py_host_graph& h) -> nb::object {
                     if (h.g.node_labels.empty()) return nb::none();
                     return vector_view(h.g.node_labels, h.g.num_nodes, 1, true, nb::find(&h));
                   })
      .def_prop_ro("node_split", [](py_host_graph& h) -> nb::object {
        if (h.g.node_split.empty()) return nb::none();
        return vector_view(h.g.node_split, h.g.num_nodes, 1, true, nb::find(&h));
      });

  m.def(
      "generate_graph",
      [](std::uint64_t num_nodes, std::uint64_t num_edges, bool rmat, double a, double b, double c,
         double d, bool scramble_ids, std::uint64_t seed, bool with_weights,
         std::uint64_t feature_dim, bool symmetrize, bool drop_self_loops, int threads) {
        gr::generate_options o;
        o.num_nodes = num_nodes;
        o.num_edges = num_edges;
        o.rmat = rmat;
        o.a = a;
        o.b = b;
        o.c = c;
        o.d = d;
        o.scramble_ids = scramble_ids;
        o.seed = seed;
        o.with_weights = with_weights;
        o.feature_dim = feature_dim;
        o.symmetrize = symmetrize;
        o.drop_self_loops = drop_self_loops;
        o.threads = threads;
        released_call release;
        return py_host_graph{gr::generate_graph(o)};
      },
      nb::arg("num_nodes"), nb::arg("num_edges"), nb::arg("rmat"), nb::arg("a"), nb::arg("b"),
      nb::arg("c"), nb::arg("d"), nb::arg("scramble_ids"), nb::arg("seed"), nb::arg("with_weights"),
      nb::arg("feature_dim"), nb::arg("symmetrize"), nb::arg("drop_self_loops"),
      nb::arg("threads"));
  m.def(
      "generate_sbm",
      [](std::uint64_t num_nodes, std::uint32_t classes, double avg_degree, double homophily,
         std::uint64_t feature_dim, double snr, double train_fraction, double val_fraction,
         std::uint64_t seed, bool symmetrize, bool drop_self_loops, int threads) {
        gr::sbm_options o;
        o.num_nodes = num_nodes;
        o.classes = classes;
        o.avg_degree = avg_degree;
        o.homophily = homophily;
        o.feature_dim = feature_dim;
        o.snr = snr;
        o.train_fraction = train_fraction;
        o.val_fraction = val_fraction;
        o.seed = seed;
        o.symmetrize = symmetrize;
        o.drop_self_loops = drop_self_loops;
        o.threads = threads;
        released_call release;
        return py_host_graph{gr::generate_sbm(o)};
      },
      nb::arg("num_nodes"), nb::arg("classes"), nb::arg("avg_degree"), nb::arg("homophily"),
      nb::arg("feature_dim"), nb::arg("snr"), nb::arg("train_fraction"), nb::arg("val_fraction"),
      nb::arg("seed"), nb::arg("symmetrize"), nb::arg("drop_self_loops"), nb::arg("threads"));
  m.def(
      "convert_edge_list",
      [](const std::string& path, bool symmetrize, bool drop_self_loops, bool drop_duplicates,
         bool has_weights, bool numeric_ids_as_is) {
        gr::convert_options o;
        o.symmetrize = symmetrize;
        o.drop_self_loops = drop_self_loops;
        o.drop_duplicates = drop_duplicates;
        o.has_weights = has_weights;
        o.numeric_ids_as_is = numeric_ids_as_is;
        released_call release;
        return py_host_graph{gr::convert_edge_list(path, o)};
      },
      nb::arg("path"), nb::arg("symmetrize"), nb::arg("drop_self_loops"),
      nb::arg("drop_duplicates"), nb::arg("has_weights"), nb::arg("numeric_ids_as_is"));
  m.def(
      "write_dataset",
      [](const std::string& dir, const py_host_graph& h, const std::string& features_dtype,
         bool overwrite) {
        const wm::dtype t = dtype_from_name(features_dtype);
        gr::manifest man;
        {
          released_call release;
          man = gr::write_dataset(dir, h.g, t, overwrite);
        }
        return manifest_dict(man);
      },
      nb::arg("dir"), nb::arg("graph"), nb::arg("features_dtype"), nb::arg("overwrite"));
  m.def(
      "read_manifest", [](const std::string& dir) { return manifest_dict(gr::read_manifest(dir)); },
      nb::arg("dir"));
  m.def(
      "read_dataset",
      [](const std::string& dir) {
        released_call release;
        return py_host_graph{gr::read_dataset(dir)};
      },
      nb::arg("dir"));

  // ---- edge splits (link prediction: wholestore.train's input) ----
  nb::class_<py_edge_split>(m, "EdgeSplit",
                            "A training graph and its held-out edges and non-edges "
                            "(see wholestore.split_edges).")
      .def_prop_ro("num_nodes", [](const py_edge_split& s) { return s.split.train.num_nodes; })
      .def_prop_ro("train_graph",
                   [](const py_edge_split& s) { return py_host_graph{s.split.train}; })
      .def_prop_ro("test_edges",
                   [](const py_edge_split& s) { return pair_matrix(s.split.test_edges); })
      .def_prop_ro("test_non_edges",
                   [](const py_edge_split& s) { return pair_matrix(s.split.test_non_edges); });
  m.def(
      "split_edges",
      [](const py_host_graph& h, double test_fraction, std::uint64_t seed) {
        released_call release;
        return py_edge_split{gr::split_edges(h.g, test_fraction, seed)};
      },
      nb::arg("graph"), nb::arg("test_fraction"), nb::arg("seed"));

  // ---- graphs in WholeMemory ----
  nb::class_<py_graph>(m, "Graph", "A CSR graph in WholeMemory (see wholestore.load_graph).")
      .def_prop_ro("num_nodes", [](const py_graph& g) { return g.g.num_nodes; })
      .def_prop_ro("num_edges", [](const py_graph& g) { return g.g.num_edges; })
      .def_prop_ro("feature_dim", [](const py_graph& g) { return g.g.feature_dim; })
      .def_prop_ro("directed", [](const py_graph& g) { return g.g.directed; })
      .def_prop_ro("has_weights",
                   [](const py_graph& g) { return g.guard.open() && g.g.has_weights(); })
      .def_prop_ro("has_features",
                   [](const py_graph& g) { return g.guard.open() && g.g.has_features(); })
      .def_prop_ro("col_dtype", [](const py_graph& g) { return wm::dtype_name(g.g.col_type); })
      .def_prop_ro("feature_dtype",
                   [](const py_graph& g) { return wm::dtype_name(g.g.feature_type); })
      .def_prop_ro("type",
                   [](const py_graph& g) {
                     g.guard.check();
                     return wm::memory_type_name(g.g.type());
                   })
      .def_prop_ro("location",
                   [](const py_graph& g) {
                     g.guard.check();
                     return wm::memory_location_name(g.g.location());
                   })
      .def(
          "gather_features",
          [](const py_graph& g, const in_array& nodes, const out_array& out,
             std::uintptr_t stream) {
            const call_guard::pass call = g.guard.enter();
            if (!g.g.has_features()) throw nb::value_error("this graph has no node features");
            const wm::wm_tensor table = g.g.features_tensor();
            const wm::index_array idx = as_indices(nodes, "nodes");
            const wm::dense_matrix dst = as_matrix(out, idx.count, table.cols, false, "out");
            const bool cpu = g.g.node_features.location() == wm::memory_location::host &&
                             cpu_reachable(nodes.device_type()) && cpu_reachable(out.device_type());
            if (!cpu) {
              require_gpu_reachable({{"nodes", nodes.device_type()}, {"out", out.device_type()}},
                                    "gather_features on device memory or with CUDA arrays");
            }
            released_call release;
            if (cpu) {
              wm::gather_host(table, idx, dst);
            } else {
              wm::gather(table, idx, dst, to_stream(stream));
            }
          },
          nb::arg("nodes"), nb::arg("out"), nb::arg("stream"))
      .def(
          "sample_host",
          [](const py_graph& g, const in_array& seeds, const std::vector<int>& fanouts,
             const std::string& method, std::uint64_t random_seed, bool edge_ids,
             unsigned threads) {
            const call_guard::pass call = g.guard.enter();
            if (!cpu_reachable(seeds.device_type())) {
              throw nb::value_error("the CPU sampler needs seeds in CPU memory (got a GPU array)");
            }
            std::size_t count = 0;
            const std::int64_t* s = seeds_of(seeds, &count);
            const gr::sample_options o = sample_options_of(fanouts, method, random_seed, edge_ids);
            gr::sample_result r;
            {
              released_call release;
              r = gr::sample_host(g.g, s, count, o, threads ? threads : wm::default_host_threads());
            }
            nb::list blocks;
            for (gr::block& b : r.blocks) blocks.append(block_dict(std::move(b)));
            return blocks;
          },
          nb::arg("seeds"), nb::arg("fanouts"), nb::arg("method"), nb::arg("random_seed"),
          nb::arg("edge_ids"), nb::arg("threads"))
      .def(
          "random_walks",
          [](const py_graph& g, const in_array& starts, const out_array& out, int length, double p,
             double q, std::uint64_t seed, std::uint64_t first_walk, std::uintptr_t stream,
             unsigned threads) {
            const call_guard::pass call = g.guard.enter();
            std::size_t count = 0;
            const std::int64_t* s = seeds_of(starts, &count);
            if (length < 0) throw nb::value_error("length must be >= 0");
            const std::size_t width = static_cast<std::size_t>(length) + 1;
            const wm::dense_matrix dst = as_matrix(out, count, width, false, "out");
            if (dst.type != wm::dtype::int64 || dst.row_stride != width) {
              throw nb::value_error(
                  "out must be a contiguous int64 array of [len(starts), "
                  "length + 1]");
            }
            gr::walk_options o;
            o.length = length;
            o.p = p;
            o.q = q;
            o.seed = seed;
            o.first_walk = first_walk;
            auto* w = static_cast<std::int64_t*>(dst.data);
            const bool cpu = g.g.row_offsets.location() == wm::memory_location::host &&
                             cpu_reachable(starts.device_type()) &&
                             cpu_reachable(out.device_type());
            if (!cpu) {
              require_gpu_reachable({{"starts", starts.device_type()}, {"out", out.device_type()}},
                                    "random_walks on a device graph or with CUDA arrays");
            }
            released_call release;
            if (cpu) {
              gr::random_walks_host(g.g, s, count, o, w, threads);
            } else {
              gr::gpu_walker walker(g.g);
              walker.walk(s, count, o, w, to_stream(stream));
            }
          },
          nb::arg("starts"), nb::arg("out"), nb::arg("length"), nb::arg("p"), nb::arg("q"),
          nb::arg("seed"), nb::arg("first_walk"), nb::arg("stream"), nb::arg("threads"))
      .def(
          "free",
          [](py_graph& g) {
            g.guard.close([&g] {
              g.g.node_features.free();
              g.g.edge_weights.free();
              g.g.col_indices.free();
              g.g.row_offsets.free();
            });
          },
          "Waits for the calls in flight on other threads, then frees.  Collective.");

  m.def(
      "load_graph",
      [](py_comm& comm, const std::string& dir, const std::string& type,
         const std::string& location, std::optional<std::string> features_type,
         std::optional<std::string> features_location, bool load_weights, bool load_features,
         bool verify_checksums, unsigned threads) {
        gr::load_options o = placement_of(type, location, features_type, features_location,
                                          load_weights, load_features);
        o.verify_checksums = verify_checksums;
        o.threads = threads;
        released_call release;
        return py_graph{gr::load_graph(comm.comm, dir, o)};
      },
      nb::arg("comm"), nb::arg("dir"), nb::arg("type"), nb::arg("location"),
      nb::arg("features_type"), nb::arg("features_location"), nb::arg("load_weights"),
      nb::arg("load_features"), nb::arg("verify_checksums"), nb::arg("threads"));
  m.def(
      "make_graph",
      [](py_comm& comm, const py_host_graph& h, const std::string& type,
         const std::string& location, std::optional<std::string> features_type,
         std::optional<std::string> features_location, bool load_weights, bool load_features,
         const std::string& feature_dtype) {
        const gr::load_options o = placement_of(type, location, features_type, features_location,
                                                load_weights, load_features);
        const wm::dtype ft = dtype_from_name(feature_dtype);
        released_call release;
        return py_graph{gr::make_graph(comm.comm, h.g, o, ft)};
      },
      nb::arg("comm"), nb::arg("graph"), nb::arg("type"), nb::arg("location"),
      nb::arg("features_type"), nb::arg("features_location"), nb::arg("load_weights"),
      nb::arg("load_features"), nb::arg("feature_dtype"));

  // ---- the GPU sampler ----
  nb::class_<py_negatives>(m, "NegativeSampler",
                           "Negative draws from degree^power (or uniform) over a graph's nodes.")
      .def(
          "__init__",
          [](py_negatives* self, nb::object comm_obj, const py_graph& g, bool by_degree,
             double power, const std::string& type, const std::string& location) {
            const call_guard::pass call = g.guard.enter();
            py_comm& comm = nb::cast<py_comm&>(comm_obj);
            gr::negative_options o;
            o.by_degree = by_degree;
            o.power = power;
            o.type = wm::parse_memory_type(type);
            o.location = wm::parse_memory_location(location);
            new (self) py_negatives();
            self->comm = comm_obj;
            released_call release;
            self->sampler = std::make_unique<gr::negative_sampler>(comm.comm, g.g, o);
          },
          nb::arg("comm"), nb::arg("graph"), nb::arg("by_degree"), nb::arg("power"),
          nb::arg("type"), nb::arg("location"))
      .def_prop_ro("num_nodes", [](const py_negatives& n) { return n.sampler->num_nodes(); })
      .def(
          "probability",
          [](const py_negatives& n, std::int64_t node) { return n.sampler->probability(node); },
          nb::arg("node"))
      .def(
          "sample",
          [](const py_negatives& n, std::uint64_t seed, std::uint64_t first_draw,
             const out_array& out, std::uintptr_t stream, unsigned threads) {
            const wm::dense_matrix dst = as_matrix(out, SIZE_MAX, 1, true, "out");
            if (dst.type != wm::dtype::int64 || (dst.rows > 1 && dst.row_stride != 1)) {
              throw nb::value_error("out must be a contiguous 1-D int64 array");
            }
            auto* o = static_cast<std::int64_t*>(dst.data);
            const bool cpu = n.sampler->table().location() == wm::memory_location::host &&
                             cpu_reachable(out.device_type());
            if (!cpu) {
              require_gpu_reachable({{"out", out.device_type()}},
                                    "NegativeSampler.sample with a device table or CUDA arrays");
            }
            released_call release;
            if (cpu) {
              n.sampler->sample_host(seed, first_draw, dst.rows, o, threads);
            } else {
              n.sampler->sample(seed, first_draw, dst.rows, o, to_stream(stream));
            }
          },
          nb::arg("seed"), nb::arg("first_draw"), nb::arg("out"), nb::arg("stream"),
          nb::arg("threads"));

  nb::class_<py_gpu_sampler>(m, "GpuSampler", "The GPU sampler over one graph.")
      .def(
          "__init__",
          [](py_gpu_sampler* self, nb::object graph) {
            py_graph& g = nb::cast<py_graph&>(graph);
            g.guard.check();
            auto sampler = std::make_unique<gr::gpu_sampler>(g.g);
            new (self) py_gpu_sampler{std::move(sampler), graph};
          },
          nb::arg("graph"))
      .def(
          "sample",
          [](py_gpu_sampler& s, const in_array& seeds, const std::vector<int>& fanouts,
             const std::string& method, std::uint64_t random_seed, bool edge_ids,
             std::uintptr_t stream) {
            // The sampler reads the graph's memory: a free() of the graph waits for this call.
            const call_guard::pass call = nb::cast<const py_graph&>(s.graph).guard.enter(
                "the graph of this sampler was freed");
            if (!gpu_reachable(seeds.device_type())) {
              throw nb::value_error(
                  "the GPU sampler needs seeds in GPU-readable memory (a CUDA tensor)");
            }
            std::size_t count = 0;
            const std::int64_t* p = seeds_of(seeds, &count);
            const gr::sample_options o = sample_options_of(fanouts, method, random_seed, edge_ids);
            std::vector<gr::device_block> blocks;
            {
              released_call release;
              blocks = s.sampler->sample(p, count, o, to_stream(stream));
            }
            const int device = wm::current_device();
            nb::list out;
            for (const gr::device_block& b : blocks) {
              out.append(device_block_dict(b, device, nb::find(&s)));
            }
            return out;
          },
          nb::arg("seeds"), nb::arg("fanouts"), nb::arg("method"), nb::arg("random_seed"),
          nb::arg("edge_ids"), nb::arg("stream"));
}

}  // namespace wholestore::python
