#include "config.hpp"

#include "report.hpp"

#include <wholememory/bootstrap.hpp>

#include <yaml-cpp/yaml.h>
#if __has_include(<yaml-cpp/depthguard.h>)
#include <yaml-cpp/depthguard.h>  // yaml-cpp >= 0.7: DeepRecursion
#define WHOLESTORE_YAML_DEPTH_GUARD 1
#endif

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace wholestore::apps {

namespace {

// Edit distance with swaps of neighbors (optimal string alignment): "lenght" is 1 from
// "length".
std::size_t edit_distance(const std::string& a, const std::string& b) {
  const std::size_t n = a.size(), m = b.size();
  std::vector<std::vector<std::size_t>> d(n + 1, std::vector<std::size_t>(m + 1));
  for (std::size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= n; ++i) {
    for (std::size_t j = 1; j <= m; ++j) {
      d[i][j] = std::min(
          {d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[n][m];
}

const config_key& find_key(const std::vector<config_key>& schema, const std::string& path,
                           const std::string& where) {
  for (const auto& k : schema)
    if (k.path == path) return k;
  std::vector<std::string> known;
  for (const auto& k : schema) known.push_back(k.path);
  std::string hint = did_you_mean(path, known);
  if (hint.empty()) {
    for (const auto& k : known) hint += (hint.empty() ? " (known keys: " : ", ") + k;
    hint += ")";
  }
  throw usage_error(where + ": unknown key '" + path + "'" + hint);
}

const char* kind_name(value_kind kind) {
  switch (kind) {
    case value_kind::integer:
      return "an integer";
    case value_kind::number:
      return "a number";
    case value_kind::boolean:
      return "true or false";
    case value_kind::string:
      return "a string";
  }
  return "a value";
}

bool parse_int(const std::string& text, std::int64_t& out) {
  if (text.empty()) return false;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || *end != '\0') return false;
  out = v;
  return true;
}

bool parse_number(const std::string& text, double& out) {
  if (text.empty()) return false;
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (errno != 0 || *end != '\0') return false;
  out = v;
  return true;
}

bool parse_bool(const std::string& text, bool& out) {
  if (text == "true" || text == "yes" || text == "on") {
    out = true;
    return true;
  }
  if (text == "false" || text == "no" || text == "off") {
    out = false;
    return true;
  }
  return false;
}

void check_value(const config_key& key, const std::string& text, const std::string& where) {
  bool ok = true;
  std::int64_t i;
  double d;
  bool b;
  switch (key.kind) {
    case value_kind::integer:
      ok = parse_int(text, i);
      break;
    case value_kind::number:
      ok = parse_number(text, d);
      break;
    case value_kind::boolean:
      ok = parse_bool(text, b);
      break;
    case value_kind::string:
      ok = true;
      break;
  }
  if (!ok) {
    throw usage_error(where + ": key '" + key.path + "' must be " + kind_name(key.kind) +
                      ", got '" + text + "'");
  }
}

// Walks a YAML mapping, recording every scalar leaf under its dotted path.  A key given twice
// in one mapping is an error (YAML forbids it; a parser would silently keep one of the two).
void collect(const YAML::Node& node, const std::string& prefix, const std::string& file,
             const std::vector<config_key>& schema, config& out) {
  std::map<std::string, int> seen;  // key -> line
  for (auto it = node.begin(); it != node.end(); ++it) {
    std::string name = it->first.as<std::string>();
    std::string path = prefix.empty() ? name : prefix + "." + name;
    const int line = it->first.Mark().line + 1;
    std::string where = file + ":" + std::to_string(line);
    if (!seen.emplace(name, line).second) {
      throw config_error(where + ": key '" + path + "' is given twice (first on line " +
                         std::to_string(seen[name]) + ")");
    }
    YAML::Node value = it->second;  // a handle; the iterator yields a temporary pair
    if (value.IsMap()) {
      collect(value, path, file, schema, out);
      continue;
    }
    const config_key key = find_key(schema, path, where);
    if (!value.IsScalar()) {
      throw usage_error(where + ": key '" + path + "' must be " + kind_name(key.kind) + ", got a " +
                        (value.IsSequence() ? "list" : "null value"));
    }
    std::string text = value.Scalar();
    check_value(key, text, where);
    out.values[path] = text;
    out.origin[path] = where;
  }
}

// The timeout rule (load_config's comment, docs/reliability.md).  The config's own value is
// checked even when the variable replaces it: a bad file stays an error.
void apply_timeout_rule(config& c) {
  const std::string& text = c.values.at("timeout_s");
  if (!wholememory::parse_timeout_seconds(text)) {
    const std::string& from = c.origin.at("timeout_s");
    throw config_error("timeout_s '" + text + "' is not a valid timeout: expected " +
                       wholememory::timeout_range_text() + " (" +
                       (from == "--set" ? "--set timeout_s=" + text : from) + ")");
  }
  if (!wholememory::timeout_from_env()) return;
  c.values["timeout_s"] = std::getenv("WHOLESTORE_TIMEOUT");
  c.origin["timeout_s"] = "WHOLESTORE_TIMEOUT";
}

}  // namespace

std::vector<std::string> closest_names(const std::string& name,
                                       const std::vector<std::string>& candidates) {
  const std::size_t allowed = std::max<std::size_t>(1, name.size() / 4);
  std::size_t best = allowed + 1;
  std::vector<std::string> out;
  for (const std::string& c : candidates) {
    std::size_t d = edit_distance(name, c);
    const std::size_t dot = c.find_last_of('.');
    if (dot != std::string::npos) d = std::min(d, edit_distance(name, c.substr(dot + 1)) + 1);
    if (name.size() >= 3 && c.find(name) != std::string::npos) d = std::min<std::size_t>(d, 1);
    if (d < best) {
      best = d;
      out.clear();
    }
    if (d == best && std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
  }
  return out;
}

std::string did_you_mean(const std::string& name, const std::vector<std::string>& candidates) {
  const std::vector<std::string> close = closest_names(name, candidates);
  if (close.empty()) return "";
  std::string out = "; did you mean ";
  for (std::size_t i = 0; i < close.size(); ++i) {
    if (i > 0) out += i + 1 == close.size() ? " or " : ", ";
    out += "'" + close[i] + "'";
  }
  return out + "?";
}

const char* value_kind_name(value_kind kind) {
  switch (kind) {
    case value_kind::integer:
      return "integer";
    case value_kind::number:
      return "number";
    case value_kind::boolean:
      return "boolean";
    case value_kind::string:
      return "string";
  }
  return "value";
}

config load_config(const std::vector<config_key>& schema, const std::string& file,
                   const std::vector<std::string>& overrides) {
  config c;
  c.schema = schema;
  for (const auto& k : schema) {
    c.values[k.path] = k.default_value;
    c.origin[k.path] = "default";
  }
  if (!file.empty()) {
    struct stat st {};
    if (::stat(file.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      throw config_error(file + ": is a directory, not a config file");
    }
    std::ifstream in(file);
    if (!in) {
      throw config_error(file + ": cannot open the config file (" + std::strerror(errno) + ")");
    }
    YAML::Node root;
    try {
      root = YAML::Load(in);
#if defined(WHOLESTORE_YAML_DEPTH_GUARD)
    } catch (const YAML::DeepRecursion& e) {
      // yaml-cpp says "bad file" for this one (issue 36).
      throw config_error(file + ":" + std::to_string(e.mark.line + 1) +
                         ": malformed YAML: nested " + std::to_string(e.depth()) +
                         " levels deep, past the parser's limit (a config is a few levels of "
                         "keys)");
#endif
    } catch (const YAML::Exception& e) {
      throw config_error(file + ":" + std::to_string(e.mark.line + 1) +
                         ": malformed YAML: " + e.msg);
    }
    if (root.IsDefined() && !root.IsNull()) {
      if (!root.IsMap()) throw config_error(file + ": the top level must be a mapping of keys");
      collect(root, "", file, schema, c);
    }
  }
  for (const auto& o : overrides) {
    auto eq = o.find('=');
    if (eq == std::string::npos || eq == 0) {
      throw usage_error("--set " + o + ": expected key=value");
    }
    std::string path = o.substr(0, eq), text = o.substr(eq + 1);
    const config_key key = find_key(schema, path, "--set " + o);
    check_value(key, text, "--set " + o);
    c.values[path] = text;
    c.origin[path] = "--set";
  }
  if (c.values.count("timeout_s") != 0) apply_timeout_rule(c);
  return c;
}

std::chrono::milliseconds collective_timeout(const config& cfg) {
  // load_config checked the value; a config built by hand that was not checked fails here.
  auto timeout = wholememory::parse_timeout_seconds(cfg.values.at("timeout_s"));
  if (!timeout) {
    throw config_error("timeout_s '" + cfg.values.at("timeout_s") +
                       "' is not a valid timeout: expected " + wholememory::timeout_range_text());
  }
  return *timeout;
}

std::int64_t config::get_int(const std::string& path) const {
  std::int64_t v = 0;
  parse_int(values.at(path), v);
  return v;
}

double config::get_number(const std::string& path) const {
  double v = 0;
  parse_number(values.at(path), v);
  return v;
}

bool config::get_bool(const std::string& path) const {
  bool v = false;
  parse_bool(values.at(path), v);
  return v;
}

const std::string& config::get_string(const std::string& path) const { return values.at(path); }

std::int64_t config::get_int_at_least(const std::string& path, std::int64_t min) const {
  const std::int64_t v = get_int(path);
  if (v < min) {
    throw config_error(path + " must be >= " + std::to_string(min) + ", got " + std::to_string(v) +
                       " (" + origin.at(path) + ")");
  }
  return v;
}

double config::get_positive_number(const std::string& path) const {
  const double v = get_number(path);
  if (!std::isfinite(v) || !(v > 0)) {
    throw config_error(path + " must be a positive number, got '" + values.at(path) + "' (" +
                       origin.at(path) + ")");
  }
  return v;
}

namespace {
// Emits the keys under `prefix` (sorted, so a group's keys are adjacent) as nested mappings.
void emit_group(YAML::Emitter& out, const config& c, const std::string& prefix) {
  out << YAML::BeginMap;
  std::string last_group;
  for (auto it = c.values.lower_bound(prefix); it != c.values.end(); ++it) {
    if (it->first.compare(0, prefix.size(), prefix) != 0) break;
    std::string rest = it->first.substr(prefix.size());
    auto dot = rest.find('.');
    if (dot == std::string::npos) {
      out << YAML::Key << rest << YAML::Value;
      const auto key = std::find_if(c.schema.begin(), c.schema.end(),
                                    [&](const config_key& k) { return k.path == it->first; });
      if (key != c.schema.end() && key->kind == value_kind::string) {
        emit_text(out, it->second);
      } else {
        out << it->second;
      }
    } else if (rest.substr(0, dot) != last_group) {
      last_group = rest.substr(0, dot);
      out << YAML::Key << last_group << YAML::Value;
      emit_group(out, c, prefix + last_group + ".");
    }
  }
  out << YAML::EndMap;
}
}  // namespace

void config::emit_yaml(YAML::Emitter& out) const { emit_group(out, *this, ""); }

std::string config::to_yaml() const {
  YAML::Emitter out;
  emit_yaml(out);
  return out.c_str();
}

bool asks_for_help(int argc, char** argv, const std::vector<std::string>& value_options) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--set" || arg == "--report" ||
        std::find(value_options.begin(), value_options.end(), arg) != value_options.end()) {
      ++i;  // its value, whatever it looks like
    } else if (arg == "-h" || arg == "--help") {
      return true;
    }
  }
  return false;
}

command_args parse_command_args(int argc, char** argv,
                                const std::vector<std::string>& value_options) {
  command_args a;
  // Help first: `--bogus --help` shows the help rather than the error.
  if (asks_for_help(argc, argv, value_options)) {
    a.help = true;
    return a;
  }
  auto own_option = [&](const std::string& arg) -> const std::string* {
    for (const std::string& o : value_options)
      if (arg == o || arg.rfind(o + "=", 0) == 0) return &o;
    return nullptr;
  };
  // An empty file name would silently write nothing (--report '', --export ''): refused.
  auto value = [](const std::string& option, const std::string& text) {
    if (text.empty())
      throw usage_error(option +
                        " needs a value, got an empty one (give a file or directory name)");
    return text;
  };
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--set" || arg == "--report") {
      if (i + 1 >= argc) throw usage_error(arg + " needs a value");
      (arg == "--set" ? a.overrides.emplace_back(argv[++i])
                      : a.report_file = value("--report", argv[++i]));
    } else if (arg.rfind("--set=", 0) == 0) {
      a.overrides.push_back(arg.substr(6));
    } else if (arg.rfind("--report=", 0) == 0) {
      a.report_file = value("--report", arg.substr(9));
    } else if (const std::string* o = own_option(arg)) {
      if (arg == *o) {
        if (i + 1 >= argc) throw usage_error(arg + " needs a value");
        a.options[*o] = value(*o, argv[++i]);
      } else {
        a.options[*o] = value(*o, arg.substr(o->size() + 1));
      }
    } else if (!arg.empty() && arg[0] == '-') {
      std::vector<std::string> options = {"--set", "--report", "--help", "-h"};
      options.insert(options.end(), value_options.begin(), value_options.end());
      throw usage_error("unknown option '" + arg + "'" +
                        did_you_mean(arg.substr(0, arg.find('=')), options));
    } else if (a.config_file.empty()) {
      a.config_file = arg;
    } else {
      throw usage_error("more than one config file given ('" + a.config_file + "', '" + arg + "')");
    }
  }
  // Only rank 0 writes the report; another host's rank may not even have the directory.
  const char* rank = std::getenv("RANK");
  if (rank == nullptr) rank = std::getenv("OMPI_COMM_WORLD_RANK");
  if (!a.report_file.empty() && (rank == nullptr || std::strcmp(rank, "0") == 0)) {
    check_report_file(a.report_file);
  }
  return a;
}

std::vector<int> parse_fanouts(const std::string& text, const std::string& where) {
  std::vector<int> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    std::size_t used = 0;
    int v = 0;
    try {
      v = std::stoi(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size() || v == 0 || v < -1) {
      throw config_error("fanouts: '" + item + "' is not a positive count or -1 (" + where + ")");
    }
    out.push_back(v);
  }
  if (out.empty()) throw config_error("fanouts: at least one hop is needed (" + where + ")");
  return out;
}

void agree_on_config(wholememory::bootstrap& bs, const config& cfg, const std::string& command,
                     const std::vector<std::string>& may_differ) {
  std::vector<std::pair<std::string, std::string>> values;
  for (const auto& key : cfg.schema) {
    if (std::find(may_differ.begin(), may_differ.end(), key.path) != may_differ.end()) continue;
    std::string v = cfg.values.at(key.path);
    switch (key.kind) {
      case value_kind::integer:
        v = std::to_string(cfg.get_int(key.path));
        break;
      case value_kind::number: {
        char text[40];
        std::snprintf(text, sizeof text, "%.17g", cfg.get_number(key.path));
        v = text;
        break;
      }
      case value_kind::boolean:
        v = cfg.get_bool(key.path) ? "true" : "false";
        break;
      case value_kind::string:
        break;
    }
    values.emplace_back(key.path, v);
  }
  wholememory::agree_on_values(bs, command + ": the config of every rank must match", values);
}

std::vector<std::uint64_t> parse_counts(const std::string& text, const std::string& key,
                                        const std::string& where, std::uint64_t max) {
  std::vector<std::uint64_t> out;
  for (const auto& item : split_list(text, ',')) {
    std::size_t used = 0;
    unsigned long long v = 0;
    // stoull accepts a leading '-' (wrapping around): only digits are counts.
    if (item.find_first_not_of("0123456789") == std::string::npos) {
      try {
        v = std::stoull(item, &used);
      } catch (const std::exception&) {
        used = 0;
      }
    }
    if (used != item.size() || v < 1 || v > max) {
      throw config_error(key + ": '" + item + "' is not a count in [1, " + std::to_string(max) +
                         "] (" + where + ")");
    }
    out.push_back(v);
  }
  if (out.empty()) throw config_error(key + ": at least one value is needed (" + where + ")");
  return out;
}

std::vector<std::string> split_list(const std::string& text, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, sep)) {
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

}  // namespace wholestore::apps
