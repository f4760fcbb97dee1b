#include <wholememory/error.hpp>

#include <cstring>

namespace wholememory {

namespace detail {

std::string format_location(const char* file, int line, const std::string& what,
                            const char* check) {
  const char* base = std::strrchr(file, '/');
  std::string out = what + " (" + (base ? base + 1 : file) + ":" + std::to_string(line);
  if (check != nullptr) out += std::string(", failed: ") + check;
  return out + ")";
}

}  // namespace detail

std::string errno_text(int err) {
  char buf[256];
  // GNU strerror_r returns the message pointer, which may or may not be buf.
  const char* msg = strerror_r(err, buf, sizeof(buf));
  return std::string(msg) + " (errno " + std::to_string(err) + ")";
}

}  // namespace wholememory
