// Communicator, WholeMemory and device helpers of wholestore._core.  Memory frees through a
// call_guard (bindings.hpp): free() waits for the calls in flight on other threads.
#include "arrays.hpp"
#include "bindings.hpp"

#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>
#include <wholememory/allocation.hpp>
#include <wholememory/bootstrap.hpp>
#include <wholememory/communicator.hpp>
#include <wholememory/device.hpp>
#include <wholememory/error.hpp>
#include <wholememory/file_io.hpp>
#include <wholememory/gather.hpp>

#include <chrono>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

namespace wholestore::python {

namespace wm = wholememory;

namespace {

/// Seconds from Python (None: the library's default, $WHOLESTORE_TIMEOUT or 300 s).
std::chrono::milliseconds timeout_of(std::optional<double> seconds) {
  if (!seconds) return wm::default_timeout();
  const double s = *seconds;
  if (!std::isfinite(s) || s <= 0 || s > static_cast<double>(wm::max_timeout_seconds)) {
    throw nb::value_error(
        ("timeout " + std::to_string(s) + " s is not " + wm::timeout_range_text()).c_str());
  }
  return std::chrono::milliseconds(static_cast<std::int64_t>(std::ceil(s * 1000.0)));
}

py_comm host_comm_over(std::shared_ptr<wm::bootstrap> bs) {
  py_comm c;
  c.comm = wm::make_host_communicator(bs);
  c.bs = std::move(bs);
  return c;
}

/// Python's Memory: one WholeMemory allocation seen as a [rows, cols] matrix of one dtype,
/// with the row size as the partition granularity (rows never straddle parts).
struct py_memory {
  wm::allocation mem;
  wm::dtype type = wm::dtype::float32;
  std::size_t rows = 0, cols = 1;

