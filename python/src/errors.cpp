// The library's exceptions as Python exceptions (bindings.hpp, bind_errors): the classes, the one
// rule that picks a class for a message, and the message a user sees.
#include "bindings.hpp"

#include <wholememory/error.hpp>
#include <wholememory/interrupt.hpp>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string>

namespace wholestore::python {

namespace {

namespace wm = wholememory;

/// The classes, made once by bind_errors and kept by the module (its attributes).
struct error_types {
  PyObject* logic = nullptr;
  PyObject* mismatch = nullptr;
  PyObject* index = nullptr;
  PyObject* not_found = nullptr;
  PyObject* cuda = nullptr;
  PyObject* nccl = nullptr;
  PyObject* system = nullptr;
  PyObject* peer_timeout = nullptr;
  PyObject* interrupted = nullptr;
  PyObject* out_of_memory = nullptr;
};
error_types types;

/// A new exception class `wholestore._core.<name>` with `bases`, set as the module's attribute.
PyObject* new_type(nb::module_& m, const char* name, const char* doc,
                   std::initializer_list<PyObject*> bases) {
  nb::list list;
  for (PyObject* b : bases) list.append(nb::handle(b));
  const std::string qualified = std::string("wholestore._core.") + name;
  PyObject* type =
      PyErr_NewExceptionWithDoc(qualified.c_str(), doc, nb::tuple(list).ptr(), nullptr);
  if (type == nullptr) throw nb::python_error();
  m.attr(name) = nb::steal(type);  // the module owns it; `types` borrows
  return type;
}

/// WHOLESTORE_DEBUG=1: messages keep the library's source locations (as the program's do).
/// Read at each error, so a test or a session may set it after the import.
bool debug_messages() {
  const char* v = std::getenv("WHOLESTORE_DEBUG");
  return v != nullptr && std::strcmp(v, "1") == 0;
}

/// Whether s[at...] is "name.ext:digits" then ')' or ", failed: ": the inside of a group that
/// wholememory::detail::format_location appends ("(dataset.cpp:336, failed: ...)").
bool location_at(const std::string& s, std::size_t at) {
  std::size_t i = at;
  while (i < s.size() && (std::isalnum(static_cast<unsigned char>(s[i])) || s[i] == '_' ||
                          s[i] == '-' || s[i] == '.'))
    ++i;
  const std::string name = s.substr(at, i - at);
  auto ends_with = [&name](const char* ext) {
    const std::size_t n = std::strlen(ext);
    return name.size() > n && name.compare(name.size() - n, n, ext) == 0;
  };
  if (!(ends_with(".cpp") || ends_with(".hpp") || ends_with(".cu") || ends_with(".cuh") ||
        ends_with(".h")) ||
      i >= s.size() || s[i] != ':')
    return false;
  const std::size_t digits = ++i;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
  return i > digits && i < s.size() && (s[i] == ')' || s.compare(i, 10, ", failed: ") == 0);
}

/// The one place that reads a message to pick a class: wholememory/error.hpp has no type for a
/// missing file or an index out of range, and the library words both one way.
///  - a missing file: ENOENT's text, "No such file or directory" (errno_text and
///    std::error_code write it), or read_manifest's "(it does not exist)";
///  - an index out of range: "<index> at position <p> is outside ..." (or ", outside ..."), as
///    every check of a caller's index, seed or start array words it.
bool names_missing_file(const std::string& what) {
  return what.find("No such file or directory") != std::string::npos ||
         what.find("(it does not exist)") != std::string::npos;
}
bool names_index_out_of_range(const std::string& what) {
  const std::size_t at = what.find(" at position ");
  return at != std::string::npos && what.find("outside", at) != std::string::npos;
}

void raise(PyObject* type, const std::string& what) {
  PyErr_SetString(type, user_message(what).c_str());
}

/// A FileNotFoundError with errno ENOENT; str() stays the message (no "[Errno 2]" prefix).
void raise_not_found(const std::string& what) {
  PyObject* error = PyObject_CallFunction(types.not_found, "s", user_message(what).c_str());
  if (error == nullptr) return;  // the call's own exception stands
  PyObject* code = PyLong_FromLong(ENOENT);
  if (code != nullptr) {
    PyObject_SetAttrString(error, "errno", code);
    Py_DECREF(code);
  }
  PyErr_SetObject(types.not_found, error);
  Py_DECREF(error);
}

void translate(const std::exception_ptr& p, void*) {
  try {
    std::rethrow_exception(p);
  } catch (const wm::mismatch_error& e) {
    raise(types.mismatch, e.what());
  } catch (const wm::logic_error& e) {
    if (names_missing_file(e.what())) {
      raise_not_found(e.what());
    } else {
      raise(names_index_out_of_range(e.what()) ? types.index : types.logic, e.what());
    }
  } catch (const wm::interrupted_error& e) {
    raise(types.interrupted, e.what());  // translate_interrupt, tried first, let it through
  } catch (const wm::timeout_error& e) {
    raise(types.peer_timeout, e.what());
  } catch (const wm::system_error& e) {
    if (names_missing_file(e.what())) {
      raise_not_found(e.what());
    } else {
      raise(types.system, e.what());
    }
  } catch (const wm::cuda_error& e) {
    raise(types.cuda, e.what());
  } catch (const wm::nccl_error& e) {
    raise(types.nccl, e.what());
  } catch (const wm::out_of_memory& e) {
    raise(types.out_of_memory, e.what());
  }
  // Anything else propagates to the next translator (nanobind's own: std::exception and its
  // standard subclasses, nb::value_error, ...).
}

}  // namespace

// Every group goes (a message wrapped by another layer carries two), as in the program's
// user_message (apps/cli.hpp), which also escapes control bytes for the terminal.
std::string user_message(const std::string& what) {
  if (debug_messages()) return what;
  std::string out;
  out.reserve(what.size());
  for (std::size_t i = 0; i < what.size();) {
    if (what[i] == ' ' && i + 1 < what.size() && what[i + 1] == '(' && location_at(what, i + 2)) {
      // To the group's own closing parenthesis (a failed check may hold parentheses).
      std::size_t j = i + 1;
      int depth = 0;
      for (; j < what.size(); ++j) {
        if (what[j] == '(') ++depth;
        if (what[j] == ')' && --depth == 0) break;
      }
      if (j < what.size()) {
        i = j + 1;
        continue;
      }
    }
    out += what[i++];
  }
  return out;
}

void bind_errors(nb::module_& m) {
  PyObject* base =
      new_type(m, "WholestoreError", "Base of every exception of wholestore's C++ library.",
               {PyExc_Exception});
  types.logic =
      new_type(m, "LogicError", "A bad argument (logic_error).", {base, PyExc_ValueError});
  types.mismatch = new_type(m, "MismatchError",
                            "Ranks called a collective with arguments that "
                            "disagree (mismatch_error).",
                            {types.logic});
  types.index = new_type(m, "IndexOutOfRangeError",
                         "An index, seed or start node outside its "
                         "table or graph.",
                         {types.logic, PyExc_IndexError});
  types.not_found = new_type(m, "NotFoundError",
                             "A file or directory that does not exist "
                             "(errno ENOENT).",
                             {base, PyExc_FileNotFoundError});
  types.cuda =
      new_type(m, "CudaError", "A CUDA call failed (cuda_error).", {base, PyExc_RuntimeError});
  types.nccl =
      new_type(m, "NcclError", "An NCCL call failed (nccl_error).", {base, PyExc_RuntimeError});
  types.system = new_type(m, "SystemCallError", "An operating-system call failed (system_error).",
                          {base, PyExc_RuntimeError});
  types.peer_timeout = new_type(m, "PeerTimeoutError",
                                "A peer did not arrive in time or died "
                                "(timeout_error); the communicator is unusable afterwards.",
                                {base, PyExc_RuntimeError, PyExc_TimeoutError});
  types.interrupted = new_type(m, "Interrupted",
                               "A wait ended by Ctrl-C whose SIGINT handler "
                               "did not raise (interrupted_error).",
                               {types.peer_timeout});
  types.out_of_memory = new_type(m, "OutOfMemoryError",
                                 "An allocation could not be satisfied "
                                 "(out_of_memory).",
                                 {base, PyExc_MemoryError});

  // Translators registered later are tried first: Ctrl-C (interrupt.cpp) before the rest, and
  // a translator a later bind_* registers (TrainingDiverged) before both.
  nb::register_exception_translator(translate);
  nb::register_exception_translator(translate_interrupt, types.interrupted);
}

}  // namespace wholestore::python
