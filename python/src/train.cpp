// The node-embedding trainer of wholestore._core: train::train_embeddings, the function
// `wholestore train` calls, on the graph the CLI would build (a generated R-MAT graph, a
// dataset directory or an edge-list file) or on a HostGraph or an EdgeSplit, split with
// graph::split_edges as the CLI splits.  The settings arrive as a dict under the CLI's config
// keys (python/wholestore/train.py holds their names, kinds and defaults and checks the kinds);
// names (mode, schedule, optimizer, memory types, device) are parsed here, every other value is
// checked by the library.  The GIL is released while the graph is read and split and while
// training; the callbacks take it back.
#include "arrays.hpp"
#include "bindings.hpp"
#include "graph_types.hpp"

#include <nanobind/stl/string.h>
#include <embedding/table.hpp>
#include <graph/convert.hpp>
#include <graph/dataset.hpp>
#include <graph/edge_split.hpp>
#include <graph/generate.hpp>
#include <train/trainer.hpp>
#include <wholememory/bootstrap.hpp>
#include <wholememory/device.hpp>
#include <wholememory/error.hpp>
#include <wholememory/gather.hpp>
#include <wholememory/interrupt.hpp>
#include <wholememory/memory_type.hpp>

#include <sys/stat.h>

#include <cstdint>
#include <initializer_list>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace wholestore::python {

namespace wm = wholememory;
namespace gr = wholestore::graph;
namespace tr = wholestore::train;

