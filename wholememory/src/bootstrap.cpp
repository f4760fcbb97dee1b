// The parts of the bootstrap contract that do not depend on the transport: the default timeout,
// the base-class collectives built on allgather, the shared agreement check, agree() (every
// rank learns every rank's outcome of a phase), and reading the launch environment.
#include <wholememory/bootstrap.hpp>
#include <wholememory/error.hpp>

#include "bootstrap_rounds.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <sstream>
#include <stdexcept>
#include <tuple>
#include <utility>

namespace wholememory {

namespace {

constexpr const char* timeout_variable = "WHOLESTORE_TIMEOUT";
constexpr std::chrono::milliseconds fallback_timeout{300 * 1000};

// Groups ranks by the text describing what they passed: "ranks 0, 2 passed 8 bytes, rank 1
// passed 16 bytes".  Groups appear in the order of their first rank.
template <typename Describe>
std::string group_by_value(std::size_t size, Describe describe, const char* verb) {
  std::vector<std::pair<std::string, std::vector<int>>> groups;
  for (std::size_t r = 0; r < size; ++r) {
    std::string value = describe(r);
    auto it =
        std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == value; });
    if (it == groups.end()) {
      groups.push_back({value, {static_cast<int>(r)}});
    } else {
      it->second.push_back(static_cast<int>(r));
    }
  }
  std::string out;
  for (const auto& [value, ranks] : groups) {
    if (!out.empty()) out += ", ";
    out += detail::describe_ranks(ranks) + " " + verb + " " + value;
  }
  return out;
}

}  // namespace

std::string timeout_range_text() {
  return "a number of seconds in (0, " + std::to_string(max_timeout_seconds) + "]";
}

std::optional<std::chrono::milliseconds> parse_timeout_seconds(const std::string& text) {
  if (text.empty()) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const double seconds = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || *end != '\0' || errno == ERANGE || !std::isfinite(seconds) ||
      !(seconds > 0) || seconds > static_cast<double>(max_timeout_seconds)) {
    return std::nullopt;
  }
  // Round up so that a tiny positive timeout never becomes zero.
  return std::chrono::milliseconds(static_cast<std::int64_t>(std::ceil(seconds * 1000.0)));
}

std::optional<std::chrono::milliseconds> timeout_from_env() {
  const char* text = std::getenv(timeout_variable);
  if (text == nullptr) return std::nullopt;
  std::optional<std::chrono::milliseconds> timeout = parse_timeout_seconds(text);
  if (!timeout) {
    WM_FAIL(logic_error, "environment variable " << timeout_variable << "='" << text
                                                 << "' is not a valid timeout: expected "
                                                 << timeout_range_text());
  }
  return timeout;
}

std::chrono::milliseconds default_timeout() {
  return timeout_from_env().value_or(fallback_timeout);
}

// The base versions serve user-supplied bootstraps that only implement allgather.  They send
// the root along so that a disagreement fails on every rank instead of silently using
// different roots.
void bootstrap::broadcast(void* buffer, std::size_t bytes, int root) {
  const int n = size();
  const std::size_t slot = sizeof(std::int64_t) + bytes;
  std::vector<char> send(slot);
  std::int64_t my_root = root;
  std::memcpy(send.data(), &my_root, sizeof(my_root));
  if (bytes > 0) std::memcpy(send.data() + sizeof(my_root), buffer, bytes);
  std::vector<char> recv(slot * static_cast<std::size_t>(n));
  allgather(send.data(), recv.data(), slot);

  std::vector<detail::round_args> args(n);
  for (int r = 0; r < n; ++r) {
    args[r].op = detail::collective_op::broadcast;
    args[r].bytes = bytes;
    std::memcpy(&args[r].root, recv.data() + slot * r, sizeof(std::int64_t));
  }
  std::string error = detail::check_round(args);
  if (!error.empty()) WM_FAIL(mismatch_error, error);
  if (bytes > 0) std::memcpy(buffer, recv.data() + slot * root + sizeof(std::int64_t), bytes);
}

std::unique_ptr<bootstrap> bootstrap::subset(const std::vector<int>&) {
  WM_FAIL(logic_error, "this bootstrap cannot form a group of some ranks without the others");
}

void bootstrap::barrier() {
  char token = 0;
  std::vector<char> all(static_cast<std::size_t>(size()));
  allgather(&token, all.data(), 1);
}

std::vector<std::string> bootstrap::allgatherv(const std::string& mine) {
  const int n = size();
  std::uint64_t my_length = mine.size();
  std::vector<std::uint64_t> lengths(n);
  allgather(&my_length, lengths.data(), sizeof(my_length));
  // Pad every contribution to the longest one: the allgather underneath takes one size.
  std::uint64_t longest = *std::max_element(lengths.begin(), lengths.end());
  std::vector<std::string> out(n);
  if (longest == 0) return out;
  std::string send = mine;
  send.resize(longest, '\0');
  std::string recv(longest * static_cast<std::size_t>(n), '\0');
  allgather(send.data(), recv.data(), longest);
  for (int r = 0; r < n; ++r) out[r] = recv.substr(longest * r, lengths[r]);
  return out;
}

// ---- agree: the outcome of a phase on every rank ----

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
    throw_kind(kind, detail::format_location(__FILE__, __LINE__, os.str()));
  }
  for (std::string& s : all) s.erase(0, 1);
  return all;
}

