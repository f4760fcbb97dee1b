// Agreement between the ranks of a store or load (file_agreement.hpp).
#include "file_agreement.hpp"

#include "file_format.hpp"

#include <exception>
#include <sstream>
#include <stdexcept>

namespace wholememory::detail {

std::string call_arguments::encode() const {
  byte_writer w;
  w.bytes(dir);
  w.u64(block_bytes);
  w.u64(metadata_checksum);
  w.u64(verify);
  w.u64(arrays.size());
  for (const auto& [name, bytes] : arrays) {
    w.bytes(name);
    w.u64(bytes);
  }
  return w.take();
}

call_arguments call_arguments::decode(const std::string& s) {
  byte_reader r(s);
  call_arguments a;
  a.dir = r.bytes();
  a.block_bytes = r.u64();
  a.metadata_checksum = r.u64();
  a.verify = r.u64();
  const std::uint64_t n = r.u64();
  for (std::uint64_t i = 0; i < n; ++i) {
    std::string name = r.bytes();
    a.arrays.emplace_back(std::move(name), r.u64());
  }
  return a;
}

void check_same_arguments(const std::vector<std::string>& encoded, const char* function) {
  const call_arguments a = call_arguments::decode(encoded[0]);
  const std::string call = std::string(function) + "(" + a.dir + ")";
  for (std::size_t r = 1; r < encoded.size(); ++r) {
    const call_arguments b = call_arguments::decode(encoded[r]);
    if (a.arrays.size() != b.arrays.size()) {
      WM_FAIL(mismatch_error, call << ": rank 0 passes " << a.arrays.size() << " arrays, rank " << r
                                   << " passes " << b.arrays.size());
    }
    for (std::size_t i = 0; i < a.arrays.size(); ++i) {
      if (a.arrays[i].first != b.arrays[i].first) {
        WM_FAIL(mismatch_error, call << ": array " << i << " is '" << a.arrays[i].first
                                     << "' on rank 0 and '" << b.arrays[i].first << "' on rank "
                                     << r);
      }
      if (a.arrays[i].second != b.arrays[i].second) {
        WM_FAIL(mismatch_error, call << ": array '" << a.arrays[i].first << "' has "
                                     << a.arrays[i].second << " bytes on rank 0 and "
                                     << b.arrays[i].second << " bytes on rank " << r);
      }
    }
    if (a.dir != b.dir) {
      WM_FAIL(mismatch_error, call << ": rank 0 passes the directory '" << a.dir << "', rank " << r
                                   << " '" << b.dir << "'");
    }
    if (a.block_bytes != b.block_bytes) {
      WM_FAIL(mismatch_error, call << ": rank 0 passes block_bytes " << a.block_bytes << ", rank "
                                   << r << " " << b.block_bytes);
    }
    if (a.verify != b.verify) {
      WM_FAIL(mismatch_error, call << ": rank 0 passes verify = " << (a.verify ? "true" : "false")
                                   << ", rank " << r << " " << (b.verify ? "true" : "false"));
    }
    if (a.metadata_checksum != b.metadata_checksum) {
      WM_FAIL(mismatch_error, call << ": rank 0 and rank " << r << " pass different metadata");
    }
  }
}

std::uint64_t metadata_checksum(const std::map<std::string, std::string>& metadata) {
  byte_writer w;
  for (const auto& [key, value] : metadata) {
    w.bytes(key);
    w.bytes(value);
  }
  const std::string s = w.take();
  return checksum_of(s.data(), s.size());
}

}  // namespace wholememory::detail
