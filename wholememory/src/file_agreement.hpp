/*
 * Private to file IO: how the ranks of one store or load stay together.  A call runs in
 * phases; after each, every rank sends all others its outcome over the bootstrap (success with
 * a payload, or its exception's type and message), so that all go on or all throw the same
 * error and none is left waiting in a collective the others have left.  Also the small binary
 * encoding of those messages, and the arguments every rank must pass alike.
 */
#pragma once

#include <wholememory/bootstrap.hpp>
#include <wholememory/error.hpp>

#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace wholememory::detail {

/// The phases of a store or load agree through the public wholememory::agree (bootstrap.hpp).
using ::wholememory::agree;

/// Builds an exchange message: integers in host byte order (the ranks of one job share it) and
/// length-prefixed strings.
class byte_writer {
 public:
  void u64(std::uint64_t v) { out_.append(reinterpret_cast<const char*>(&v), sizeof(v)); }
  void bytes(const std::string& s) {
    u64(s.size());
    out_ += s;
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

/// Reads what byte_writer wrote; throws logic_error when the message ends early.
class byte_reader {
 public:
  explicit byte_reader(const std::string& in) : in_(in) {}
  std::uint64_t u64() {
    std::uint64_t v;
    need(sizeof(v));
    std::memcpy(&v, in_.data() + at_, sizeof(v));
    at_ += sizeof(v);
    return v;
  }
  std::string bytes() {
    const std::uint64_t n = u64();
    need(n);
    std::string s = in_.substr(at_, n);
    at_ += n;
    return s;
  }

 private:
  void need(std::uint64_t n) const {
    WM_EXPECTS(n <= in_.size() - at_, "file IO: a rank sent a malformed exchange message ("
                                          << in_.size() << " bytes, reading " << n << " at " << at_
                                          << ")");
  }
  const std::string& in_;
  std::size_t at_ = 0;
};

/// What every rank of a call must pass alike.
struct call_arguments {
  std::string dir;
  std::uint64_t block_bytes = 0;
  std::uint64_t metadata_checksum = 0;
  std::uint64_t verify = 0;
  std::vector<std::pair<std::string, std::uint64_t>> arrays;  ///< name, bytes

  std::string encode() const;
  static call_arguments decode(const std::string& s);
};

/// Throws mismatch_error, with the same message on every rank, naming the first rank whose
/// arguments differ from rank 0's and how.  `encoded` holds every rank's call_arguments;
/// `function` is "wholememory::store" or "wholememory::load".
void check_same_arguments(const std::vector<std::string>& encoded, const char* function);

/// A checksum of the metadata map, for the argument agreement.
std::uint64_t metadata_checksum(const std::map<std::string, std::string>& metadata);

}  // namespace wholememory::detail
