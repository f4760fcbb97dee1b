// The structural checks of a CSR (csr_check.hpp).
#include "csr_check.hpp"

#include <wholememory/error.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <sstream>
#include <type_traits>

namespace wholestore::graph::detail {

namespace {

// Elements checked per step: each step is a branch-free (vectorizable) scan, and only a step
// that holds a fault is scanned again to find where.
constexpr std::size_t step = 2048;

constexpr const char* rule = "rule 6 of docs/dataset-format.md";

constexpr std::size_t none_bad = static_cast<std::size_t>(-1);

/// The first i < count with bad(i), none_bad when there is none: steps of `step` elements are
/// scanned without branches, and only a step that holds a fault again to find where.
template <typename Bad>
std::size_t first_bad(std::size_t count, Bad bad) {
  for (std::size_t begin = 0; begin < count; begin += step) {
    const std::size_t end = std::min(count, begin + step);
    bool any = false;
    for (std::size_t i = begin; i < end; ++i) any |= bad(i);
    if (!any) continue;
    for (std::size_t i = begin; i < end; ++i)
      if (bad(i)) return i;
  }
  return none_bad;
}

class stopwatch {
 public:
  explicit stopwatch(std::atomic<std::uint64_t>& total)
      : total_(total), start_(std::chrono::steady_clock::now()) {}
  ~stopwatch() {
    total_ += static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                             std::chrono::steady_clock::now() - start_)
                                             .count());
  }
  stopwatch(const stopwatch&) = delete;
  stopwatch& operator=(const stopwatch&) = delete;

 private:
  std::atomic<std::uint64_t>& total_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace

csr_checker::csr_checker(std::string source, std::uint64_t num_nodes, std::uint64_t num_edges)
    : source_(std::move(source)), num_nodes_(num_nodes), num_edges_(num_edges) {}

void csr_checker::keep(array a, const fault& f) {
  if (f.what == kind::none) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (f.position < faults_[a].position) faults_[a] = f;
}

void csr_checker::row_offsets(const std::int64_t* values, std::uint64_t first, std::size_t count) {
  if (count == 0) return;
  stopwatch clock(nanoseconds_);
  const auto top = static_cast<std::uint64_t>(num_edges_);
  fault f;
  // values[i] as unsigned: a negative offset is above any edge count.
  auto bad = [&](std::size_t i) {
    return static_cast<std::uint64_t>(values[i]) > top || (i > 0 && values[i] < values[i - 1]);
  };
  if (const std::size_t i = first_bad(count, bad); i != none_bad) {
    f.position = first + i;
    f.value = values[i];
    if (static_cast<std::uint64_t>(values[i]) > top) {
      f.what = kind::offset_range;
    } else {
      f.what = kind::offset_decrease;
      f.previous = values[i - 1];
    }
  }
  if (f.what == kind::none || f.position > first) {
    // The ends are exact when the piece is clean; with a fault inside, finish() reports that
    // fault or an earlier one, so the ends are not needed.
    if (first == 0 && values[0] != 0 && static_cast<std::uint64_t>(values[0]) <= top) {
      f = fault{};
      f.position = 0;
      f.value = values[0];
      f.what = kind::offset_first;
    }
  }
  if (first + count == num_nodes_ + 1 && f.what == kind::none &&
      static_cast<std::uint64_t>(values[count - 1]) != top) {
    f.position = num_nodes_;
    f.value = values[count - 1];
    f.what = kind::offset_last;
  }
  keep(rows, f);
  std::lock_guard<std::mutex> lock(mutex_);
  pieces_.push_back(piece{first, count, values[0], values[count - 1]});
}

template <typename T>
void csr_checker::check_cols(const T* values, std::uint64_t first, std::size_t count) {
  if (count == 0) return;
  stopwatch clock(nanoseconds_);
  const std::uint64_t n = num_nodes_;
  // As unsigned 64-bit: a negative index is above any node count.
  auto bad = [&](std::size_t i) {
    return static_cast<std::uint64_t>(static_cast<std::int64_t>(values[i])) >= n;
  };
  if (const std::size_t i = first_bad(count, bad); i != none_bad) {
    fault f;
    f.position = first + i;
    f.value = static_cast<std::int64_t>(values[i]);
    f.what = kind::col_range;
    keep(cols, f);
  }
}

void csr_checker::col_indices(const std::int32_t* values, std::uint64_t first, std::size_t count) {
  check_cols(values, first, count);
}

void csr_checker::col_indices(const std::int64_t* values, std::uint64_t first, std::size_t count) {
  check_cols(values, first, count);
}

void csr_checker::edge_weights(const float* values, std::uint64_t first, std::size_t count) {
  if (count == 0) return;
  stopwatch clock(nanoseconds_);
  // Finite and >= 0: NaN fails both comparisons, so `!(w >= 0 && w <= max)` catches it.
  auto bad = [&](std::size_t i) {
    return !(values[i] >= 0.0f && values[i] <= std::numeric_limits<float>::max());
  };
  if (const std::size_t i = first_bad(count, bad); i != none_bad) {
    fault f;
    f.position = first + i;
    f.real_value = static_cast<double>(values[i]);
    f.what = kind::weight_value;
    keep(weights, f);
  }
}

std::string csr_checker::findings() const {
  std::lock_guard<std::mutex> lock(mutex_);
  static_assert(
      std::is_trivially_copyable<fault>::value && std::is_trivially_copyable<piece>::value,
      "findings are sent as bytes");
  std::string out(sizeof(faults_) + pieces_.size() * sizeof(piece), '\0');
  std::memcpy(out.data(), faults_, sizeof(faults_));
  if (!pieces_.empty()) {
    std::memcpy(out.data() + sizeof(faults_), pieces_.data(), pieces_.size() * sizeof(piece));
  }
  return out;
}

void csr_checker::merge(const std::string& findings) {
  WM_EXPECTS(findings.size() >= sizeof(faults_) &&
                 (findings.size() - sizeof(faults_)) % sizeof(piece) == 0,
             source_ << ": malformed CSR check findings from another rank (" << findings.size()
                     << " bytes)");
  fault theirs[num_arrays];
  std::memcpy(theirs, findings.data(), sizeof(theirs));
  std::vector<piece> pieces((findings.size() - sizeof(faults_)) / sizeof(piece));
  if (!pieces.empty()) {
    std::memcpy(pieces.data(), findings.data() + sizeof(faults_), pieces.size() * sizeof(piece));
  }
  for (std::uint32_t a = 0; a < num_arrays; ++a) keep(static_cast<array>(a), theirs[a]);
  std::lock_guard<std::mutex> lock(mutex_);
  pieces_.insert(pieces_.end(), pieces.begin(), pieces.end());
}

void csr_checker::finish(bool whole) const {
  fault first[num_arrays];
  std::vector<piece> pieces;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    std::copy(faults_, faults_ + num_arrays, first);
    pieces = pieces_;
  }
  std::sort(pieces.begin(), pieces.end(),
            [](const piece& a, const piece& b) { return a.first < b.first; });
  std::uint64_t covered = 0;
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    const piece& p = pieces[i];
    if (p.first != covered) break;
    covered = p.first + p.count;
    // A decrease from the last offset of one piece to the first of the next.
    if (i > 0 && p.first_value < pieces[i - 1].last_value && p.first < first[rows].position) {
      fault f;
      f.position = p.first;
      f.value = p.first_value;
      f.previous = pieces[i - 1].last_value;
      f.what = kind::offset_decrease;
      first[rows] = f;
    }
  }
  WM_EXPECTS(!whole || covered == num_nodes_ + 1,
             source_ << ": internal error: the checked pieces of row_offsets cover [0, " << covered
                     << ") of " << num_nodes_ + 1 << " offsets");
  for (std::uint32_t a = 0; a < num_arrays; ++a) {
    if (first[a].what != kind::none) {
      WM_FAIL(wholememory::logic_error, describe(first[a]));
    }
  }
}

