// The command table, help, the config reference and the dispatch (cli.hpp).
#include "cli.hpp"

#include "config.hpp"
#include "version.hpp"

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace wholestore::apps {

namespace {

/// WHOLESTORE_DEBUG=1: messages keep their source locations.
bool debug_messages() {
  const char* v = std::getenv("WHOLESTORE_DEBUG");
  return v != nullptr && std::string(v) == "1";
}

constexpr std::size_t terminal_width = 80;
constexpr std::size_t markdown_width = 100;

const char* const exit_status_text =
    "0 success, 1 error, 2 usage error (no command or an unknown one, an unknown option or "
    "config key, a missing argument, an option without its value, a value of the wrong type); "
    "nothing runs after a usage error, and an unknown name comes with the closest known "
    "ones.";

// What every command that takes a config accepts besides its keys: {flag, meaning}.
const std::vector<std::pair<std::string, std::string>> config_options = {
    {"CONFIG.yaml", "YAML file with the keys below (optional; absent keys take their default)"},
    {"--set KEY=VALUE", "set a key after the file (repeatable); KEY is the dotted path"},
    {"--report FILE",
     "rank 0 writes the run's figures, the `version:` block of `wholestore --version` and the "
     "effective config as YAML (a FILE that cannot be written is an error before the run)"},
    {"-h, --help", "this help"},
};

// What `--help` of a command with a `timeout_s` key says about the variable that replaces it.
const char* const timeout_environment_text =
    "`WHOLESTORE_TIMEOUT`=SECONDS, when set, replaces `timeout_s` wherever that came from (the "
    "file, `--set` or the default); both must be in (0, 31536000].";

// Environment variables the commands read: {name, meaning}.
const std::vector<std::pair<std::string, std::string>> environment = {
    {"`RANK`, `WORLD_SIZE`, `LOCAL_RANK`, `LOCAL_WORLD_SIZE`, `MASTER_ADDR`, `MASTER_PORT`",
     "set by `wholestore launch` and torchrun; read by `bootstrap_from_env`"},
    {"`OMPI_COMM_WORLD_RANK`, `_SIZE`, `_LOCAL_RANK`, `_LOCAL_SIZE`",
     "mpirun's; used when `RANK` is absent (address `MASTER_ADDR`/`MASTER_PORT`, default "
     "127.0.0.1:29500)"},
    {"`WHOLESTORE_JOB_TOKEN`",
     "the job's token (printable ASCII, no blanks, at most 128 bytes), the same on every rank: "
     "the bootstrap store refuses processes with another token, so a second job on the same "
     "`MASTER_PORT` fails alone. `wholestore launch` sets a fresh one; set it yourself when "
     "starting ranks by hand. Without it, ranks started by torchrun take `torchrun-` + "
     "`TORCHELASTIC_RUN_ID` (unless `none`) and ranks started by mpirun `mpirun-` + "
     "`PMIX_NAMESPACE` (or `OMPI_MCA_ess_base_jobid`); without any, a running job still refuses "
     "newcomers once all its ranks have connected"},
    {"`WHOLESTORE_RANKS`", "ranks `scripts/run.sh` starts (default: one per GPU, 2 without)"},
    {"`WHOLESTORE_DEBUG`",
     "`1`: error messages keep the library's source locations (`(file.cpp:123, failed: ...)`), "
     "which are left out otherwise"},
    {"`WHOLESTORE_TIMEOUT`",
     "collective timeout in seconds, in (0, 31536000]: when set, it replaces the `timeout_s` of "
     "every command's config (file, `--set` or default) and the library's default of 300 s; any "
     "other value (empty, 0, negative, nan, inf, text) is an error naming the variable"},
    {"`WHOLESTORE_CHECK_COLLECTIVES`",
     "`0` turns off the NCCL backend's per-call argument agreement check"},
    {"`WHOLESTORE_NCCL_NONBLOCKING`",
     "`1` keeps every NCCL collective on the non-blocking communicator, each enqueue polled "
     "(NCCL then launches every collective from a thread of its own: slower); unset or `0`: "
     "collectives run on a blocking child under a watchdog. Must be the same on every rank; any "
     "other value fails every rank"},
    {"`WHOLESTORE_SAMPLE_BY_OWNER`",
     "`1`: the sampler sends each node of a distributed graph to its owner, which samples it from "
     "its own memory (one exchange of requests and one of replies per hop); `0`: rows and "
     "columns are gathered through the exchange. Default: `1` (both samplers; an owner draws "
     "each request with the seed of the rank that sent it). Any other value fails every rank"},
    {"`WHOLESTORE_SAMPLE_PAD_KIB`",
     "the most KiB (0 to 4194304; unset: 32768) a served hop of a distributed graph may exchange "
     "per rank and direction when its requests and replies are sized by every rank's bound "
     "(no wait for counts: the hops after a call's first); larger hops, and every hop with 0, "
     "exchange their counts first. Must be the same on every rank"},
    {"`WHOLESTORE_GATHER_SLICES`",
     "the most slices (1 to 8; unset: 1) a rank proposes for a gather on distributed GPU memory, "
     "one per 32 MiB of rows it asks for: slice s + 1 is packed and slice s - 1 placed while "
     "slice s crosses (the largest proposal wins). 1 by default: 8 slices measured 6-17% slower "
     "below 4 KiB rows on two H100s (docs/benchmarks.md)"},
    {"`WHOLESTORE_GATHER_PEER`",
     "`1` (unset): gathers on distributed memory whose ranks share one host (and, on the CPU "
     "path, scatters) move their rows through buffers every rank maps, kept with the table (as "
     "large as its largest call's "
     "rows): on the GPU path owners write the rows asked of them straight into the asking "
     "rank's buffer; on the CPU path, once some rank moves 32 MiB, so do gather_host's owners, "
     "and scatter_host's senders pack into their own buffers for the owners to read. `0`: the "
     "rows go through the communicator's exchange and no buffer is kept (a `0` on any rank "
     "keeps the exchange on all). Read at every call; any other value fails every rank"},
};

// ---- text ------------------------------------------------------------------------------------

std::vector<std::string> paragraphs(const std::string& text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find("\n\n", start);
    if (end == std::string::npos) end = text.size();
    if (end > start) out.push_back(text.substr(start, end - start));
    start = end + 2;
  }
  return out;
}

// Markdown inline text for a terminal: `code` loses its backticks, [text](target) keeps text.
std::string plain(const std::string& text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '`') continue;
    if (c == '[') {
      const std::size_t close = text.find("](", i);
      const std::size_t end = close == std::string::npos ? close : text.find(')', close);
      if (end != std::string::npos && text.find('[', i + 1) > close) {
        out += text.substr(i + 1, close - i - 1);
        i = end;
        continue;
      }
    }
    out += c;
  }
  return out;
}

