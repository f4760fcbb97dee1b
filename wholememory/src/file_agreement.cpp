// Agreement between the ranks of a store or load (file_agreement.hpp).
#include "file_agreement.hpp"

#include "file_format.hpp"

#include <exception>
#include <sstream>
#include <stdexcept>

namespace wholememory::detail {

namespace {

// The exception type of a failed phase, sent along with its message so that every rank throws
// the type the failing rank threw.
enum class error_kind : char {
  none = 'o',
  logic = 'l',
  mismatch = 'm',
  system = 's',
  timeout = 't',
  cuda = 'c',
  memory = 'M',
  other = 'x',
};

std::pair<error_kind, std::string> describe(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const mismatch_error& e) {
    return {error_kind::mismatch, e.what()};
  } catch (const logic_error& e) {
    return {error_kind::logic, e.what()};
  } catch (const system_error& e) {
    return {error_kind::system, e.what()};
  } catch (const timeout_error& e) {
    return {error_kind::timeout, e.what()};
  } catch (const cuda_error& e) {
    return {error_kind::cuda, e.what()};
  } catch (const out_of_memory& e) {
    return {error_kind::memory, e.what()};
  } catch (const std::exception& e) {
    return {error_kind::other, e.what()};
  } catch (...) {
    return {error_kind::other, "an exception that is not a std::exception"};
  }
}

[[noreturn]] void throw_kind(error_kind kind, const std::string& message) {
  switch (kind) {
    case error_kind::mismatch:
      throw mismatch_error(message);
    case error_kind::logic:
      throw logic_error(message);
    case error_kind::system:
      throw system_error(message);
    case error_kind::timeout:
      throw timeout_error(message);
    case error_kind::cuda:
      throw cuda_error(message);
    case error_kind::memory:
      throw out_of_memory(message);
    default:
      throw std::runtime_error(message);
  }
}

}  // namespace

std::vector<std::string> agree(bootstrap& bs, const std::string& call, const std::string& phase,
                               const std::function<std::string()>& body) {
  std::string mine;
  try {
    mine = static_cast<char>(error_kind::none) + body();
  } catch (...) {
    auto [kind, message] = describe(std::current_exception());
    mine = static_cast<char>(kind) + message;
  }
  std::vector<std::string> all;
  try {
    all = bs.allgatherv(mine);
  } catch (const timeout_error& e) {
    WM_FAIL(timeout_error, call << ": the ranks did not all finish " << phase << ": " << e.what());
  }
  std::vector<int> failed;
  for (int r = 0; r < static_cast<int>(all.size()); ++r) {
    if (all[r].empty() || all[r][0] != static_cast<char>(error_kind::none)) failed.push_back(r);
  }
  if (!failed.empty()) {
    const std::string& first = all[failed[0]];
    std::ostringstream os;
    os << call << ": rank " << failed[0] << " failed " << phase << ": " << first.substr(1);
    if (failed.size() > 1) {
      os << " (" << failed.size() - 1 << " other rank" << (failed.size() > 2 ? "s" : "")
         << " failed too)";
    }
    const auto kind = first.empty() ? error_kind::other : static_cast<error_kind>(first[0]);
    throw_kind(kind, format_location(__FILE__, __LINE__, os.str()));
  }
  for (std::string& s : all) s.erase(0, 1);
  return all;
}

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
