/*
 * YAML configs for the wholestore subcommands.
 *
 * A subcommand declares its keys (dotted paths such as "memory.type") with a type and a
 * default; load_config reads the file, applies `--set key=value` overrides, and rejects
 * unknown keys and values of the wrong type with an error that names the key and, for keys
 * from the file, its line.  The same schema is the config reference: `wholestore <command>
 * --help` and docs/config.md are generated from it (help.hpp).
 */
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace wholememory {
class bootstrap;
}

namespace YAML {
class Emitter;
}

namespace wholestore::apps {

/// A config error: message names the key, and the file and line where it came from.
class config_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A usage error: the command line or a config does not fit what the command's help documents
/// (an unknown command, option or key, an option without its value, a value of the wrong
/// type).  The program exits with status 2 for it, with 1 for every other error.
class usage_error : public config_error {
 public:
  using config_error::config_error;
};

/// The names among `candidates` closest to `name` (all of those at the smallest distance), by
/// edit distance: an insertion, a deletion, a substitution or a swap of two neighbors counts 1;
/// a dotted key is also compared by its last part, plus 1 (`num_nodes` is 1 from
/// `gen.num_nodes`), and a name of 3 or more characters inside a candidate is 1 from it
/// (`memory.size` from `memory.size_mib`).  Empty when the smallest distance is more than a
/// quarter of the name's length (at least 1 allowed): a guess that far off would mislead.
std::vector<std::string> closest_names(const std::string& name,
                                       const std::vector<std::string>& candidates);

/// "; did you mean 'walk_length'?" ("'a' or 'b'", "'a', 'b' or 'c'") for closest_names, or ""
/// when none is close: the tail of every usage error about an unknown name (command, option,
/// config key).
std::string did_you_mean(const std::string& name, const std::vector<std::string>& candidates);

enum class value_kind { integer, number, boolean, string };

/// "integer", "number", "boolean" or "string": the type's name in help and docs.
const char* value_kind_name(value_kind kind);

/// One declared key.
struct config_key {
  std::string path;           ///< dotted path, e.g. "memory.size_mib"
  value_kind kind;            ///< the type its value must have
  std::string default_value;  ///< as text, parsed like a --set value
  std::string help;           ///< one line for the config reference
};

/// The values of a loaded config, all keys present (defaults filled in).
class config {
 public:
  std::int64_t get_int(const std::string& path) const;
  double get_number(const std::string& path) const;
  bool get_bool(const std::string& path) const;
  const std::string& get_string(const std::string& path) const;
  /// The integer at `path`, which must be >= `min`; else config_error naming the key, its
  /// value, where it came from and the minimum.
  std::int64_t get_int_at_least(const std::string& path, std::int64_t min) const;
  /// The number at `path`, which must be finite and > 0 (a size or a rate); else config_error
  /// as above.
  double get_positive_number(const std::string& path) const;
  /// The whole config as YAML text: nested mappings by the keys' dotted paths.
  std::string to_yaml() const;
  /// The same mapping written into `out` (a --report's `config:`).  The value of a string key
  /// that YAML would read as another type ("64", "true", "") is quoted.
  void emit_yaml(YAML::Emitter& out) const;

  std::map<std::string, std::string> values;  ///< path -> text of the value
  std::map<std::string, std::string> origin;  ///< path -> "file:line" or "--set" or "default"
  std::vector<config_key> schema;
};

/// Reads `file` (may be empty: defaults only), then applies `overrides` ("key=value").
/// Throws usage_error for an unknown key, a value of the wrong type or an override without
/// '=', config_error for a missing or malformed file.
///
/// A schema with a `timeout_s` key gets the timeout rule of every command: the value must be
/// a timeout (wholememory::parse_timeout_seconds, else config_error naming the key, where it
/// came from and the range), and $WHOLESTORE_TIMEOUT, when set, replaces it whatever its origin
/// (file, --set or default; `origin` then says "WHOLESTORE_TIMEOUT").  A bad variable throws
/// wholememory::logic_error naming it.
config load_config(const std::vector<config_key>& schema, const std::string& file,
                   const std::vector<std::string>& overrides);

/// The collective timeout of a config whose schema has `timeout_s`, after the rule above.
std::chrono::milliseconds collective_timeout(const config& cfg);

/// Collective over `bs`: every rank's effective config must match, key by key, except the keys
/// in `may_differ` (per-rank settings such as `threads` or `timeout_s`).  Values are compared
/// as parsed (64 and 064 agree, as do 0.5 and 5e-1).  Throws wholememory::logic_error on every
/// rank naming `command`, the first key that differs and which ranks hold which value, before
/// any shared structure is built.
void agree_on_config(wholememory::bootstrap& bs, const config& cfg, const std::string& command,
                     const std::vector<std::string>& may_differ);

/// Splits a subcommand's arguments into an optional config path, --set overrides and
/// --report <file>, or notes -h/--help (then nothing else is checked); throws usage_error on
/// anything else, an empty value of --report or of a `value_options` included.  The rank that
/// writes reports (rank 0, or a process without a launch environment) checks up front that the
/// --report file can be written (check_report_file).
///
/// `value_options` are a command's own options that take a value ("--plot" for `--plot FILE` or
/// `--plot=FILE`); they land in `options`, the last one given winning.
struct command_args {
  std::string config_file;
  std::vector<std::string> overrides;
  std::string report_file;
  std::map<std::string, std::string> options;  ///< value_options given: flag -> value
  bool help = false;  ///< -h or --help given: print the command's help and run nothing
};
command_args parse_command_args(int argc, char** argv,
                                const std::vector<std::string>& value_options = {});

/// True when -h or --help is among a config command's arguments (not as the value of --set,
/// --report or one of `value_options`).  Throws nothing.
bool asks_for_help(int argc, char** argv, const std::vector<std::string>& value_options = {});

/// The items of a `sep`-separated list, blanks around each trimmed, empty items dropped.
std::vector<std::string> split_list(const std::string& text, char sep);

/// Neighbors per hop from "15,10,5": each a positive count or -1 (all neighbors), at least
/// one.  Throws config_error quoting the bad item and naming `where` (key and origin) for an
/// empty, malformed, zero or negative item.
std::vector<int> parse_fanouts(const std::string& text, const std::string& where);

/// Counts from "16384,65536": each an integer in [1, max], at least one.  Throws config_error
/// quoting the bad item and naming `key` and `where` (its origin) for an empty, malformed or
/// out-of-range item.
std::vector<std::uint64_t> parse_counts(const std::string& text, const std::string& key,
                                        const std::string& where, std::uint64_t max);

}  // namespace wholestore::apps
