// The checkpoint directory's state file and the checks that make train the owner of its
// directory (checkpoint_state.hpp).
#include "checkpoint_state.hpp"

#include <wholememory/error.hpp>

#include <embedding/table.hpp>

#include <algorithm>
#include <charconv>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <system_error>

namespace wholestore::train::detail {

namespace wm = wholememory;

namespace {

// The shortest decimal text that reads back as `x` (a float or a double).
template <typename T>
std::string exact(T x) {
  char buf[64];
  for (int digits = 6; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, static_cast<double>(x));
    T back{};
    const auto r = std::from_chars(buf, buf + std::strlen(buf), back);
    if (r.ec == std::errc() && back == x) break;
  }
  return buf;
}

// A whole value of `text` in [lo, hi], nothing else around it.
template <typename T>
bool whole(const std::string& text, T lo, T hi, T& out) {
  const char* end = text.data() + text.size();
  const auto r = std::from_chars(text.data(), end, out);
  return r.ec == std::errc() && r.ptr == end && out >= lo && out <= hi;
}

// A finite number of `text` in [lo, hi].
bool number(const std::string& text, double lo, double hi, double& out) {
  const char* end = text.data() + text.size();
  const auto r = std::from_chars(text.data(), end, out);
  return r.ec == std::errc() && r.ptr == end && std::isfinite(out) && out >= lo && out <= hi;
}

constexpr int max_int = std::numeric_limits<int>::max();
constexpr std::uint64_t max_u64 = std::numeric_limits<std::uint64_t>::max();

// What a saved setting's value must be: "" when `value` is one, else what it must be.
std::string setting_rule(const std::string& name, const std::string& value) {
  double d = 0;
  std::uint64_t u = 0;
  int i = 0;
  if (name == "seed") return whole(value, std::uint64_t{0}, max_u64, u) ? "" : "a whole number";
  if (name == "batch_size")
    return whole(value, std::uint64_t{1}, max_u64, u) ? "" : "a whole number >= 1";
  if (name == "walk_length" || name == "window" || name == "walks_per_node" || name == "negatives")
    return whole(value, 1, max_int, i) ? "" : "a whole number in [1, 2147483647]";
  if (name == "lr" || name == "p" || name == "q")
    return number(value, std::numeric_limits<double>::min(), std::numeric_limits<double>::max(), d)
               ? ""
               : "a positive finite number";
  if (name == "min_lr_fraction") return number(value, 0, 1, d) ? "" : "a number in [0, 1]";
  if (name == "optimizer") {
    try {
      embedding::parse_optimizer(value);
      return "";
    } catch (const wm::logic_error&) {
      return "an optimizer's name";
    }
  }
  if (name == "negative_distribution")
    return value == "degree" || value == "uniform" ? "" : "degree or uniform";
  if (name == "schedule") return value == "global" || value == "blocks" ? "" : "global or blocks";
  if (name == "partitions") return whole(value, 0, max_int, i) ? "" : "a whole number >= 0";
  if (name == "block_steps") return whole(value, 0, max_int, i) ? "" : "a whole number >= 0";
  if (name == "block_batch")
    return whole(value, std::uint64_t{0}, max_u64, u) ? "" : "a whole number >= 0";
  return "?";
}

// Settings that format-2 states name since the blocks schedule came; older ones lack them.
bool added_in_format_2(const std::string& name) {
  return name == "schedule" || name == "partitions" || name == "block_steps" ||
         name == "block_batch";
}

// Parses state.txt's text; on a fault returns false with `why` naming the line.
bool parse_state(std::istream& in, saved_state& st, std::string& why) {
  const std::vector<std::pair<std::string, std::string>> names = saved_settings(train_settings{});
  std::vector<std::string> seen;
  std::string line;
  int number_of_line = 0;
  auto fault = [&](const std::string& what) {
    why = "line " + std::to_string(number_of_line) + ": " + what;
    return false;
  };
  while (std::getline(in, line)) {
    ++number_of_line;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    std::istringstream fields(line);
    std::string key;
    fields >> key;
    std::vector<std::string> values;
    for (std::string v; fields >> v;) values.push_back(v);
    if (key.size() < 2 || key.back() != ':') return fault("'" + line + "' is not 'key: value'");
    key.pop_back();
    if (seen.empty() && key != "format") return fault("the first line must be 'format: ...'");
    if (key != "curve") {
      if (std::find(seen.begin(), seen.end(), key) != seen.end())
        return fault("'" + key + "' given twice");
      seen.push_back(key);
    }
    const std::size_t want = key == "format" ? 2 : key == "curve" ? 7 : 1;
    if (values.size() != want)
      return fault("'" + key + ":' needs " + std::to_string(want) + " value(s), got " +
                   std::to_string(values.size()));
    const std::string& v = values[0];
    auto setting =
        std::find_if(names.begin(), names.end(), [&](const auto& n) { return n.first == key; });
    if (key == "format") {
      if (v != "wholestore-train" || (values[1] != "1" && values[1] != "2"))
        return fault("format '" + v + " " + values[1] + "' is not wholestore-train 1 or 2");
      st.format = values[1] == "1" ? 1 : 2;
    } else if (key == "epoch") {
      if (!whole(v, 1, max_int, st.epoch))
        return fault("epoch '" + v + "' is not a whole number in [1, 2147483647]");
    } else if (key == "nodes") {
      if (!whole(v, std::uint64_t{0}, max_u64, st.nodes))
        return fault("nodes '" + v + "' is not a whole number");
    } else if (key == "dim") {
      if (!whole(v, std::uint64_t{1}, max_u64, st.dim))
        return fault("dim '" + v + "' is not a whole number >= 1");
    } else if (key == "mode") {
      if (v != "deepwalk" && v != "node2vec" && v != "line")
        return fault("mode '" + v + "' is not deepwalk, node2vec or line");
      st.mode = v;
    } else if (key == "curve") {
      epoch_record e;
      int evaluated = 0;
      double loss = 0, auc = 0, hits = 0, secs = 0;
      const double huge = std::numeric_limits<double>::max();
      if (!whole(values[0], 1, max_int, e.epoch) || !number(values[1], 0, huge, loss) ||
          !whole(values[2], std::uint64_t{0}, max_u64, e.pairs) ||
          !whole(values[3], 0, 1, evaluated) || !number(values[4], 0, 1, auc) ||
          !number(values[5], 0, 1, hits) || !number(values[6], 0, huge, secs))
        return fault("'" + line +
                     "' is not 'curve: EPOCH LOSS PAIRS EVALUATED(0/1) ROC-AUC HITS SECONDS' "
                     "with a loss >= 0, scores in [0, 1] and seconds >= 0");
      if (e.epoch != static_cast<int>(st.curve.size()) + 1)
        return fault("curve of epoch " + values[0] + " where epoch " +
                     std::to_string(st.curve.size() + 1) + " comes next");
      e.loss = loss;
      e.evaluated = evaluated != 0;
      e.scores.auc = auc;
      e.scores.hits = hits;
      e.seconds = secs;
      st.curve.push_back(e);
    } else if (setting != names.end() && st.format >= 2) {
      const std::string rule = setting_rule(key, v);
      if (!rule.empty()) return fault(key + " '" + v + "' is not " + rule);
      st.settings.emplace_back(key, v);
    } else {
      return fault("unknown key '" + key + "'");
    }
  }
  ++number_of_line;  // what is missing is missing at the end
  if (seen.empty()) return fault("empty, no 'format: wholestore-train 2'");
  std::vector<std::string> required = {"epoch", "nodes", "dim", "mode"};
  if (st.format >= 2)
    for (const auto& n : names)
      if (!added_in_format_2(n.first)) required.push_back(n.first);
  for (const std::string& key : required)
    if (std::find(seen.begin(), seen.end(), key) == seen.end())
      return fault("no '" + key + ":' line");
  // A format-2 state written before the schedules came is of the global schedule.
  if (st.format >= 2)
    for (const auto& n : names)
      if (added_in_format_2(n.first) && std::find(seen.begin(), seen.end(), n.first) == seen.end())
        st.settings.emplace_back(n.first, n.first == "schedule" ? "global" : n.second);
  if (static_cast<int>(st.curve.size()) != st.epoch)
    return fault(std::to_string(st.curve.size()) + " curve line(s) for epoch " +
                 std::to_string(st.epoch) + " (one per epoch done)");
  // Back in saved_settings' order, whatever the file's.
  std::vector<std::pair<std::string, std::string>> ordered;
  for (const auto& n : names)
    for (const auto& kv : st.settings)
      if (kv.first == n.first) ordered.push_back(kv);
  st.settings = std::move(ordered);
  return true;
}

// read_state's work: false with `why` for a missing or damaged file.
bool load_state(const std::string& path, saved_state& st, std::string& why) {
  std::ifstream f(path);
  if (!f.good()) {
    why = "cannot be read";
    return false;
  }
  return parse_state(f, st, why);
}

}  // namespace