namespace {

/// Setting `key` of the dict train.py passes (it passes every key).
template <typename T>
T setting(const nb::dict& settings, const char* key) {
  if (!settings.contains(key)) {
    throw nb::key_error(("wholestore.train: the settings lack '" + std::string(key) + "'").c_str());
  }
  return nb::cast<T>(settings[key]);
}

/// The value among `values` whose library name (`name_of`) is `name`; logic_error naming the
/// key and the names otherwise, as the CLI words it ("mode must be deepwalk, node2vec or line,
/// got 'x'").
template <typename Enum, typename NameOf>
Enum parse_name(const char* key, const std::string& name, std::initializer_list<Enum> values,
                NameOf name_of) {
  std::string names;
  std::size_t i = 0;
  for (Enum v : values) {
    if (name == name_of(v)) return v;
    names += (i == 0 ? "" : i + 1 == values.size() ? " or " : ", ") + std::string(name_of(v));
    ++i;
  }
  throw wm::logic_error(std::string(key) + " must be " + names + ", got '" + name + "'");
}

/// A library parser (`parse`) of setting `key`: its logic_error with the key in front.
template <typename Parse>
auto parse_with(const char* key, const std::string& value, Parse parse) {
  try {
    return parse(value);
  } catch (const wm::logic_error& e) {
    throw wm::logic_error(std::string(key) + ": " + e.what());
  }
}

const char* negative_distribution_name(bool by_degree) { return by_degree ? "degree" : "uniform"; }

/// The `device` setting: the CPU, the GPU, or the GPU when there is one.
enum class device_choice { cpu, gpu, any };
const char* device_choice_name(device_choice d) {
  return d == device_choice::cpu ? "cpu" : d == device_choice::gpu ? "gpu" : "auto";
}

/// train_settings from the dict, as `wholestore train` reads its config (apps/train.cpp's
/// read_settings): the same fields from the same keys.  With the GIL.
tr::train_settings settings_of(const nb::dict& d) {
  tr::train_settings s;
  s.mode = parse_name("mode", setting<std::string>(d, "mode"),
                      {tr::train_mode::deepwalk, tr::train_mode::node2vec, tr::train_mode::line},
                      tr::train_mode_name);
  s.walk_length = setting<int>(d, "walk_length");
  s.window = setting<int>(d, "window");
  s.walks_per_node = setting<int>(d, "walks_per_node");
  s.p = setting<double>(d, "p");
  s.q = setting<double>(d, "q");
  s.negatives = setting<int>(d, "negatives");
  s.negatives_by_degree =
      parse_name("negative_distribution", setting<std::string>(d, "negative_distribution"),
                 {true, false}, negative_distribution_name);
  s.dim = setting<std::size_t>(d, "dim");
  s.batch_size = setting<std::uint64_t>(d, "batch_size");
  s.epochs = setting<int>(d, "epochs");
  s.lr = static_cast<float>(setting<double>(d, "lr"));
  s.min_lr_fraction = static_cast<float>(setting<double>(d, "min_lr_fraction"));
  s.optimizer.kind =
      parse_with("optimizer", setting<std::string>(d, "optimizer"), embedding::parse_optimizer);
  s.schedule =
      parse_name("schedule", setting<std::string>(d, "schedule"),
                 {tr::train_schedule::global, tr::train_schedule::blocks}, tr::train_schedule_name);
  s.partitions = setting<int>(d, "partitions");
  s.block_steps = setting<int>(d, "block_steps");
  s.block_batch = setting<std::uint64_t>(d, "block_batch");
  s.graph_type =
      parse_with("graph_type", setting<std::string>(d, "graph_type"), wm::parse_memory_type);
  s.graph_location = parse_with("graph_location", setting<std::string>(d, "graph_location"),
                                wm::parse_memory_location);
  s.replicate_graph = setting<bool>(d, "graph_replicate");
  s.table_type =
      parse_with("table_type", setting<std::string>(d, "table_type"), wm::parse_memory_type);
  s.table_location = parse_with("table_location", setting<std::string>(d, "table_location"),
                                wm::parse_memory_location);
  const device_choice device =
      parse_name("device", setting<std::string>(d, "device"),
                 {device_choice::cpu, device_choice::gpu, device_choice::any}, device_choice_name);
  const bool gpu_present = wm::device_count() > 0;
  s.use_gpu = device == device_choice::gpu || (device == device_choice::any && gpu_present);
  if (s.use_gpu && !gpu_present) {
    throw wm::logic_error("device: gpu needs a CUDA build and a visible GPU; use cpu or auto");
  }
  s.seed = setting<std::uint64_t>(d, "seed");
  s.eval_every = setting<int>(d, "eval_every");
  s.hits_k = setting<int>(d, "hits_k");
  s.threads = setting<unsigned>(d, "threads");
  if (s.threads == 0) s.threads = wm::default_host_threads();
  s.checkpoint_every = setting<int>(d, "checkpoint_every");
  s.stop_after_epochs = setting<int>(d, "stop_after_epochs");
  s.checkpoint_dir = setting<std::string>(d, "checkpoint");
  s.resume_dir = setting<std::string>(d, "resume");
  s.keep_embeddings = true;
  return s;
}

/// Where the graph comes from: an EdgeSplit or a HostGraph the caller holds, a dataset
/// directory or edge-list file, or the generated gen_* graph.
struct graph_source {
  const py_edge_split* split = nullptr;
  const py_host_graph* host = nullptr;
  std::string path;
  bool undirected = true;
  gr::generate_options generate;
  std::string description;  ///< as the CLI's "graph:" line names it
};

graph_source source_of(nb::handle source, const nb::dict& d) {
  graph_source g;
  if (nb::isinstance<py_edge_split>(source)) {
    g.split = &nb::cast<const py_edge_split&>(source);
    g.description = "EdgeSplit (" + std::to_string(g.split->split.train.num_nodes) + " nodes)";
  } else if (nb::isinstance<py_host_graph>(source)) {
    g.host = &nb::cast<const py_host_graph&>(source);
    g.description = "HostGraph (" + std::to_string(g.host->g.num_nodes) + " nodes, " +
                    std::to_string(g.host->g.num_edges()) + " edges)";
  } else if (nb::isinstance<nb::str>(source)) {
    g.path = nb::cast<std::string>(source);
    g.undirected = setting<bool>(d, "undirected");
    g.description = g.path;
  } else if (source.is_none()) {
    g.generate.num_nodes = setting<std::uint64_t>(d, "gen_num_nodes");
    g.generate.num_edges = setting<std::uint64_t>(d, "gen_num_edges");
    g.generate.seed = setting<std::uint64_t>(d, "gen_seed");
    g.generate.symmetrize = true;
    g.generate.drop_self_loops = true;
    std::ostringstream os;
    os << "R-MAT (" << g.generate.num_nodes << " nodes, " << g.generate.num_edges << " edges, seed "
       << g.generate.seed << ", symmetrized)";
    g.description = os.str();
  } else {
    throw nb::type_error(("graph must be a HostGraph, an EdgeSplit, a path or None, not " +
                          std::string(nb::type_name(source.type()).c_str()))
                             .c_str());
  }
  return g;
}

bool is_regular_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

/// The whole graph of a path or the generated graph, with the library functions the CLI
/// calls: an edge-list file is converted (reverse edges added when undirected, self loops and
/// duplicates dropped), anything else is read as a dataset directory.
gr::host_csr read_source(const graph_source& source) {
  if (source.path.empty()) return gr::generate_graph(source.generate);
  if (is_regular_file(source.path)) {
    gr::convert_options co;
    co.symmetrize = source.undirected;
    co.drop_self_loops = true;
    co.drop_duplicates = true;
    return gr::convert_edge_list(source.path, co);
  }
  return gr::read_dataset(source.path);
}

/// Every setting but threads as text, and the graph's description: what every rank must agree
/// on before the graph is built (the CLI agrees on its config the same way).  With the GIL.
std::vector<std::pair<std::string, std::string>> shared_values(const nb::dict& d,
                                                               const graph_source& source) {
  std::vector<std::pair<std::string, std::string>> v;
  v.emplace_back("graph", source.description);
  for (auto [key, value] : d) {
    std::string k = nb::cast<std::string>(nb::str(key));
    if (k == "threads") continue;
    v.emplace_back(std::move(k), nb::cast<std::string>(nb::str(value)));
  }
  return v;
}

nb::dict scores_into(nb::dict d, bool evaluated, const tr::link_scores& s) {
  d["auc"] = evaluated ? nb::cast(s.auc) : nb::none();
  d["hits"] = evaluated ? nb::cast(s.hits) : nb::none();
  return d;
}

nb::dict epoch_dict(const tr::epoch_record& e) {
  nb::dict d;
  d["epoch"] = e.epoch;
  d["loss"] = e.loss;
  d["pairs"] = e.pairs;
  d["seconds"] = e.seconds;
  return scores_into(std::move(d), e.evaluated, e.scores);
}

/// A [rows, cols] float32 numpy array that takes over `values` (no copy).
nb::object float_matrix(std::vector<float>&& values, std::size_t rows, std::size_t cols) {
  auto* held = new std::vector<float>(std::move(values));
  nb::capsule owner(held, [](void* p) noexcept { delete static_cast<std::vector<float>*>(p); });
  const std::size_t shape[2] = {rows, cols};
  return nb::cast(nb::ndarray<nb::numpy, float>(held->data(), 2, shape, owner),
                  nb::rv_policy::reference);
}

}  // namespace

