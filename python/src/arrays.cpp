#include "arrays.hpp"

#include <nanobind/stl/string.h>

#include <wholememory/device.hpp>
#include <wholememory/error.hpp>

#include <sstream>

namespace wholestore::python {

namespace {

std::string describe(nb::dlpack::dtype t) {
  std::ostringstream os;
  switch (static_cast<nb::dlpack::dtype_code>(t.code)) {
    case nb::dlpack::dtype_code::Int:
      os << "int";
      break;
    case nb::dlpack::dtype_code::UInt:
      os << "uint";
      break;
    case nb::dlpack::dtype_code::Float:
      os << "float";
      break;
    case nb::dlpack::dtype_code::Bfloat:
      os << "bfloat";
      break;
    case nb::dlpack::dtype_code::Complex:
      os << "complex";
      break;
    case nb::dlpack::dtype_code::Bool:
      os << "bool";
      break;
    default:
      os << "code" << static_cast<int>(t.code) << "_";
      break;
  }
  os << static_cast<int>(t.bits);
  if (t.lanes != 1) os << "x" << t.lanes;
  return os.str();
}

std::string shape_text(std::size_t ndim, const int64_t* shape) {
  std::ostringstream os;
  os << "(";
  for (std::size_t i = 0; i < ndim; ++i) os << (i ? ", " : "") << shape[i];
  if (ndim == 1) os << ",";
  os << ")";
  return os.str();
}

template <typename Array>
wholememory::dense_matrix matrix_of(const Array& a, std::size_t rows, std::size_t cols,
                                    bool allow_1d, const char* what) {
  const wholememory::dtype type = to_dtype(a.dtype(), what);
  const std::size_t ndim = a.ndim();
  const int64_t* shape = a.shape_ptr();
  wholememory::dense_matrix m;
  m.data = const_cast<void*>(static_cast<const void*>(a.data()));
  m.type = type;
  std::size_t want_rows = rows;
  if (ndim == 1 && allow_1d && cols == 1) {
    if (a.size() > 1 && a.stride(0) != 1) {
      throw nb::value_error((std::string(what) + " must be contiguous (stride " +
                             std::to_string(a.stride(0)) + " elements)")
                                .c_str());
    }
    m.rows = a.shape(0);
    m.cols = 1;
    m.row_stride = 1;
  } else if (ndim == 2) {
    m.rows = a.shape(0);
    m.cols = a.shape(1);
    if (m.cols != cols) {
      throw nb::value_error((std::string(what) + " has shape " + shape_text(ndim, shape) +
                             ", expected " + std::to_string(cols) + " columns")
                                .c_str());
    }
    const int64_t col_stride = a.stride(1), row_stride = a.stride(0);
    if (m.rows > 0 && m.cols > 1 && col_stride != 1) {
      throw nb::value_error((std::string(what) + " must have contiguous rows (column stride " +
                             std::to_string(col_stride) + " elements; pass a C-contiguous array)")
                                .c_str());
    }
    if (m.rows > 1 && (row_stride < 0 || static_cast<std::size_t>(row_stride) < m.cols)) {
      throw nb::value_error((std::string(what) + " has row stride " + std::to_string(row_stride) +
                             " elements, less than its " + std::to_string(m.cols) + " columns")
                                .c_str());
    }
    m.row_stride = m.rows > 1 ? static_cast<std::size_t>(row_stride) : m.cols;
  } else {
    throw nb::value_error((std::string(what) + " has shape " + shape_text(ndim, shape) +
                           ", expected (rows, " + std::to_string(cols) + ")" +
                           (allow_1d && cols == 1 ? " or (rows,)" : ""))
                              .c_str());
  }
  if (want_rows != SIZE_MAX && m.rows != want_rows) {
    throw nb::value_error((std::string(what) + " has " + std::to_string(m.rows) +
                           " rows, expected " + std::to_string(want_rows) + " (one per index)")
                              .c_str());
  }
  return m;
}

}  // namespace

wholememory::dtype to_dtype(nb::dlpack::dtype t, const char* what) {
  using code = nb::dlpack::dtype_code;
  if (t.lanes == 1) {
    switch (static_cast<code>(t.code)) {
      case code::Int:
        if (t.bits == 8) return wholememory::dtype::int8;
        if (t.bits == 16) return wholememory::dtype::int16;
        if (t.bits == 32) return wholememory::dtype::int32;
        if (t.bits == 64) return wholememory::dtype::int64;
        break;
      case code::UInt:
        if (t.bits == 8) return wholememory::dtype::uint8;
        break;
      case code::Float:
        if (t.bits == 16) return wholememory::dtype::float16;
        if (t.bits == 32) return wholememory::dtype::float32;
        if (t.bits == 64) return wholememory::dtype::float64;
        break;
      case code::Bfloat:
        if (t.bits == 16) return wholememory::dtype::bfloat16;
        break;
      default:
        break;
    }
  }
  throw nb::value_error((std::string(what) + " has dtype " + describe(t) +
                         ", which wholestore does not handle (int8, int16, int32, int64, uint8, "
                         "float16, bfloat16, float32, float64)")
                            .c_str());
}

nb::dlpack::dtype to_dlpack(wholememory::dtype t) {
  using wholememory::dtype;
  switch (t) {
    case dtype::int8:
      return nb::dtype<std::int8_t>();
    case dtype::int16:
      return nb::dtype<std::int16_t>();
    case dtype::int32:
      return nb::dtype<std::int32_t>();
    case dtype::int64:
      return nb::dtype<std::int64_t>();
    case dtype::uint8:
      return nb::dtype<std::uint8_t>();
    case dtype::float16: {
      nb::dlpack::dtype d;
      d.code = static_cast<std::uint8_t>(nb::dlpack::dtype_code::Float);
      d.bits = 16;
      d.lanes = 1;
      return d;
    }
    case dtype::bfloat16: {
      nb::dlpack::dtype d;
      d.code = static_cast<std::uint8_t>(nb::dlpack::dtype_code::Bfloat);
      d.bits = 16;
      d.lanes = 1;
      return d;
    }
    case dtype::float32:
      return nb::dtype<float>();
    case dtype::float64:
      return nb::dtype<double>();
  }
  throw nb::value_error("unknown dtype");
}

wholememory::dtype dtype_from_name(const std::string& name) {
  try {
    return wholememory::parse_dtype(name);
  } catch (const wholememory::logic_error& e) {
    throw nb::value_error(e.what());
  }
}

bool gpu_reachable(int device_type) {
  return device_type == nb::device::cuda::value || device_type == nb::device::cuda_host::value ||
         device_type == nb::device::cuda_managed::value;
}

bool cpu_reachable(int device_type) {
  return device_type == nb::device::cpu::value || device_type == nb::device::cuda_host::value;
}

void require_gpu_reachable(std::initializer_list<std::pair<const char*, int>> arrays,
                           const char* why) {
  for (const auto& [name, device_type] : arrays) {
    if (!gpu_reachable(device_type)) {
      throw nb::value_error((std::string(why) + " runs on the GPU and needs " + name +
                             " in GPU-readable memory (a CUDA torch tensor or CuPy array), got a "
                             "CPU array")
                                .c_str());
    }
  }
}

wholememory::index_array as_indices(const in_array& a, const char* what) {
  if (a.ndim() != 1) {
    throw nb::value_error(
        (std::string(what) + " must be 1-D, got shape " + shape_text(a.ndim(), a.shape_ptr()))
            .c_str());
  }
  const nb::dlpack::dtype t = a.dtype();
  const bool int_type = t.code == static_cast<std::uint8_t>(nb::dlpack::dtype_code::Int) &&
                        t.lanes == 1 && (t.bits == 32 || t.bits == 64);
  if (!int_type) {
    throw nb::value_error(
        (std::string(what) + " must be int32 or int64, got " + describe(t)).c_str());
  }
  if (a.shape(0) > 1 && a.stride(0) != 1) {
    throw nb::value_error((std::string(what) + " must be contiguous (stride " +
                           std::to_string(a.stride(0)) + " elements)")
                              .c_str());
  }
  wholememory::index_array idx;
  idx.data = a.data();
  idx.type = t.bits == 32 ? wholememory::dtype::int32 : wholememory::dtype::int64;
  idx.count = a.shape(0);
  return idx;
}

wholememory::dense_matrix as_matrix(const in_array& a, std::size_t rows, std::size_t cols,
                                    bool allow_1d, const char* what) {
  return matrix_of(a, rows, cols, allow_1d, what);
}

wholememory::dense_matrix as_matrix(const out_array& a, std::size_t rows, std::size_t cols,
                                    bool allow_1d, const char* what) {
  return matrix_of(a, rows, cols, allow_1d, what);
}

nb::object make_view(void* data, std::size_t rows, std::size_t cols, wholememory::dtype type,
                     int device, bool one_dim, nb::handle owner) {
  const std::size_t shape[2] = {rows, cols};
  const std::size_t ndim = one_dim ? 1 : 2;
  const nb::dlpack::dtype dt = to_dlpack(type);
  if (device < 0) {
    return nb::cast(
        nb::ndarray<nb::numpy>(data, ndim, shape, owner, nullptr, dt, nb::device::cpu::value, 0),
        nb::rv_policy::reference);
  }
  return nb::cast(
      nb::ndarray<>(data, ndim, shape, owner, nullptr, dt, nb::device::cuda::value, device),
      nb::rv_policy::reference);
}

namespace {

nb::dlpack::dtype dlpack_dtype_of_typestr(const std::string& typestr) {
  if (typestr.size() < 3 || (typestr[0] != '<' && typestr[0] != '|' && typestr[0] != '=')) {
    throw nb::value_error(("__cuda_array_interface__: typestr '" + typestr +
                           "' is not a little-endian '<kN' type string")
                              .c_str());
  }
  const char kind = typestr[1];
  int bytes = 0;
  try {
    bytes = std::stoi(typestr.substr(2));
  } catch (const std::exception&) {
    bytes = 0;
  }
  nb::dlpack::dtype t{};
  t.lanes = 1;
  t.bits = static_cast<std::uint8_t>(8 * bytes);
  const bool int_size = bytes == 1 || bytes == 2 || bytes == 4 || bytes == 8;
  if ((kind == 'i' || kind == 'u') && int_size) {
    t.code = static_cast<std::uint8_t>(kind == 'i' ? nb::dlpack::dtype_code::Int
                                                   : nb::dlpack::dtype_code::UInt);
  } else if (kind == 'f' && (bytes == 2 || bytes == 4 || bytes == 8)) {
    t.code = static_cast<std::uint8_t>(nb::dlpack::dtype_code::Float);
  } else {
    throw nb::value_error(("__cuda_array_interface__: typestr '" + typestr +
                           "' is not a supported type (signed or unsigned integers of 1, 2, 4 "
                           "or 8 bytes, floats of 2, 4 or 8)")
                              .c_str());
  }
  return t;
}

}  // namespace

nb::object cuda_array_view(nb::handle obj) {
  if (!nb::hasattr(obj, "__cuda_array_interface__"))
    throw nb::value_error("the object has no __cuda_array_interface__");
  nb::object iface = obj.attr("__cuda_array_interface__");
  if (!nb::isinstance<nb::dict>(iface))
    throw nb::value_error("__cuda_array_interface__ is not a dict");
  nb::dict d = nb::borrow<nb::dict>(iface);
  for (const char* key : {"shape", "typestr", "data", "version"}) {
    if (!d.contains(key)) {
      throw nb::value_error(
          (std::string("__cuda_array_interface__ has no '") + key + "' key").c_str());
    }
  }
  const int version = nb::cast<int>(nb::object(d["version"]));
  if (version < 2 || version > 3) {
    throw nb::value_error(("__cuda_array_interface__ version " + std::to_string(version) +
                           " is not supported (2 or 3)")
                              .c_str());
  }
  std::vector<std::size_t> shape;
  for (nb::handle h : nb::object(d["shape"])) shape.push_back(nb::cast<std::size_t>(h));
  const nb::dlpack::dtype dt =
      dlpack_dtype_of_typestr(nb::cast<std::string>(nb::object(d["typestr"])));
  nb::object data = d["data"];
  if (nb::len(data) != 2)
    throw nb::value_error("__cuda_array_interface__: 'data' must be (pointer, read_only)");
  const auto address = nb::cast<std::uintptr_t>(nb::object(data[0]));
  const std::size_t item = dt.bits / 8;
  if (d.contains("strides") && !nb::object(d["strides"]).is_none()) {
    std::size_t expected = item;
    std::vector<std::size_t> strides;
    for (nb::handle h : nb::object(d["strides"])) strides.push_back(nb::cast<std::size_t>(h));
    if (strides.size() != shape.size())
      throw nb::value_error("__cuda_array_interface__: 'strides' and 'shape' differ in length");
    for (std::size_t i = shape.size(); i-- > 0;) {
      if (shape[i] > 1 && strides[i] != expected) {
        throw nb::value_error(
            "__cuda_array_interface__: the array is not C-contiguous (pass a contiguous copy)");
      }
      expected *= shape[i];
    }
  }
  std::size_t elements = 1;
  for (std::size_t n : shape) elements *= n;
  if (address == 0 && elements > 0)
    throw nb::value_error("__cuda_array_interface__: a null data pointer for a non-empty array");
  if (version >= 3 && d.contains("stream") && !nb::object(d["stream"]).is_none()) {
    const auto stream = nb::cast<std::uintptr_t>(nb::object(d["stream"]));
    if (stream == 0) throw nb::value_error("__cuda_array_interface__: stream 0 is disallowed");
    nb::gil_scoped_release release;
    wholememory::synchronize_stream(reinterpret_cast<cudaStream_t>(stream));
  }
  void* ptr = reinterpret_cast<void*>(address);
  // Where the memory is decides what may read it: a kernel reads device and pinned memory,
  // the CPU paths host memory; pageable memory is never handed to a kernel.
  const int device = wholememory::device_of_pointer(ptr);
  const int device_type = device >= 0                                 ? nb::device::cuda::value
                          : device == wholememory::pinned_host_memory ? nb::device::cuda_host::value
                                                                      : nb::device::cpu::value;
  // An array-API object (__dlpack__, __dlpack_device__, shape): the library's entry points
  // and the Python modules' helpers take it like any framework's array.
  return nb::cast(nb::ndarray<nb::array_api>(ptr, shape.size(), shape.data(), obj, nullptr, dt,
                                             device_type, device >= 0 ? device : 0),
                  nb::rv_policy::reference);
}

}  // namespace wholestore::python
