// Checkpoints of embedding tables over the memory layer's store/load: the metadata that names
// a table's shape, and its agreement among ranks before any byte changes.
#include <embedding/checkpoint.hpp>
#include <wholememory/bootstrap.hpp>
#include <wholememory/error.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace wholestore::embedding {

namespace wm = ::wholememory;

const char* const checkpoint_format = "wholestore-embedding";

namespace {

constexpr const char* format_version = "1";

std::string joined_state_names(const table& t) {
  std::string out;
  for (const auto& n : t.state_names()) out += (out.empty() ? "" : ",") + n;
  return out;
}

/// What a checkpoint says about the table it holds, besides the step.
std::map<std::string, std::string> shape_metadata(const table& t) {
  return {{"format", checkpoint_format},
          {"format_version", format_version},
          {"rows", std::to_string(t.rows())},
          {"dim", std::to_string(t.dim())},
          {"dtype", wm::dtype_name(t.dtype())},
          {"optimizer", optimizer_name(t.options().optimizer.kind)},
          {"state", joined_state_names(t)}};
}

/// The local check of load_checkpoint: the error, empty when the checkpoint fits `t`.
std::string check_fits(const table& t, const std::string& dir, std::uint64_t* step) {
  wm::stored_manifest m;
  try {
    m = wm::read_stored_manifest(dir);
  } catch (const wm::logic_error& e) {
    return e.what();
  }
  auto value = [&](const std::string& key) {
    auto it = m.metadata.find(key);
    return it == m.metadata.end() ? std::string("(missing)") : it->second;
  };
  if (value("format") != checkpoint_format)
    return dir + " is not an embedding checkpoint (format: " + value("format") + ")";
  if (value("format_version") != format_version)
    return dir + ": checkpoint format version " + value("format_version") +
           ", this build reads version " + format_version;
  for (const auto& [key, want] : shape_metadata(t)) {
    const std::string have = value(key);
    if (have != want)
      return dir + ": the checkpoint's " + key + " is " + have + ", the table's " + want;
  }
  const std::string s = value("step");
  char* end = nullptr;
  const unsigned long long v = std::strtoull(s.c_str(), &end, 10);
  if (s.empty() || end == nullptr || *end != '\0' || s[0] == '-')
    return dir + ": the checkpoint's step '" + s + "' is not a count";
  *step = v;
  return {};
}

/// Every rank learns every rank's error; all throw the first one (ranks see one directory, but
/// a rank on another host may see another file system).
void agree(wm::bootstrap& bs, const std::string& mine) {
  struct report {
    std::int32_t failed;
    char message[480];
  } r{};
  r.failed = mine.empty() ? 0 : 1;
  std::snprintf(r.message, sizeof(r.message), "%s", mine.c_str());
  std::vector<report> all(static_cast<std::size_t>(bs.size()));
  bs.allgather(&r, all.data(), sizeof(r));
  for (int p = 0; p < bs.size(); ++p) {
    if (!all[p].failed) continue;
    if (p == bs.rank()) throw wm::logic_error("load_checkpoint: " + mine);
    throw wm::logic_error("load_checkpoint: rank " + std::to_string(p) + ": " +
                          std::string(all[p].message));
  }
}

}  // namespace

void store_checkpoint(table& t, const std::string& dir, const wm::file_io_options& options,
                      wm::file_io_stats* stats) {
  WM_EXPECTS(static_cast<bool>(t), "store_checkpoint of an empty table");
  wm::file_io_options o = options;
  for (auto& [key, value] : shape_metadata(t)) o.metadata[key] = value;
  o.metadata["step"] = std::to_string(t.step());
  std::vector<wm::stored_array> arrays;
  for (const checkpoint_array& a : t.checkpoint_arrays()) arrays.push_back({a.name, a.memory});
  wm::store(arrays, dir, o, stats);
}

void load_checkpoint(table& t, const std::string& dir, const wm::file_io_options& options,
                     wm::file_io_stats* stats) {
  WM_EXPECTS(static_cast<bool>(t), "load_checkpoint into an empty table");
  std::uint64_t step = 0;
  agree(t.comm().get_bootstrap(), check_fits(t, dir, &step));
  std::vector<wm::loaded_array> arrays;
  for (const checkpoint_array& a : t.checkpoint_arrays()) arrays.push_back({a.name, a.memory});
  wm::load(arrays, dir, options, stats);
  t.set_step(step);
}

}  // namespace wholestore::embedding