void agree_on_values(bootstrap& bs, const std::string& call,
                     const std::vector<std::pair<std::string, std::string>>& values) {
  // key, value, key, value, ... each with its length in front.
  std::string mine;
  auto put = [&](const std::string& text) {
    const std::uint64_t n = text.size();
    mine.append(reinterpret_cast<const char*>(&n), sizeof(n));
    mine += text;
  };
  for (const auto& [key, value] : values) {
    put(key);
    put(value);
  }
  const std::vector<std::string> all = bs.allgatherv(mine);
  std::vector<std::vector<std::string>> fields(all.size());
  for (std::size_t r = 0; r < all.size(); ++r) {
    for (std::size_t at = 0; at + sizeof(std::uint64_t) <= all[r].size();) {
      std::uint64_t n = 0;
      std::memcpy(&n, all[r].data() + at, sizeof(n));
      at += sizeof(n);
      n = std::min<std::uint64_t>(n, all[r].size() - at);
      fields[r].push_back(all[r].substr(at, n));
      at += n;
    }
  }
  const std::size_t count =
      std::max_element(fields.begin(), fields.end(), [](const auto& a, const auto& b) {
        return a.size() < b.size();
      })->size();
  for (std::size_t i = 0; i < count; ++i) {
    auto field = [&](std::size_t r) {
      return i < fields[r].size() ? fields[r][i] : std::string("(nothing)");
    };
    bool same = true;
    for (std::size_t r = 1; r < all.size() && same; ++r) same = field(r) == field(0);
    if (same) continue;
    if (i % 2 == 0) {
      WM_FAIL(mismatch_error,
              call << ": the ranks check different settings: "
                   << group_by_value(
                          all.size(), [&](std::size_t r) { return "'" + field(r) + "'"; }, "has"));
    }
    // The keys up to here agreed, so rank 0 has key i - 1.
    WM_FAIL(mismatch_error,
            call << ": the ranks disagree on " << fields[0][i - 1] << ": "
                 << group_by_value(
                        all.size(), [&](std::size_t r) { return field(r); }, "has"));
  }
}

namespace detail {

const char* op_name(collective_op op) {
  switch (op) {
    case collective_op::connect:
      return "connect";
    case collective_op::allgather:
      return "allgather";
    case collective_op::broadcast:
      return "broadcast";
    case collective_op::barrier:
      return "barrier";
    case collective_op::post:
      return "mailbox post";
    case collective_op::fetch:
      return "mailbox fetch";
  }
  return "unknown";
}

void check_subset_members(const std::vector<int>& members, int rank, int size) {
  WM_EXPECTS(!members.empty(), "subset: the member list is empty");
  for (std::size_t i = 0; i < members.size(); ++i) {
    WM_EXPECTS(members[i] >= 0 && members[i] < size,
               "subset: member " << members[i] << " is not a rank of a group of " << size);
    WM_EXPECTS(i == 0 || members[i - 1] < members[i],
               "subset: members must be ascending and unique, got " << members[i - 1] << " before "
                                                                    << members[i]);
  }
  WM_EXPECTS(std::binary_search(members.begin(), members.end(), rank),
             "subset: rank " << rank << " called with a member list that does not contain it");
}

void check_job_token(const std::string& token, const std::string& what) {
  if (token.size() > max_job_token_bytes) {
    WM_FAIL(logic_error, what << " is " << token.size() << " bytes long: at most "
                              << max_job_token_bytes << " are accepted");
  }
  for (char c : token) {
    if (c <= ' ' || c > '~') {
      WM_FAIL(logic_error, what << " holds a blank, control or non-ASCII character: only "
                                   "printable ASCII without blanks is accepted");
    }
  }
}

std::string describe_ranks(const std::vector<int>& ranks) {
  std::string out = ranks.size() == 1 ? "rank " : "ranks ";
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(ranks[i]);
  }
  return out;
}

std::string check_round(const std::vector<round_args>& args) {
  const std::size_t n = args.size();
  if (n == 0) return {};
  const round_args& first = args[0];
  auto all_equal = [&](auto field) {
    return std::all_of(args.begin(), args.end(),
                       [&](const round_args& a) { return field(a) == field(first); });
  };
  std::ostringstream os;
  if (!all_equal([](const round_args& a) { return a.seq; })) {
    os << "ranks are at different collective calls: "
       << group_by_value(
              n, [&](std::size_t r) { return "#" + std::to_string(args[r].seq); }, "is at");
    return os.str();
  }
  if (!all_equal([](const round_args& a) { return a.op; })) {
    os << "collective #" << first.seq << ": "
       << group_by_value(
              n, [&](std::size_t r) { return std::string(op_name(args[r].op)); }, "called");
    return os.str();
  }
  const char* name = op_name(first.op);
  if (!all_equal([](const round_args& a) { return a.bytes; })) {
    os << name << " #" << first.seq << ": "
       << group_by_value(
              n, [&](std::size_t r) { return std::to_string(args[r].bytes) + " bytes"; }, "passed");
    return os.str();
  }
  if (!all_equal([](const round_args& a) { return a.root; })) {
    os << name << " #" << first.seq << ": "
       << group_by_value(
              n, [&](std::size_t r) { return "root " + std::to_string(args[r].root); }, "passed");
    return os.str();
  }
  if (first.op == collective_op::broadcast &&
      (first.root < 0 || first.root >= static_cast<std::int64_t>(n))) {
    os << name << " #" << first.seq << ": root " << first.root << " is out of range [0, " << n
       << ")";
    return os.str();
  }
  return {};
}

}  // namespace detail
}  // namespace wholememory
