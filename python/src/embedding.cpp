// Embedding tables of wholestore._core: create, lookup, raw row writes, apply_gradients with
// every optimizer, state reads, checkpoints; the device cache in front of a table.  Both free
// through a call_guard (bindings.hpp): free() waits for the calls in flight on other threads.
#include "arrays.hpp"
#include "bindings.hpp"

#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>
#include <embedding/cache.hpp>
#include <embedding/checkpoint.hpp>
#include <embedding/table.hpp>
#include <wholememory/device.hpp>
#include <wholememory/gather.hpp>

#include <cfloat>
#include <cstdint>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace wholestore::python {

namespace wm = wholememory;
namespace emb = wholestore::embedding;

namespace {

struct py_table {
  emb::table t;
  call_guard guard{"this embedding table was freed"};
  bool host() const { return t.options().location == wm::memory_location::host; }
};

/// The CPU path when the table is host-located and every array is in CPU memory.
bool use_cpu(const py_table& t, std::initializer_list<int> device_types) {
  if (!t.host()) return false;
  for (int d : device_types) {
    if (!cpu_reachable(d)) return false;
  }
  return true;
}

std::size_t state_index(const py_table& t, const std::string& name) {
  const std::vector<std::string>& names = t.t.state_names();
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) return i;
  }
  std::string known;
  for (const std::string& n : names) known += (known.empty() ? "" : ", ") + n;
  throw nb::value_error(("the " + std::string(emb::optimizer_name(t.t.options().optimizer.kind)) +
                         " table has no state '" + name +
                         "' (it has: " + (known.empty() ? std::string("none") : known) + ")")
                            .c_str());
}

/// A device_cache and the Python table it reads (kept alive: the cache holds a reference to
/// the C++ table inside it).  A call through the cache holds both (the table's free() waits
/// for it too).
struct py_cache {
  static constexpr const char* table_freed = "the table of this device cache was freed";
  nb::object table_object;
  py_table* table = nullptr;
  emb::device_cache cache;
  call_guard guard{"this device cache was freed"};

  struct passes {
    call_guard::pass cache, table;
  };
  void check() const {
    guard.check();
    table->guard.check(table_freed);
  }
  passes enter() const {
    call_guard::pass mine = guard.enter();
    return passes{std::move(mine), table->guard.enter(table_freed)};
  }
};

/// The learning rate of an apply_gradients call as the library's float: ValueError naming lr and
/// the range for zero, negative, NaN or infinite rates and for those beyond float (as the CLI's
/// train refuses them).
float learning_rate(double lr) {
  if (!(lr > 0 && lr <= FLT_MAX)) {
    std::ostringstream os;
    os << "lr must be a positive finite number (0 < lr <= " << FLT_MAX << "), got " << lr;
    throw nb::value_error(os.str().c_str());
  }
  return static_cast<float>(lr);
}

/// Where gradients stop being finite: row, column and "nan", "inf" or "-inf".
struct non_finite {
  std::size_t row = 0, col = 0;
  const char* what = "nan";
};

/// first_non_finite over elements of type Bits (uint32 for float32, uint16 for float16 and
/// bfloat16) whose exponent field is `exponent`: all ones is NaN (mantissa not zero) or
/// infinity.  Integer masks only, so that the row loop vectorizes and the scan runs at memory
/// speed: 65536 x 64 float32 gradients (16.8 MB) take about 2.5 ms on the 2-core VM, beside
/// 18 ms for the update itself.
template <typename Bits>
std::optional<non_finite> scan_bits(const wm::dense_matrix& m, Bits exponent) {
  const Bits sign = static_cast<Bits>(Bits{1} << (8 * sizeof(Bits) - 1));
  const Bits mantissa = static_cast<Bits>(~(sign | exponent));
  const Bits* data = static_cast<const Bits*>(m.data);
  for (std::size_t r = 0; r < m.rows; ++r) {
    const Bits* row = data + r * m.row_stride;
    unsigned any = 0;  // no early exit in the common case
    for (std::size_t c = 0; c < m.cols; ++c) any |= (row[c] & exponent) == exponent;
    if (any == 0) continue;
    for (std::size_t c = 0; c < m.cols; ++c) {
      const Bits b = row[c];
      if ((b & exponent) != exponent) continue;
      return non_finite{r, c, (b & mantissa) != 0 ? "nan" : (b & sign) != 0 ? "-inf" : "inf"};
    }
  }
  return std::nullopt;
}