std::string csr_checker::describe(const fault& f) const {
  std::ostringstream os;
  os << source_ << ": ";
  switch (f.what) {
    case kind::offset_first:
      os << "row_offsets[0] is " << f.value << ", must be 0";
      break;
    case kind::offset_range:
      os << "row_offsets[" << f.position << "] is " << f.value
         << ", outside [0, num_edges = " << num_edges_ << "]";
      break;
    case kind::offset_decrease:
      os << "row_offsets[" << f.position << "] is " << f.value << ", below row_offsets["
         << f.position - 1 << "] = " << f.previous << " (offsets never decrease)";
      break;
    case kind::offset_last:
      os << "row_offsets[num_nodes = " << f.position << "] is " << f.value
         << ", must equal num_edges = " << num_edges_;
      break;
    case kind::col_range:
      os << "col_indices[" << f.position << "] is " << f.value
         << ", outside [0, num_nodes = " << num_nodes_ << ")";
      break;
    case kind::weight_value:
      os << "edge_weights[" << f.position << "] is " << f.real_value << ", must be finite and >= 0";
      break;
    case kind::none:
      break;
  }
  os << " (" << rule << ")";
  return os.str();
}

void agree_on_findings(wholememory::bootstrap& bs, csr_checker& checker) {
  const std::vector<std::string> all = bs.allgatherv(checker.findings());
  for (int r = 0; r < static_cast<int>(all.size()); ++r) {
    if (r != bs.rank()) checker.merge(all[static_cast<std::size_t>(r)]);
  }
  checker.finish();
}

}  // namespace wholestore::graph::detail
