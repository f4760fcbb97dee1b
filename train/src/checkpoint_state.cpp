// The checkpoint directory's state file and the checks that make train the owner of its
// directory (checkpoint_state.hpp).
#include "checkpoint_state.hpp"

#include <wholememory/error.hpp>

#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <system_error>

namespace wholestore::train::detail {

namespace wm = wholememory;

void write_state(const std::string& dir, const saved_state& st) {
  std::ostringstream o;
  o << "format: wholestore-train 1\nepoch: " << st.epoch << "\nnodes: " << st.nodes
    << "\ndim: " << st.dim << "\nmode: " << st.mode << "\n";
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
  std::ifstream f(path);
  WM_EXPECTS(f.good(), "resume: " << dir << " is not a train checkpoint (no state.txt)");
  saved_state st;
  std::string line;
  bool format_ok = false;
  while (std::getline(f, line)) {
    std::istringstream in(line);
    std::string key;
    in >> key;
    if (key == "format:") {
      std::string name, version;
      in >> name >> version;
      format_ok = name == "wholestore-train" && version == "1";
    } else if (key == "epoch:") {
      in >> st.epoch;
    } else if (key == "nodes:") {
      in >> st.nodes;
    } else if (key == "dim:") {
      in >> st.dim;
    } else if (key == "mode:") {
      in >> st.mode;
    } else if (key == "curve:") {
      epoch_record e;
      int evaluated = 0;
      in >> e.epoch >> e.loss >> e.pairs >> evaluated >> e.scores.auc >> e.scores.hits >> e.seconds;
      e.evaluated = evaluated != 0;
      st.curve.push_back(e);
    }
  }
  WM_EXPECTS(format_ok && st.epoch >= 1, "resume: " << path << " is not a train checkpoint state");
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
  try {
    return read_state(dir).epoch;
  } catch (const wm::logic_error&) {
    WM_FAIL(wm::logic_error, "checkpoint: " << dir
                                            << "/state.txt is not a train checkpoint's state; give "
                                               "a new or empty directory (nothing was changed)");
  }
}

}  // namespace wholestore::train::detail