// True when a Markdown line may start with `word` and still continue a paragraph: not a list
// item, heading, quote or table marker.
bool markdown_line_start_ok(const std::string& word) {
  if (word == "-" || word == "+" || word == "*" || word[0] == '#' || word[0] == '>' ||
      word[0] == '|' || word[0] == '=')
    return false;
  std::size_t digits = 0;
  while (digits < word.size() && std::isdigit(static_cast<unsigned char>(word[digits]))) ++digits;
  return !(digits > 0 && digits + 1 == word.size() && (word.back() == '.' || word.back() == ')'));
}

// Words of `text` filled into lines of at most `width` columns (a longer word gets a line of
// its own), the first line starting with `first`, the others with `rest`.  For Markdown, a
// word that would turn its line into a list item or heading stays on the line before.
std::string wrap(const std::string& text, std::size_t width, const std::string& first,
                 const std::string& rest, bool markdown = false) {
  std::istringstream words(text);
  std::string out = first, word;
  std::size_t column = first.size();
  bool line_empty = true;
  while (words >> word) {
    if (!line_empty && column + 1 + word.size() > width &&
        (!markdown || markdown_line_start_ok(word))) {
      out += "\n" + rest;
      column = rest.size();
      line_empty = true;
    }
    if (!line_empty) {
      out += ' ';
      ++column;
    }
    out += word;
    column += word.size();
    line_empty = false;
  }
  return out + "\n";
}

std::string wrap_plain(const std::string& text, const std::string& indent = "") {
  std::string out;
  for (const auto& p : paragraphs(text))
    out += (out.empty() ? "" : "\n") + wrap(plain(p), terminal_width, indent, indent);
  return out;
}