/// The first NaN or infinite element of a float32, float16 or bfloat16 matrix, row by row
/// (a row's padding up to its stride is not read); none for other dtypes (the library refuses
/// them as gradients).
std::optional<non_finite> first_non_finite(const wm::dense_matrix& m) {
  switch (m.type) {
    case wm::dtype::float32:
      return scan_bits<std::uint32_t>(m, 0x7F800000u);
    case wm::dtype::float16:
      return scan_bits<std::uint16_t>(m, 0x7C00u);
    case wm::dtype::bfloat16:
      return scan_bits<std::uint16_t>(m, 0x7F80u);
    default:
      return std::nullopt;  // the library refuses other gradient dtypes
  }
}

/// Refuses gradients with a NaN or infinite element before apply_gradients_host, which would
/// write them into the weights and the optimizer state for good.  Every rank learns of a bad
/// element on any rank (one allgather of a flag over the host communicator) and throws, so no
/// rank waits in the update for one that threw; nothing changes on any rank.  A table of
/// several ranks over another backend is left to the library, which refuses the host path for
/// it on every rank.  Reads the host buffer once (scan_bits); collective.
void refuse_non_finite(const emb::table& t, const wm::dense_matrix& grads) {
  const std::optional<non_finite> bad = first_non_finite(grads);
  wm::communicator& comm = t.comm();
  if (comm.size() > 1 && comm.get_backend() != wm::backend::host) return;
  std::vector<std::int64_t> bad_rows(static_cast<std::size_t>(comm.size()), -1);
  const std::int64_t mine = bad ? static_cast<std::int64_t>(bad->row) : -1;
  if (comm.size() > 1) {
    comm.allgather(&mine, bad_rows.data(), 1, wm::dtype::int64, nullptr);
  } else {
    bad_rows[0] = mine;
  }
  if (bad) {
    throw nb::value_error(("apply_gradients: grads holds " + std::string(bad->what) + " at row " +
                           std::to_string(bad->row) + ", column " + std::to_string(bad->col) +
                           "; gradients must be finite (nothing was changed)")
                              .c_str());
  }
  for (std::size_t r = 0; r < bad_rows.size(); ++r) {
    if (bad_rows[r] >= 0) {
      throw nb::value_error(("apply_gradients: the grads of rank " + std::to_string(r) +
                             " hold a non-finite value at row " + std::to_string(bad_rows[r]) +
                             "; gradients must be finite (nothing was changed on any rank)")
                                .c_str());
    }
  }
}

/// A host int32/int64 index array as a vector of int64 (the cache's row lists).
std::vector<std::int64_t> host_rows(const in_array& a, const char* what) {
  if (!cpu_reachable(a.device_type()))
    throw nb::value_error((std::string(what) + ": pass a CPU array (numpy)").c_str());
  const wm::index_array idx = as_indices(a, what);
  std::vector<std::int64_t> out(idx.count);
  for (std::size_t i = 0; i < idx.count; ++i) {
    out[i] = idx.type == wm::dtype::int32 ? static_cast<const std::int32_t*>(idx.data)[i]
                                          : static_cast<const std::int64_t*>(idx.data)[i];
  }
  return out;
}

}  // namespace