std::vector<std::pair<std::string, std::string>> saved_settings(const train_settings& s) {
  return {{"seed", std::to_string(s.seed)},
          {"lr", exact(s.lr)},
          {"min_lr_fraction", exact(s.min_lr_fraction)},
          {"optimizer", embedding::optimizer_name(s.optimizer.kind)},
          {"walk_length", std::to_string(s.walk_length)},
          {"window", std::to_string(s.window)},
          {"walks_per_node", std::to_string(s.walks_per_node)},
          {"p", exact(s.p)},
          {"q", exact(s.q)},
          {"negatives", std::to_string(s.negatives)},
          {"negative_distribution", s.negatives_by_degree ? "degree" : "uniform"},
          {"batch_size", std::to_string(s.batch_size)},
          {"schedule", train_schedule_name(s.schedule)},
          {"partitions", std::to_string(s.partitions)},
          {"block_steps", std::to_string(s.block_steps)},
          {"block_batch", std::to_string(s.block_batch)}};
}

void check_resume_settings(const std::string& dir, const saved_state& st, const train_settings& s) {
  for (const auto& [name, value] : saved_settings(s)) {
    for (const auto& [saved_name, saved_value] : st.settings) {
      // A lower learning rate is the way out of a diverged run (train_diverged's message):
      // allowed, the run then differs from an uninterrupted one.
      if (name == "lr" && saved_name == "lr" &&
          std::strtod(value.c_str(), nullptr) < std::strtod(saved_value.c_str(), nullptr))
        continue;
      WM_EXPECTS(saved_name != name || saved_value == value,
                 "resume: the checkpoint in "
                     << dir << " was trained with " << name << " " << saved_value
                     << ", this run has " << name << " " << value
                     << " (a resumed run ends with the same embeddings as one that never "
                        "stopped only with the same settings: resume with "
                     << name << " " << saved_value << ", or start a new run without --resume)");
    }
  }
}