std::string wrap_markdown(const std::string& text) {
  std::string out;
  for (const auto& p : paragraphs(text))
    out += (out.empty() ? "" : "\n") + wrap(p, markdown_width, "", "", true);
  return out;
}

std::string shown_default(const config_key& key) {
  return key.default_value.empty() ? "\"\"" : key.default_value;
}

std::string markdown_cell(const std::string& text) {
  std::string out;
  for (char c : text) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

std::string padded(const std::string& text, std::size_t width) {
  return text.size() >= width ? text + " " : text + std::string(width - text.size(), ' ');
}

// ---- the help and version commands -------------------------------------------------------------

// "unknown command 'trian'; did you mean 'train'?": a name that starts with '-' is compared
// with `options`, any other with the commands' names.
std::string unknown_command_message(const std::string& name,
                                    const std::vector<std::string>& options) {
  std::vector<std::string> names;
  if (!name.empty() && name[0] == '-') {
    names = options;
  } else {
    for (const command_info* c : all_commands()) names.push_back(c->name);
  }
  return (!name.empty() && name[0] == '-' ? "unknown option '" : "unknown command '") + name + "'" +
         did_you_mean(name, names);
}

int run_help(int argc, char** argv) {
  if (argc == 1) {
    std::fputs(overview().c_str(), stdout);
    return exit_success;
  }
  if (argc > 2) throw usage_error("one command or --markdown expected");
  const std::string what = argv[1];
  if (what == "--markdown") {
    std::fputs(config_reference_markdown().c_str(), stdout);
    return exit_success;
  }
  const command_info* command = find_command(what);
  if (command == nullptr) throw usage_error(unknown_command_message(what, {"--markdown"}));
  std::fputs(command_help(*command).c_str(), stdout);
  return exit_success;
}

int run_version(int argc, char** argv) {
  if (argc == 2 && std::string(argv[1]) == "--yaml") {
    std::fputs(version_yaml().c_str(), stdout);
    return exit_success;
  }
  if (argc > 1) {
    throw usage_error("unknown argument '" + std::string(argv[1]) + "'" +
                      did_you_mean(argv[1], {"--yaml"}));
  }
  std::fputs(version_text().c_str(), stdout);
  return exit_success;
}

// -h/--help as the first argument, or anywhere among a config command's options.
bool wants_help(const command_info& command, int argc, char** argv) {
  if (argc > 1 && (std::string(argv[1]) == "-h" || std::string(argv[1]) == "--help")) return true;
  return !command.configs.empty() && asks_for_help(argc, argv);
}

}  // namespace

const command_info& help_command() {
  static const command_info info{
      "help",
      "the commands, one command's help, or the config reference",
      "[COMMAND | --markdown]",
      "Without an argument, lists the commands. With a command's name, prints that command's "
      "help, the same as `wholestore COMMAND --help`: what it does, its usage, every config key "
      "with type, default and meaning, and examples. With `--markdown`, prints this reference "
      "(docs/config.md) for every command.",
      {},
      {"wholestore help sample", "wholestore help --markdown > docs/config.md"},
      run_help};
  return info;
}

const command_info& version_command() {
  static const command_info info{
      "version",
      "version, build and the GPUs seen (also `wholestore --version`)",
      "[--yaml]",
      "Prints the version, the git commit built from (`-dirty`: with uncommitted changes to "
      "tracked files), the build type and compiler, whether CUDA and NCCL are compiled in, "
      "their versions and the CUDA architectures, and at run time the CUDA driver, runtime and "
      "NCCL library loaded and the GPUs visible. `--yaml` prints the same as the `version:` "
      "mapping every `--report` file carries, so every figure says what produced it.",
      {},
      {"wholestore --version", "wholestore version --yaml"},
      run_version};
  return info;
}

const std::vector<const command_info*>& all_commands() {
  static const std::vector<const command_info*> table = {
      &sample_command(), &train_command(),   &demo_command(), &bench_command(),
      &gen_command(),    &convert_command(), &info_command(), &launch_command(),
      &help_command(),   &version_command()};
  return table;
}

const command_info* find_command(const std::string& name) {
  for (const command_info* c : all_commands())
    if (c->name == name) return c;
  return nullptr;
}