void bind_train(nb::module_& m) {
  nb::exception<tr::train_diverged>(m, "TrainingDiverged", PyExc_RuntimeError);

  m.def(
      "train_embeddings",
      [](const py_comm& comm, nb::handle source, const nb::dict& d, nb::object progress,
         nb::object on_epoch) {
        const tr::train_settings s = settings_of(d);
        const double holdout = setting<double>(d, "holdout");
        const graph_source src = source_of(source, d);
        const std::vector<std::pair<std::string, std::string>> agreed = shared_values(d, src);

        tr::train_callbacks cb;
        cb.step = [&](int epoch, std::uint64_t step, std::uint64_t steps, double loss) {
          // Ctrl-C (released_call asked the library's waits to end): a run of one rank has
          // no wait to end, so the steps look too.
          if (wm::interrupt_requested()) {
            throw wm::interrupted_error("wholestore.train: interrupted at epoch " +
                                        std::to_string(epoch) + ", step " + std::to_string(step));
          }
          if (progress.is_none()) return;
          nb::gil_scoped_acquire gil;
          progress(epoch, step, steps, loss);
        };
        cb.epoch = [&](const tr::epoch_record& e) {
          if (on_epoch.is_none()) return;
          nb::gil_scoped_acquire gil;
          on_epoch(epoch_dict(e));
        };

        tr::train_result r;
        std::size_t num_nodes = 0, train_edges = 0, held_out = 0;
        {
          released_call release;
          wm::agree_on_values(*comm.bs, "wholestore.train: the settings of every rank must match",
                              agreed);
          gr::edge_split own;
          const gr::edge_split* split = src.split != nullptr ? &src.split->split : &own;
          if (src.split == nullptr) {
            gr::host_csr read;
            if (src.host == nullptr) read = read_source(src);
            const gr::host_csr& g = src.host != nullptr ? src.host->g : read;
            if (g.num_edges() == 0) {
              throw wm::logic_error(src.description + " has no edges: nothing to train on (" +
                                    std::to_string(g.num_nodes) + " nodes)");
            }
            own = gr::split_edges(g, holdout, s.seed);
          }
          num_nodes = split->train.num_nodes;
          train_edges = split->train.num_edges();
          held_out = split->test_edges.size();
          r = tr::train_embeddings(comm.bs, *split, s, cb);
        }

        nb::dict out;
        out["embeddings"] = r.embeddings.empty()
                                ? nb::none()
                                : float_matrix(std::move(r.embeddings), num_nodes, s.dim);
        nb::list epochs;
        for (const tr::epoch_record& e : r.epochs) epochs.append(epoch_dict(e));
        out["epochs"] = epochs;
        scores_into(out, true, r.final_scores);
        out["first_epoch"] = r.first_epoch;
        out["last_epoch"] = r.last_epoch;
        out["pairs"] = r.pairs;
        out["steps"] = r.steps;
        out["train_s"] = r.train_s;
        out["walk_s"] = r.walk_s;
        out["step_s"] = r.step_s;
        out["gpu_lookup_s"] = r.gpu_lookup_s;
        out["gpu_sgns_s"] = r.gpu_sgns_s;
        out["gpu_input_update_s"] = r.gpu_input_update_s;
        out["gpu_output_update_s"] = r.gpu_output_update_s;
        out["num_nodes"] = num_nodes;
        out["train_edges"] = train_edges;
        out["held_out_edges"] = held_out;
        out["source"] = src.description;
        out["device"] = s.use_gpu ? "gpu" : "cpu";
        out["ranks"] = comm.bs->size();
        return out;
      },
      nb::arg("comm"), nb::arg("source").none(), nb::arg("settings"), nb::arg("progress").none(),
      nb::arg("on_epoch").none(),
      "train::train_embeddings on `source` (see wholestore.train).  Collective.");
}

}  // namespace wholestore::python