void write_state(const std::string& dir, const saved_state& st) {
  std::ostringstream o;
  o << "format: wholestore-train 2\nepoch: " << st.epoch << "\nnodes: " << st.nodes
    << "\ndim: " << st.dim << "\nmode: " << st.mode << "\n";
  for (const auto& [name, value] : st.settings) o << name << ": " << value << "\n";
  char line[256];
  for (const epoch_record& e : st.curve) {
    std::snprintf(line, sizeof line, "curve: %d %.17g %" PRIu64 " %d %.17g %.17g %.17g\n", e.epoch,
                  e.loss, e.pairs, e.evaluated ? 1 : 0, e.scores.auc, e.scores.hits, e.seconds);
    o << line;
  }
  const std::string tmp = dir + "/state.txt.tmp";
  {
    std::ofstream f(tmp, std::ios::trunc);
    f << o.str();
    f.flush();
    WM_EXPECTS(f.good(), "checkpoint: cannot write " << tmp);
  }
  fs::rename(tmp, dir + "/state.txt");
}

saved_state read_state(const std::string& dir) {
  const std::string path = dir + "/state.txt";
  WM_EXPECTS(fs::exists(path), "resume: " << dir << " is not a train checkpoint (no state.txt)");
  saved_state st;
  std::string why;
  if (!load_state(path, st, why))
    WM_FAIL(wm::logic_error, "resume: " << path << " is not a train checkpoint state: " << why);
  return st;
}

std::string epoch_dir(const std::string& dir, int epoch) {
  return dir + "/epoch-" + std::to_string(epoch);
}

bool is_epoch_name(const std::string& name) {
  return name.size() > 6 && name.size() <= 6 + 10 && name.rfind("epoch-", 0) == 0 &&
         name.find_first_not_of("0123456789", 6) == std::string::npos;
}

bool is_our_epoch_dir(const fs::path& path) {
  std::error_code ec;
  if (!is_epoch_name(path.filename().string()) || !fs::is_directory(fs::symlink_status(path, ec)))
    return false;
  for (const auto& entry : fs::directory_iterator(path, ec)) {
    const std::string name = entry.path().filename().string();
    if (name != "input" && name != "output" && name.rfind("input.tmp-", 0) != 0 &&
        name.rfind("output.tmp-", 0) != 0)
      return false;
  }
  return !ec;
}

int claim_checkpoint_dir(const std::string& dir) {
  std::error_code ec;
  const fs::file_status st = fs::status(dir, ec);
  if (!fs::exists(st)) return 0;
  WM_EXPECTS(fs::is_directory(st), "checkpoint: " << dir << " is not a directory");
  bool has_state = false;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name == "state.txt") {
      has_state = true;
      continue;
    }
    WM_EXPECTS(name == "state.txt.tmp" || is_our_epoch_dir(entry.path()),
               "checkpoint: " << dir << " holds '" << name
                              << "', which train --checkpoint did not write; give a new or "
                                 "empty directory, or one of train's checkpoints (nothing "
                                 "was changed)");
  }
  WM_EXPECTS(!ec, "checkpoint: cannot list " << dir << ": " << ec.message());
  if (!has_state) return 0;
  saved_state saved;
  std::string why;
  if (!load_state(dir + "/state.txt", saved, why))
    WM_FAIL(wm::logic_error,
            "checkpoint: " << dir << "/state.txt is not a train checkpoint's state (" << why
                           << "); give a new or empty directory (nothing was "
                              "changed)");
  return saved.epoch;
}

}  // namespace wholestore::train::detail