std::string usage_line(const command_info& command) {
  std::string args = command.usage;
  if (args.empty() && !command.configs.empty())
    args = "[CONFIG.yaml] [--set KEY=VALUE]... [--report FILE]";
  return "wholestore " + command.name + (args.empty() ? "" : " " + args);
}

std::string command_help(const command_info& command) {
  std::string out = "wholestore " + command.name + ": " + plain(command.summary) + "\n\n";
  out += "usage: " + usage_line(command) + "\n\n";
  out += wrap_plain(command.description);
  if (!command.configs.empty()) {
    out += "\noptions:\n";
    for (const auto& [flag, meaning] : config_options)
      out += wrap(plain(meaning), terminal_width, "  " + padded(flag, 18), std::string(20, ' '));
  }
  for (const config_section& section : command.configs) {
    out += "\nconfig keys";
    if (!section.heading.empty()) out += ", " + plain(section.heading);
    out += " (" + section.config_file + "):\n";
    if (!section.intro.empty()) out += wrap_plain(section.intro, "  ") + "\n";
    for (const config_key& key : *section.keys) {
      out += "  " + key.path + "  " + value_kind_name(key.kind) + ", default " +
             shown_default(key) + "\n";
      out += wrap(plain(key.help), terminal_width, "      ", "      ");
    }
    if (!section.notes.empty()) out += "\n" + wrap_plain(section.notes, "  ");
  }
  bool has_timeout = false;
  for (const config_section& section : command.configs)
    for (const config_key& key : *section.keys) has_timeout |= key.path == "timeout_s";
  if (has_timeout) {
    out += "\n" + wrap(plain(timeout_environment_text), terminal_width, "environment: ", "  ");
  }
  if (!command.examples.empty()) {
    out += "\nexamples:\n";
    for (const auto& e : command.examples) out += "  " + e + "\n";
  }
  out += "\n" + wrap(exit_status_text, terminal_width, "exit status: ", "  ");
  return out;
}

std::string overview() {
  std::string out =
      "usage: wholestore COMMAND [ARGS...]\n"
      "       wholestore COMMAND --help     what COMMAND does, its options and config keys\n"
      "       wholestore --version\n\ncommands:\n";
  for (const command_info* c : all_commands())
    out +=
        wrap(plain(c->summary), terminal_width, "  " + padded(c->name, 10), std::string(12, ' '));
  out += "\n" + wrap_plain(
                    "Commands with a config take [CONFIG.yaml] [--set KEY=VALUE]... [--report "
                    "FILE]. `wholestore help --markdown` prints the reference of every command "
                    "(docs/config.md), environment variables included.");
  out += "\n" + wrap(exit_status_text, terminal_width, "exit status: ", "  ");
  return out;
}

std::string config_reference_markdown() {
  std::string out =
      "# Config reference\n\n"
      "<!-- Generated by `wholestore help --markdown` from the commands' schemas and texts in "
      "apps/*.cpp; do not edit by hand. After changing them: build/apps/wholestore help "
      "--markdown > docs/config.md (the help.cli test fails while the two differ). -->\n\n";
  out += wrap_markdown(
      "Every command that takes a config reads one YAML file (optional) and `--set key=value` "
      "overrides, applied after the file. Keys are dotted paths into the YAML mapping "
      "(`memory.type` is `type:` under `memory:`). An unknown key, a value of the wrong type or "
      "malformed YAML is an error that names the key and the file line; nothing runs. "
      "`wholestore COMMAND --help` prints the part of this page that concerns COMMAND.\n\n"
      "Common flags: `--set key=value` (repeatable), `--report FILE` (rank 0 writes the run's "
      "figures, the `version:` block of `wholestore version --yaml` and the effective config as "
      "YAML; a FILE that cannot be written is an error before the run), `-h`/`--help`.");
  out += "\n" + wrap_markdown(std::string("Exit status of every command: ") + exit_status_text);
  for (const command_info* c : all_commands()) {
    out += "\n## `wholestore " + c->name + "`";
    if (c->configs.size() == 1) out += " (" + c->configs[0].config_file + ")";
    out += "\n\n" + wrap_markdown(c->description);
    out += "\nUsage: `" + usage_line(*c) + "`\n";
    for (const config_section& section : c->configs) {
      if (!section.heading.empty()) {
        out += "\n### " + section.heading + " (" + section.config_file + ")\n";
      }
      if (!section.intro.empty()) out += "\n" + wrap_markdown(section.intro);
      out += "\n| key | type | default | meaning |\n| --- | --- | --- | --- |\n";
      for (const config_key& key : *section.keys) {
        out += "| `" + key.path + "` | " + value_kind_name(key.kind) + " | `" + shown_default(key) +
               "` | " + markdown_cell(key.help) + " |\n";
      }
      if (!section.notes.empty()) out += "\n" + wrap_markdown(section.notes);
    }
    if (!c->examples.empty()) {
      out += "\nExamples:\n\n```sh\n";
      for (const auto& e : c->examples) out += e + "\n";
      out += "```\n";
    }
  }
  out += "\n## Environment\n\n| variable | meaning |\n| --- | --- |\n";
  for (const auto& [name, meaning] : environment)
    out += "| " + markdown_cell(name) + " | " + markdown_cell(meaning) + " |\n";
  return out;
}