  wm::wm_tensor tensor() const {
    wm::wm_tensor t;
    t.memory = &mem;
    t.type = type;
    t.rows = rows;
    t.cols = cols;
    t.row_stride = cols;
    return t;
  }
  std::size_t row_bytes() const { return cols * wm::dtype_size(type); }
  call_guard guard{"this WholeMemory was freed"};
};

/// (first row, array) of part `part`: -1 this rank's part, -2 the whole range (continuous
/// memory only), i >= 0 part i (continuous or chunked memory).
nb::tuple memory_view(py_memory& m, int part, bool one_dim) {
  m.guard.check();
  nb::handle owner = nb::find(&m);
  const bool host = m.mem.location() == wm::memory_location::host;
  if (part == -2) {
    void* data = m.mem.data();  // throws logic_error for chunked and distributed memory
    const int device = host ? -1 : wm::current_device();
    return nb::make_tuple(0, make_view(data, m.rows, m.cols, m.type, device, one_dim, owner));
  }
  wm::part_info p;
  if (part == -1) {
    p = m.mem.local_part();
  } else {
    if (part < 0 || part >= m.mem.num_parts()) {
      throw nb::index_error(("part " + std::to_string(part) + " is not in [0, " +
                             std::to_string(m.mem.num_parts()) + ")")
                                .c_str());
    }
    p = m.mem.part(part);
    if (p.ptr == nullptr && p.bytes > 0) {
      throw nb::value_error(("part " + std::to_string(part) + " (rank " + std::to_string(p.rank) +
                             ") is not mapped in this process (" +
                             wm::memory_type_name(m.mem.type()) + " memory)")
                                .c_str());
    }
  }
  const std::size_t rb = m.row_bytes();
  const std::size_t first = rb ? p.offset / rb : 0;
  const std::size_t count = rb ? p.bytes / rb : 0;
  return nb::make_tuple(
      first, make_view(p.ptr, count, m.cols, m.type, host ? -1 : p.device, one_dim, owner));
}

/// gather_host when the memory is host-located and both arrays are in CPU memory, else the
/// GPU path on `stream`.
void memory_gather(const py_memory& m, const in_array& indices, const out_array& out,
                   std::uintptr_t stream) {
  const call_guard::pass call = m.guard.enter();
  const wm::index_array idx = as_indices(indices, "indices");
  const wm::dense_matrix dst = as_matrix(out, idx.count, m.cols, true, "out");
  const bool cpu = m.mem.location() == wm::memory_location::host &&
                   cpu_reachable(indices.device_type()) && cpu_reachable(out.device_type());
  const wm::wm_tensor table = m.tensor();
  if (!cpu) {
    require_gpu_reachable({{"indices", indices.device_type()}, {"out", out.device_type()}},
                          "gather on device memory or with CUDA arrays");
  }
  released_call release;
  if (cpu) {
    wm::gather_host(table, idx, dst);
  } else {
    wm::gather(table, idx, dst, to_stream(stream));
  }
}

void memory_scatter(py_memory& m, const in_array& values, const in_array& indices,
                    std::uintptr_t stream) {
  const call_guard::pass call = m.guard.enter();
  const wm::index_array idx = as_indices(indices, "indices");
  const wm::dense_matrix src = as_matrix(values, idx.count, m.cols, true, "values");
  const bool cpu = m.mem.location() == wm::memory_location::host &&
                   cpu_reachable(indices.device_type()) && cpu_reachable(values.device_type());
  const wm::wm_tensor table = m.tensor();
  if (!cpu) {
    require_gpu_reachable({{"indices", indices.device_type()}, {"values", values.device_type()}},
                          "scatter on device memory or with CUDA arrays");
  }
  released_call release;
  if (cpu) {
    wm::scatter_host(src, idx, table);
  } else {
    wm::scatter(src, idx, table, to_stream(stream));
  }
}

nb::dict part_dict(const wm::part_info& p) {
  nb::dict d;
  d["offset"] = p.offset;
  d["bytes"] = p.bytes;
  d["rank"] = p.rank;
  d["device"] = p.device;
  d["mapped"] = p.ptr != nullptr;
  return d;
}

}  // namespace

void bind_memory(nb::module_& m) {
  // ---- devices ----
  m.def("device_count", &wm::device_count, "Visible CUDA devices (0 without CUDA).");
  m.def("current_device", &wm::current_device, "The calling thread's CUDA device.");
  m.def("set_device", &wm::set_device, nb::arg("device"),
        "Makes `device` the calling thread's CUDA device.");
  m.def(
      "cuda_built", [] { return wm::describe_cuda_environment().cuda_built; },
      "True when the library was built with CUDA and NCCL.");
  m.def(
      "cuda_array_view", [](nb::object obj) { return cuda_array_view(obj); }, nb::arg("obj"),
      "An array view (DLPack-capable) of an object that exposes only "
      "__cuda_array_interface__ (v2 or v3; C-contiguous); its stream, when given, is waited for "
      "first.  The view keeps `obj` alive.");

  // ---- launch environment ----
  m.def(
      "read_launch_env",
      []() -> nb::object {
        std::optional<wm::launch_env> env = wm::read_launch_env();
        if (!env) return nb::none();
        nb::dict d;
        d["rank"] = env->rank;
        d["size"] = env->size;
        d["local_rank"] = env->local_rank;
        d["local_size"] = env->local_size;
        d["master_addr"] = env->master_addr;
        d["master_port"] = env->master_port;
        d["job_token"] = env->job_token;
        return d;
      },
      "What RANK/WORLD_SIZE/... (wholestore launch, torchrun) or OMPI_COMM_WORLD_* (mpirun) say "
      "about this process, or None when neither is set.");

  m.def(
      "master_address",
      []() {
        auto a = wm::master_address_from_env();
        return nb::make_tuple(a.first, a.second);
      },
      "(addr, port) of the job's store from MASTER_ADDR, WHOLESTORE_MASTER_PORT or MASTER_PORT "
      "(the next port under torchrun's agent store).");

  // ---- communicators ----
  nb::class_<py_comm>(m, "Communicator", "The ranks of a job (see wholestore.init).")
      .def_prop_ro("rank", [](const py_comm& c) { return c.comm->rank(); })
      .def_prop_ro("size", [](const py_comm& c) { return c.comm->size(); })
      .def_prop_ro("local_rank", [](const py_comm& c) { return c.comm->local_rank(); })
      .def_prop_ro("local_size", [](const py_comm& c) { return c.comm->local_size(); })
      .def_prop_ro("num_hosts", [](const py_comm& c) { return c.comm->topology().num_hosts; })
      .def_prop_ro("backend",
                   [](const py_comm& c) { return wm::backend_name(c.comm->get_backend()); })
      .def_prop_ro("device", [](const py_comm& c) { return c.comm->device(); })
      .def_prop_ro("broken", [](const py_comm& c) { return c.comm->broken(); })
      .def(
          "barrier",
          [](py_comm& c, std::uintptr_t stream) {
            released_call release;
            c.comm->barrier(to_stream(stream));
            c.comm->synchronize(to_stream(stream));
          },
          nb::arg("stream") = 0, "Waits until every rank has arrived.  Collective.")
      .def(
          "allgather_bytes",
          [](py_comm& c, nb::bytes mine) {
            std::string text(mine.c_str(), mine.size());
            std::vector<std::string> all;
            {
              released_call release;
              all = c.bs->allgatherv(text);
            }
            nb::list out;
            for (const std::string& s : all) out.append(nb::bytes(s.data(), s.size()));
            return out;
          },
          nb::arg("data"),
          "Every rank's bytes, in rank order (over the bootstrap; small data).  Collective.")
      .def(
          "make_nccl",
          [](py_comm& c, int device) {
            py_comm out;
            out.bs = c.bs;
            released_call release;
            out.comm = wm::make_nccl_communicator(c.bs, device);
            return out;
          },
          nb::arg("device") = -1,
          "An NCCL communicator over the same ranks, on `device` (-1: the current one).  "
          "Collective.")
      .def(
          "split_by_host",
          [](py_comm& c) {
            py_comm out;
            {
              released_call release;
              out.comm = c.comm->split_by_host();
            }
            out.bs = std::shared_ptr<wm::bootstrap>(out.comm, &out.comm->get_bootstrap());
            return out;
          },
          "One communicator per host holding that host's ranks.  Collective.")
      .def(
          "default_device", [](const py_comm& c) { return wm::default_device(*c.comm); },
          "The local rank modulo the visible GPUs.");

  m.def(
      "init_job",
      [](std::optional<double> timeout_s) {
        std::chrono::milliseconds timeout = timeout_of(timeout_s);
        released_call release;
        return host_comm_over(wm::make_job_bootstrap(timeout));
      },
      nb::arg("timeout_s") = nb::none(),
      "A host communicator from the launch environment, or a job of one rank.  Collective.");
  m.def(
      "init_tcp",
      [](int rank, int size, const std::string& host, int port, std::optional<double> timeout_s,
         const std::string& job_token) {
        std::chrono::milliseconds timeout = timeout_of(timeout_s);
        released_call release;
        return host_comm_over(wm::make_tcp_bootstrap(rank, size, host, port, timeout, job_token));
      },
      nb::arg("rank"), nb::arg("size"), nb::arg("host"), nb::arg("port"),
      nb::arg("timeout_s") = nb::none(), nb::arg("job_token") = "",
      "A host communicator over a TCP store that rank 0 hosts at host:port.  Collective.");

  // ---- WholeMemory ----
  nb::class_<py_memory>(m, "Memory", "One WholeMemory allocation as a [rows, cols] matrix.")
      .def(
          "__init__",
          [](py_memory* self, py_comm& comm, std::size_t rows, std::size_t cols,
             const std::string& dtype, const std::string& type, const std::string& location) {
            const wm::dtype t = dtype_from_name(dtype);
            const wm::memory_type mt = wm::parse_memory_type(type);
            const wm::memory_location ml = wm::parse_memory_location(location);
            if (cols == 0) throw nb::value_error("cols must be >= 1");
            wm::allocation_options opts;
            opts.granularity = cols * wm::dtype_size(t);
            wm::allocation mem;
            {
              released_call release;
              mem =
                  wm::allocation::create(comm.comm, rows * cols * wm::dtype_size(t), mt, ml, opts);
            }
            py_memory* p = new (self) py_memory();
            p->mem = std::move(mem);
            p->type = t;
            p->rows = rows;
            p->cols = cols;
          },
          nb::arg("comm"), nb::arg("rows"), nb::arg("cols"), nb::arg("dtype"), nb::arg("type"),
          nb::arg("location"))
      .def_prop_ro("rows", [](const py_memory& m) { return m.rows; })
      .def_prop_ro("cols", [](const py_memory& m) { return m.cols; })
      .def_prop_ro("dtype", [](const py_memory& m) { return wm::dtype_name(m.type); })
      .def_prop_ro("type",
                   [](const py_memory& m) {
                     m.guard.check();
                     return wm::memory_type_name(m.mem.type());
                   })
      .def_prop_ro("location",
                   [](const py_memory& m) {
                     m.guard.check();
                     return wm::memory_location_name(m.mem.location());
                   })
      .def_prop_ro("nbytes", [](const py_memory& m) { return m.guard.open() ? m.mem.size() : 0; })
      .def_prop_ro("alive", [](const py_memory& m) { return m.guard.open(); })
      .def_prop_ro("num_parts",
                   [](const py_memory& m) {
                     m.guard.check();
                     return m.mem.num_parts();
                   })
      .def(
          "part",
          [](const py_memory& m, int i) {
            m.guard.check();
            if (i < 0 || i >= m.mem.num_parts()) {
              throw nb::index_error(("part " + std::to_string(i) + " is not in [0, " +
                                     std::to_string(m.mem.num_parts()) + ")")
                                        .c_str());
            }
            return part_dict(m.mem.part(i));
          },
          nb::arg("i"))
      .def("local_part",
           [](const py_memory& m) {
             m.guard.check();
             return part_dict(m.mem.local_part());
           })
      .def("view", &memory_view, nb::arg("part"), nb::arg("one_dim"))
      .def("gather", &memory_gather, nb::arg("indices"), nb::arg("out"), nb::arg("stream"))
      .def("scatter", &memory_scatter, nb::arg("values"), nb::arg("indices"), nb::arg("stream"))
      .def(
          "store",
          [](py_memory& m, const std::string& dir) {
            const call_guard::pass call = m.guard.enter();
            released_call release;
            wm::store(m.mem, dir);
          },
          nb::arg("dir"))
      .def(
          "load",
          [](py_memory& m, const std::string& dir, bool verify) {
            const call_guard::pass call = m.guard.enter();
            wm::file_io_options opts;
            opts.verify = verify;
            released_call release;
            wm::load(m.mem, dir, opts);
          },
          nb::arg("dir"), nb::arg("verify") = true)
      .def(
          "free", [](py_memory& m) { m.guard.close([&m] { m.mem.free(); }); },
          "Waits for the calls in flight on other threads, then frees.  Collective.");
}

}  // namespace wholestore::python
