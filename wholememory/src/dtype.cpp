#include <wholememory/dtype.hpp>
#include <wholememory/error.hpp>

namespace wholememory {

namespace {
struct dtype_entry {
  dtype type;
  const char* name;
  std::size_t size;
};
constexpr dtype_entry dtype_table[] = {
    {dtype::int8, "int8", 1},         {dtype::int16, "int16", 2},
    {dtype::int32, "int32", 4},       {dtype::int64, "int64", 8},
    {dtype::uint8, "uint8", 1},       {dtype::float16, "float16", 2},
    {dtype::bfloat16, "bfloat16", 2}, {dtype::float32, "float32", 4},
    {dtype::float64, "float64", 8},
};

const dtype_entry& entry(dtype t) {
  for (const auto& e : dtype_table)
    if (e.type == t) return e;
  WM_FAIL(logic_error, "unknown dtype value " << static_cast<int>(t));
}
}  // namespace

std::size_t dtype_size(dtype t) { return entry(t).size; }

const char* dtype_name(dtype t) { return entry(t).name; }

dtype parse_dtype(const std::string& name) {
  std::string accepted;
  for (const auto& e : dtype_table) {
    if (name == e.name) return e.type;
    accepted += accepted.empty() ? e.name : std::string(", ") + e.name;
  }
  WM_FAIL(logic_error, "unknown dtype '" << name << "'; expected one of " << accepted);
}

bool is_floating(dtype t) {
  return t == dtype::float16 || t == dtype::bfloat16 || t == dtype::float32 || t == dtype::float64;
}

}  // namespace wholememory