void bind_embedding(nb::module_& m) {
  nb::class_<py_table>(m, "Table", "A trainable embedding table (see wholestore.EmbeddingTable).")
      .def(
          "__init__",
          [](py_table* self, py_comm& comm, std::size_t rows, std::size_t dim,
             const std::string& dtype, const std::string& type, const std::string& location,
             const std::string& init, double init_a, double init_b, double init_mean,
             double init_std, std::uint64_t seed, const std::string& optimizer, float weight_decay,
             float beta1, float beta2, float eps, float alpha, float initial_accumulator) {
            emb::table_options o;
            o.rows = rows;
            o.dim = dim;
            o.dtype = dtype_from_name(dtype);
            o.type = wm::parse_memory_type(type);
            o.location = wm::parse_memory_location(location);
            o.init.method = emb::parse_init_kind(init);
            o.init.a = init_a;
            o.init.b = init_b;
            o.init.mean = init_mean;
            o.init.std = init_std;
            o.init.seed = seed;
            o.optimizer.kind = emb::parse_optimizer(optimizer);
            o.optimizer.weight_decay = weight_decay;
            o.optimizer.beta1 = beta1;
            o.optimizer.beta2 = beta2;
            o.optimizer.eps = eps;
            o.optimizer.alpha = alpha;
            o.optimizer.initial_accumulator = initial_accumulator;
            emb::table t;
            {
              released_call release;
              t = emb::table::create(comm.comm, o);
            }
            py_table* p = new (self) py_table();
            p->t = std::move(t);
          },
          nb::arg("comm"), nb::arg("rows"), nb::arg("dim"), nb::arg("dtype"), nb::arg("type"),
          nb::arg("location"), nb::arg("init"), nb::arg("init_a"), nb::arg("init_b"),
          nb::arg("init_mean"), nb::arg("init_std"), nb::arg("seed"), nb::arg("optimizer"),
          nb::arg("weight_decay"), nb::arg("beta1"), nb::arg("beta2"), nb::arg("eps"),
          nb::arg("alpha"), nb::arg("initial_accumulator"))
      .def_prop_ro("rows",
                   [](const py_table& t) {
                     t.guard.check();
                     return t.t.rows();
                   })
      .def_prop_ro("dim",
                   [](const py_table& t) {
                     t.guard.check();
                     return t.t.dim();
                   })
      .def_prop_ro("dtype",
                   [](const py_table& t) {
                     t.guard.check();
                     return wm::dtype_name(t.t.dtype());
                   })
      .def_prop_ro("type",
                   [](const py_table& t) {
                     t.guard.check();
                     return wm::memory_type_name(t.t.options().type);
                   })
      .def_prop_ro("location",
                   [](const py_table& t) {
                     t.guard.check();
                     return wm::memory_location_name(t.t.options().location);
                   })
      .def_prop_ro("optimizer",
                   [](const py_table& t) {
                     t.guard.check();
                     return emb::optimizer_name(t.t.options().optimizer.kind);
                   })
      .def_prop_ro("state_names",
                   [](const py_table& t) {
                     t.guard.check();
                     return t.t.state_names();
                   })
      .def_prop_ro("own_rows",
                   [](const py_table& t) {
                     t.guard.check();
                     const emb::row_range r = t.t.own_rows();
                     return std::make_pair(r.begin, r.end);
                   })
      .def_prop_ro("rank_rows",
                   [](const py_table& t) {
                     t.guard.check();
                     std::vector<std::pair<std::size_t, std::size_t>> out;
                     for (const emb::row_range& r : t.t.rank_rows())
                       out.emplace_back(r.begin, r.end);
                     return out;
                   })
      .def_prop_rw(
          "step",
          [](const py_table& t) {
            // Updates in flight on other threads change it: read it between them.
            const call_guard::pass call = t.guard.enter();
            released_call release;
            const auto updates = t.guard.one_at_a_time();
            return t.t.step();
          },
          [](py_table& t, std::uint64_t step) {
            const call_guard::pass call = t.guard.enter();
            released_call release;
            const auto updates = t.guard.one_at_a_time();
            t.t.set_step(step);
          })
      .def_prop_ro("alive", [](const py_table& t) { return t.guard.open(); })
      .def(
          "lookup",
          [](const py_table& t, const in_array& indices, const out_array& out,
             std::uintptr_t stream) {
            const call_guard::pass call = t.guard.enter();
            const wm::index_array idx = as_indices(indices, "indices");
            const wm::dense_matrix dst = as_matrix(out, idx.count, t.t.dim(), false, "out");
            const bool cpu = use_cpu(t, {indices.device_type(), out.device_type()});
            if (!cpu) {
              require_gpu_reachable(
                  {{"indices", indices.device_type()}, {"out", out.device_type()}},
                  "lookup on a device table or with CUDA arrays");
            }
            released_call release;
            if (cpu) {
              t.t.lookup_host(idx, dst);
            } else {
              t.t.lookup(idx, dst, to_stream(stream));
            }
          },
          nb::arg("indices"), nb::arg("out"), nb::arg("stream"))
      .def(
          "write_rows",
          [](py_table& t, const in_array& indices, const in_array& rows, std::uintptr_t stream) {
            const call_guard::pass call = t.guard.enter();
            const wm::index_array idx = as_indices(indices, "indices");
            const wm::dense_matrix src = as_matrix(rows, idx.count, t.t.dim(), false, "rows");
            const bool cpu = use_cpu(t, {indices.device_type(), rows.device_type()});
            if (!cpu) {
              require_gpu_reachable(
                  {{"indices", indices.device_type()}, {"rows", rows.device_type()}},
                  "write_rows on a device table or with CUDA arrays");
            }
            released_call release;
            if (cpu) {
              t.t.scatter_rows_host(idx, src);
            } else {
              t.t.scatter_rows(idx, src, to_stream(stream));
            }
          },
          nb::arg("indices"), nb::arg("rows"), nb::arg("stream"))
      .def(
          "apply_gradients",
          [](py_table& t, const in_array& indices, const in_array& grads, double lr,
             std::uintptr_t stream) {
            const call_guard::pass call = t.guard.enter();
            const float rate = learning_rate(lr);
            const wm::index_array idx = as_indices(indices, "indices");
            const wm::dense_matrix g = as_matrix(grads, idx.count, t.t.dim(), false, "grads");
            const bool cpu = use_cpu(t, {indices.device_type(), grads.device_type()});
            if (!cpu) {
              require_gpu_reachable(
                  {{"indices", indices.device_type()}, {"grads", grads.device_type()}},
                  "apply_gradients on a device table or with CUDA arrays");
            }
            released_call release;
            // The update keeps scratch and the step counter in the table: one at a time.
            const auto updates = t.guard.one_at_a_time();
            if (cpu) {
              refuse_non_finite(t.t, g);
              t.t.apply_gradients_host(idx, g, rate);
            } else {
              t.t.apply_gradients(idx, g, rate, to_stream(stream));
            }
          },
          nb::arg("indices"), nb::arg("grads"), nb::arg("lr"), nb::arg("stream"))
      .def(
          "read_state",
          [](const py_table& t, const std::string& name, const in_array& indices,
             const out_array& out, std::uintptr_t stream) {
            const call_guard::pass call = t.guard.enter();
            const std::size_t i = state_index(t, name);
            const wm::wm_tensor st = t.t.state_tensor(i);
            const wm::index_array idx = as_indices(indices, "indices");
            const wm::dense_matrix dst = as_matrix(out, idx.count, st.cols, false, "out");
            const bool cpu = use_cpu(t, {indices.device_type(), out.device_type()});
            if (!cpu) {
              require_gpu_reachable(
                  {{"indices", indices.device_type()}, {"out", out.device_type()}},
                  "read_state on a device table or with CUDA arrays");
            }
            released_call release;
            if (cpu) {
              wm::gather_host(st, idx, dst);
            } else {
              wm::gather(st, idx, dst, to_stream(stream));
            }
          },
          nb::arg("name"), nb::arg("indices"), nb::arg("out"), nb::arg("stream"))
      .def(
          "state_cols",
          [](const py_table& t, const std::string& name) {
            t.guard.check();
            return t.t.state_tensor(state_index(t, name)).cols;
          },
          nb::arg("name"))
      .def(
          "local_weights",
          [](py_table& t) {
            t.guard.check();
            const wm::part_info p = t.t.weights_memory().local_part();
            const emb::row_range r = t.t.own_rows();
            const int device = t.host() ? -1 : p.device;
            return nb::make_tuple(r.begin, make_view(p.ptr, r.size(), t.t.dim(), t.t.dtype(),
                                                     device, false, nb::find(&t)));
          },
          "(first row, view of this rank's rows of the weights).")
      .def(
          "store_checkpoint",
          [](py_table& t, const std::string& dir) {
            const call_guard::pass call = t.guard.enter();
            released_call release;
            const auto updates = t.guard.one_at_a_time();  // weights, state and step of one step
            emb::store_checkpoint(t.t, dir);
          },
          nb::arg("dir"))
      .def(
          "load_checkpoint",
          [](py_table& t, const std::string& dir) {
            const call_guard::pass call = t.guard.enter();
            released_call release;
            const auto updates = t.guard.one_at_a_time();
            emb::load_checkpoint(t.t, dir);
          },
          nb::arg("dir"))
      .def(
          "free", [](py_table& t) { t.guard.close([&t] { t.t.free(); }); },
          "Waits for the calls in flight on other threads, then frees.  Collective.");

  nb::class_<py_cache>(m, "DeviceCache", "A GPU's copy of hot rows (see wholestore.DeviceCache).")
      .def(
          "__init__",
          [](py_cache* self, nb::object table, const in_array& rows, int device) {
            py_table& t = nb::cast<py_table&>(table);
            const call_guard::pass call = t.guard.enter();
            std::vector<std::int64_t> list = host_rows(rows, "rows");
            emb::device_cache c;
            {
              released_call release;
              c = emb::device_cache(t.t, list, device);
            }
            py_cache* p = new (self) py_cache();
            p->table_object = std::move(table);
            p->table = &t;
            p->cache = std::move(c);
          },
          nb::arg("table"), nb::arg("rows"), nb::arg("device"))
      .def_prop_ro("capacity",
                   [](const py_cache& c) {
                     c.check();
                     return c.cache.capacity();
                   })
      .def_prop_ro("device",
                   [](const py_cache& c) {
                     c.check();
                     return c.cache.device();
                   })
      .def(
          "lookup",
          [](py_cache& c, const in_array& indices, const out_array& out, std::uintptr_t stream) {
            const py_cache::passes calls = c.enter();
            const wm::index_array idx = as_indices(indices, "indices");
            const wm::dense_matrix dst = as_matrix(out, idx.count, c.table->t.dim(), false, "out");
            require_gpu_reachable({{"indices", indices.device_type()}, {"out", out.device_type()}},
                                  "a device cache's lookup");
            released_call release;
            const auto one_call = c.guard.one_at_a_time();
            c.cache.lookup(idx, dst, to_stream(stream));
          },
          nb::arg("indices"), nb::arg("out"), nb::arg("stream"))
      .def(
          "apply_gradients",
          [](py_cache& c, const in_array& indices, const in_array& grads, double lr,
             std::uintptr_t stream) {
            const py_cache::passes calls = c.enter();
            const float rate = learning_rate(lr);
            const wm::index_array idx = as_indices(indices, "indices");
            const wm::dense_matrix g =
                as_matrix(grads, idx.count, c.table->t.dim(), false, "grads");
            require_gpu_reachable(
                {{"indices", indices.device_type()}, {"grads", grads.device_type()}},
                "a device cache's apply_gradients");
            released_call release;
            const auto one_call = c.guard.one_at_a_time();
            const auto updates = c.table->guard.one_at_a_time();  // the table's update
            c.cache.apply_gradients(idx, g, rate, to_stream(stream));
          },
          nb::arg("indices"), nb::arg("grads"), nb::arg("lr"), nb::arg("stream"))
      .def(
          "write_rows",
          [](py_cache& c, const in_array& indices, const in_array& rows, std::uintptr_t stream) {
            const py_cache::passes calls = c.enter();
            const wm::index_array idx = as_indices(indices, "indices");
            const wm::dense_matrix src =
                as_matrix(rows, idx.count, c.table->t.dim(), false, "rows");
            require_gpu_reachable(
                {{"indices", indices.device_type()}, {"rows", rows.device_type()}},
                "a device cache's write_rows");
            released_call release;
            const auto one_call = c.guard.one_at_a_time();
            c.cache.scatter_rows(idx, src, to_stream(stream));
          },
          nb::arg("indices"), nb::arg("rows"), nb::arg("stream"))
      .def(
          "flush",
          [](py_cache& c, std::uintptr_t stream) {
            const py_cache::passes calls = c.enter();
            released_call release;
            const auto one_call = c.guard.one_at_a_time();
            c.cache.flush(to_stream(stream));
          },
          nb::arg("stream"))
      .def(
          "stats",
          [](const py_cache& c, std::uintptr_t stream) {
            const py_cache::passes calls = c.enter();
            emb::cache_stats st;
            {
              released_call release;
              const auto one_call = c.guard.one_at_a_time();
              st = c.cache.stats(to_stream(stream));
            }
            return std::make_pair(st.lookups, st.hits);
          },
          nb::arg("stream"))
      .def(
          "reset_stats",
          [](py_cache& c, std::uintptr_t stream) {
            const py_cache::passes calls = c.enter();
            released_call release;
            const auto one_call = c.guard.one_at_a_time();
            c.cache.reset_stats(to_stream(stream));
          },
          nb::arg("stream"))
      .def(
          "free",
          [](py_cache& c) {
            if (c.guard.close([&c] { c.cache = emb::device_cache(); })) {
              c.table = nullptr;
              c.table_object = nb::object();  // with the GIL
            }
          },
          "Waits for the calls in flight on other threads, then frees the device copy.");

  m.def(
      "hottest_rows",
      [](const in_array& sample, std::size_t rows, std::size_t capacity) {
        std::vector<std::int64_t> s = host_rows(sample, "sample");
        released_call release;
        return emb::hottest_rows(s, rows, capacity);
      },
      nb::arg("sample"), nb::arg("rows"), nb::arg("capacity"),
      "The `capacity` rows most frequent in `sample` (ties to the lower row), at most its "
      "distinct rows; an index outside [0, rows) raises LogicError naming it.");

  m.def("optimizer_names", [] {
    std::vector<std::string> names;
    for (emb::optimizer_kind k :
         {emb::optimizer_kind::sgd, emb::optimizer_kind::adam, emb::optimizer_kind::adagrad,
          emb::optimizer_kind::rowwise_adagrad, emb::optimizer_kind::rmsprop}) {
      names.push_back(emb::optimizer_name(k));
    }
    return names;
  });
}

}  // namespace wholestore::python
