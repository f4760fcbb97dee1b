/*
 * The wholestore program's front: the table of commands, their help, the config reference and
 * the dispatch with its exit codes.
 *
 * Help and docs/config.md are rendered from each command's command_info (commands.hpp), whose
 * key lists are the schemas load_config validates against, so the reference cannot drift from
 * what the program accepts.  The table is a plain list of the commands' `*_command()`
 * functions, read after main starts: no static registration.
 *
 * Exit codes of the program: 0 success (help and version too), 1 error, 2 usage error (no
 * command or an unknown one, an unknown option or config key, a missing argument, an option
 * without its value, a value of the wrong type).  run_wholestore is the one place that turns
 * errors into codes; an unknown name is told with the closest known ones (did_you_mean,
 * config.hpp).
 */
#pragma once

#include "commands.hpp"

#include <string>
#include <vector>

namespace wholestore::apps {

/// Exit codes of the program and of every command.
inline constexpr int exit_success = 0;
inline constexpr int exit_error = 1;
inline constexpr int exit_usage = 2;

/// Every command, in the order of `wholestore help`: the workloads, then help and version.
const std::vector<const command_info*>& all_commands();

/// The command called `name`, or nullptr.
const command_info* find_command(const std::string& name);

/// "wholestore sample [CONFIG.yaml] [--set KEY=VALUE]... [--report FILE]".
std::string usage_line(const command_info& command);

/// `wholestore <command> --help`: what the command does, its usage, options, every config key
/// of every schema with type, default and meaning, examples and the exit codes; plain text
/// wrapped to 80 columns.
std::string command_help(const command_info& command);

/// `wholestore help`: the commands, one line each, the exit codes and the environment.
std::string overview();

/// docs/config.md: the reference of every command, as Markdown (`wholestore help --markdown`).
std::string config_reference_markdown();

/// What the program prints of an exception's message: without the "(file.cpp:123[, failed:
/// check])" groups the library appends for developers (kept with `keep_locations`,
/// WHOLESTORE_DEBUG=1), so a message wrapped by another layer does not show two; control bytes
/// (from hostile input echoed in a message) shown as \xNN, so none reaches the terminal raw.
std::string user_message(const std::string& what, bool keep_locations = false);

/// The program: dispatches argv[1] and turns exceptions into messages and exit codes.
int run_wholestore(int argc, char** argv);

/// `help` and `version`, as entries of the table.
const command_info& help_command();
const command_info& version_command();

}  // namespace wholestore::apps
