// write_npy (npy.hpp).
#include "npy.hpp"

#include "config.hpp"
#include "output_file.hpp"

#include <cstdint>
#include <cstdio>
#include <cstring>

namespace wholestore::apps {

std::string npy_header(std::size_t rows, std::size_t cols) {
  std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + std::to_string(rows) +
                     ", " + std::to_string(cols) + "), }";
  const std::size_t fixed = 10;  // magic (6), version (2), header length (2)
  std::size_t total = fixed + dict.size() + 1;
  const std::size_t padded = (total + 63) / 64 * 64;
  dict.append(padded - total, ' ');
  dict += '\n';
  const std::size_t len = dict.size();
  std::string out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(len & 0xff);
  out += static_cast<char>((len >> 8) & 0xff);
  return out + dict;
}

void write_npy(const std::string& path, const float* data, std::size_t rows, std::size_t cols) {
  static_assert(sizeof(float) == 4, "float32");
  const std::uint16_t probe = 1;
  unsigned char first = 0;
  std::memcpy(&first, &probe, 1);
  if (first != 1) throw config_error("--export: .npy is written little-endian only");
  const std::string header = npy_header(rows, cols);
  write_output_file(path, "--export", [&](std::FILE* f) {
    std::fwrite(header.data(), 1, header.size(), f);
    if (rows * cols != 0) std::fwrite(data, sizeof(float), rows * cols, f);
  });
}

}  // namespace wholestore::apps