namespace {

/// Whether s[at...] is "name.ext:digits" followed by ')' or ", failed: " (a location group's
/// inside, as wholememory::detail::format_location writes it).
bool location_at(const std::string& s, std::size_t at) {
  std::size_t i = at;
  while (i < s.size() && (std::isalnum(static_cast<unsigned char>(s[i])) || s[i] == '_' ||
                          s[i] == '-' || s[i] == '.'))
    ++i;
  const std::string name = s.substr(at, i - at);
  const bool source =
      name.size() > 2 &&
      (name.rfind(".cpp") == name.size() - 4 || name.rfind(".hpp") == name.size() - 4 ||
       name.rfind(".cu") == name.size() - 3 || name.rfind(".cuh") == name.size() - 4 ||
       name.rfind(".h") == name.size() - 2);
  if (!source || i >= s.size() || s[i] != ':') return false;
  const std::size_t digits = ++i;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
  return i > digits && i < s.size() && (s[i] == ')' || s.compare(i, 10, ", failed: ") == 0);
}

}  // namespace

std::string user_message(const std::string& what, bool keep_locations) {
  std::string out;
  out.reserve(what.size());
  for (std::size_t i = 0; i < what.size();) {
    if (!keep_locations && what[i] == ' ' && i + 1 < what.size() && what[i + 1] == '(' &&
        location_at(what, i + 2)) {
      // Skip to the group's own closing parenthesis (a failed check may hold parentheses).
      std::size_t j = i + 1;
      int depth = 0;
      for (; j < what.size(); ++j) {
        if (what[j] == '(') ++depth;
        if (what[j] == ')' && --depth == 0) break;
      }
      if (j < what.size()) {
        i = j + 1;
        continue;
      }
    }
    const auto c = static_cast<unsigned char>(what[i]);
    if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", c);
      out += escaped;
    } else {
      out += what[i];
    }
    ++i;
  }
  return out;
}

int run_wholestore(int argc, char** argv) {
  if (argc < 2) {
    std::fputs(overview().c_str(), stderr);
    return exit_usage;
  }
  std::string name = argv[1];
  if (name == "-h" || name == "--help") name = "help";
  if (name == "--version") name = "version";
  const command_info* command = find_command(name);
  if (command == nullptr) {
    const std::string what = unknown_command_message(name, {"--help", "-h", "--version"});
    std::fprintf(stderr, "wholestore: %s%s 'wholestore help' lists the commands\n",
                 user_message(what).c_str(), what.back() == '?' ? "" : ";");
    return exit_usage;
  }
  try {
    if (wants_help(*command, argc - 1, argv + 1)) {
      std::fputs(command_help(*command).c_str(), stdout);
      return exit_success;
    }
    return command->run(argc - 1, argv + 1);
  } catch (const usage_error& e) {
    std::fprintf(stderr, "wholestore %s: %s\nusage: %s\nsee 'wholestore %s --help'\n", name.c_str(),
                 user_message(e.what(), debug_messages()).c_str(), usage_line(*command).c_str(),
                 name.c_str());
    return exit_usage;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "wholestore %s: error: %s\n", name.c_str(),
                 user_message(e.what(), debug_messages()).c_str());
    return exit_error;
  }
}

}  // namespace wholestore::apps
