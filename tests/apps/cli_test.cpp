// The command table against the schemas: every command's help and the config reference list
// every key of every schema (bench: all three suites) with its type and default, the shipped
// configs and the examples are accepted by the schemas they document, usage errors are told
// apart from other errors, and the version block is YAML with the fields reports rely on.
#include "cli.hpp"
#include "commands.hpp"
#include "config.hpp"
#include "version.hpp"

#include <wholememory/bootstrap.hpp>
#include <wholememory/device.hpp>

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

namespace {

using namespace wholestore::apps;

const std::string source_dir = WHOLESTORE_SOURCE_DIR;

std::vector<std::string> words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

std::string shown_default(const config_key& key) {
  return key.default_value.empty() ? "\"\"" : key.default_value;
}

TEST(CommandTable, NamesAreUniqueAndFound) {
  const auto& commands = all_commands();
  ASSERT_GE(commands.size(), 9u);
  for (const command_info* c : commands) {
    EXPECT_EQ(find_command(c->name), c) << c->name;
    EXPECT_FALSE(c->summary.empty()) << c->name;
    EXPECT_FALSE(c->description.empty()) << c->name;
    EXPECT_FALSE(c->examples.empty()) << c->name;
    EXPECT_NE(c->run, nullptr) << c->name;
    for (const config_section& s : c->configs) {
      ASSERT_NE(s.keys, nullptr) << c->name;
      EXPECT_FALSE(s.keys->empty()) << c->name;
    }
  }
  EXPECT_EQ(find_command("nosuch"), nullptr);
  for (const char* name :
       {"sample", "demo", "bench", "gen", "convert", "info", "launch", "help", "version"})
    EXPECT_NE(find_command(name), nullptr) << name;
}

// The help of every command names every key of every one of its schemas, with type and
// default, in the schema's order; and its usage line and examples.
TEST(CommandHelp, ListsEverySchemaKey) {
  for (const command_info* c : all_commands()) {
    const std::string help = command_help(*c);
    EXPECT_NE(help.find("usage: " + usage_line(*c) + "\n"), std::string::npos) << c->name;
    for (const auto& e : c->examples) EXPECT_NE(help.find("  " + e + "\n"), std::string::npos);
    EXPECT_NE(help.find("exit status: 0 success, 1 error, 2 usage error"), std::string::npos);
    for (const config_section& s : c->configs) {
      std::size_t at = help.find(s.config_file);
      ASSERT_NE(at, std::string::npos) << c->name << ": " << s.config_file;
      for (const config_key& key : *s.keys) {
        const std::string line = "\n  " + key.path + "  " + value_kind_name(key.kind) +
                                 ", default " + shown_default(key) + "\n";
        const std::size_t found = help.find(line, at);
        EXPECT_NE(found, std::string::npos) << c->name << " " << s.heading << ": " << key.path;
        if (found != std::string::npos) at = found;
      }
    }
  }
}

TEST(CommandHelp, BenchCoversEverySuite) {
  const command_info& bench = *find_command("bench");
  ASSERT_EQ(bench.configs.size(), 4u);
  const std::string help = command_help(bench);
  for (const char* suite : {"gather", "sample", "embedding", "symmetric"}) {
    EXPECT_NE(help.find(std::string("config keys, suite ") + suite), std::string::npos) << suite;
  }
  EXPECT_EQ(bench.configs[1].keys, &bench_sample_keys());
  EXPECT_EQ(bench.configs[2].keys, &bench_embedding_keys());
  EXPECT_EQ(bench.configs[3].keys, &bench_symmetric_keys());
  // Each suite's schema knows `suite`, with the suite's own name as default.
  const char* names[] = {"gather", "sample", "embedding", "symmetric"};
  for (int i = 0; i < 4; ++i) {
    const config c = load_config(*bench.configs[i].keys, "", {});
    EXPECT_EQ(c.get_string("suite"), names[i]);
  }
}

TEST(ConfigReference, HasATableRowForEverySchemaKey) {
  const std::string md = config_reference_markdown();
  for (const command_info* c : all_commands()) {
    EXPECT_NE(md.find("\n## `wholestore " + c->name + "`"), std::string::npos) << c->name;
    for (const config_section& s : c->configs) {
      for (const config_key& key : *s.keys) {
        const std::string row = "| `" + key.path + "` | " + value_kind_name(key.kind) + " | `" +
                                shown_default(key) + "` | ";
        EXPECT_NE(md.find(row), std::string::npos) << c->name << ": " << row;
      }
    }
  }
}

// Markdown lines never start a list or heading by accident of wrapping, and stay within 100
// columns unless they are table rows, code or a single long word.
TEST(ConfigReference, WrapsIntoPlainParagraphs) {
  std::istringstream lines(config_reference_markdown());
  bool in_code = false;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("```", 0) == 0) in_code = !in_code;
    if (in_code || line.empty() || line[0] == '|' || line.rfind("<!--", 0) == 0) continue;
    if (line[0] == '#') {  // only the page's and the sections' headings
      EXPECT_TRUE(line == "# Config reference" || line.rfind("## ", 0) == 0 ||
                  line.rfind("### ", 0) == 0)
          << line;
      continue;
    }
    EXPECT_LE(line.size(), 100u) << line;
    EXPECT_NE(line.rfind("- ", 0), 0u) << line;
    EXPECT_NE(line.rfind("* ", 0), 0u) << line;
    EXPECT_NE(line.rfind("+ ", 0), 0u) << line;
  }
}

// The shipped config of every section loads under that section's schema.
TEST(ShippedConfigs, LoadUnderTheirSchemas) {
  for (const command_info* c : all_commands()) {
    for (const config_section& s : c->configs) {
      EXPECT_NO_THROW(load_config(*s.keys, source_dir + "/" + s.config_file, {}))
          << c->name << ": " << s.config_file;
      const config cfg = load_config(*s.keys, source_dir + "/" + s.config_file, {});
      for (const config_key& key : *s.keys) EXPECT_EQ(cfg.values.count(key.path), 1u);
    }
  }
}

// Every example's `--set` overrides (and config file) are accepted by the schema it documents:
// the section whose config file the example names, else the command's first.
TEST(Examples, UseOnlyKnownKeys) {
  for (const command_info* c : all_commands()) {
    if (c->configs.empty()) continue;
    for (const std::string& example : c->examples) {
      const std::vector<std::string> w = words(example);
      // The command's own arguments: after the last "wholestore <name>".
      std::size_t start = 0;
      for (std::size_t i = 0; i + 1 < w.size(); ++i)
        if (w[i] == "wholestore" && w[i + 1] == c->name) start = i + 2;
      ASSERT_GT(start, 0u) << example;
      std::vector<std::string> overrides;
      overrides.reserve(w.size());
      std::string file;
      for (std::size_t i = start; i < w.size(); ++i) {
        if (w[i] == "--set" && i + 1 < w.size()) {
          overrides.push_back(w[++i]);
        } else if (w[i] == "--report" || w[i].rfind("--", 0) == 0) {
          ++i;  // --report and a command's own options (train's --plot, ...) take a value
        } else {
          file = w[i];
        }
      }
      const config_section* section = &c->configs[0];
      for (const config_section& s : c->configs)
        if (s.config_file == file) section = &s;
      EXPECT_NO_THROW(
          load_config(*section->keys, file.empty() ? "" : source_dir + "/" + file, overrides))
          << example;
    }
  }
}

TEST(CommandArgs, HelpAnywhereButNotAsAValue) {
  auto parse = [](std::vector<std::string> args) {
    args.insert(args.begin(), "cmd");
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    return parse_command_args(static_cast<int>(argv.size()), argv.data());
  };
  EXPECT_TRUE(parse({"--help"}).help);
  EXPECT_TRUE(parse({"-h"}).help);
  EXPECT_TRUE(parse({"configs/sample.yaml", "--set", "a=1", "--help"}).help);
  EXPECT_TRUE(parse({"--bogus", "--help"}).help);  // help wins over the error
  EXPECT_FALSE(parse({"--report", "--help"}).help);
  EXPECT_EQ(parse({"--report", "-h"}).report_file, "-h");
  const command_args a = parse({"x.yaml", "--set", "k=v", "--set=j=w", "--report=r.yaml"});
  EXPECT_EQ(a.config_file, "x.yaml");
  EXPECT_EQ(a.overrides, (std::vector<std::string>{"k=v", "j=w"}));
  EXPECT_EQ(a.report_file, "r.yaml");
  EXPECT_THROW(parse({"--bogus"}), usage_error);
  EXPECT_THROW(parse({"--set"}), usage_error);
  EXPECT_THROW(parse({"a.yaml", "b.yaml"}), usage_error);
}

// Exit status 2 is for what the help documents (keys, types, options); a missing file is an
// error of another kind (status 1).
TEST(ConfigErrors, UsageErrorsAreToldApart) {
  const std::vector<config_key> schema = {{"n", value_kind::integer, "1", "a count"},
                                          {"flag", value_kind::boolean, "false", "a flag"}};
  EXPECT_THROW(load_config(schema, "", {"m=1"}), usage_error);
  EXPECT_THROW(load_config(schema, "", {"n=many"}), usage_error);
  EXPECT_THROW(load_config(schema, "", {"flag=maybe"}), usage_error);
  EXPECT_THROW(load_config(schema, "", {"n"}), usage_error);
  try {
    load_config(schema, "/nonexistent/wholestore.yaml", {});
    FAIL() << "a missing file was accepted";
  } catch (const usage_error&) {
    FAIL() << "a missing file is not a usage error";
  } catch (const config_error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/wholestore.yaml"), std::string::npos);
  }
  EXPECT_EQ(load_config(schema, "", {"n=7"}).get_int("n"), 7);
}

// An unknown name comes with the closest known ones: swaps, typos, a dotted key's last part,
// a name inside a longer one; ties all named; nothing when no name is close.
TEST(ConfigErrors, UnknownNamesComeWithTheClosestOnes) {
  using names = std::vector<std::string>;
  const names keys = {"walk_length", "window",          "gen.num_nodes", "gen.num_edges",
                      "memory.type", "memory.size_mib", "fanouts"};
  EXPECT_EQ(closest_names("walk_lenght", keys), names{"walk_length"});
  EXPECT_EQ(closest_names("Walk_Length", keys), names{"walk_length"});
  EXPECT_EQ(closest_names("fanout", keys), names{"fanouts"});
  EXPECT_EQ(closest_names("num_nodes", keys), names{"gen.num_nodes"});
  EXPECT_EQ(closest_names("gen.num_nodez", keys), names{"gen.num_nodes"});
  EXPECT_EQ(closest_names("memory.size", keys), names{"memory.size_mib"});
  EXPECT_EQ(closest_names("gen.num", keys), (names{"gen.num_nodes", "gen.num_edges"}));
  EXPECT_EQ(closest_names("nosuch", keys), names{});
  EXPECT_EQ(closest_names("x", keys), names{});
  EXPECT_EQ(closest_names("trian", {"sample", "train", "demo"}), names{"train"});
  EXPECT_EQ(closest_names("--exprot", {"--set", "--report", "--export"}), names{"--export"});
  EXPECT_EQ(did_you_mean("walk_lenght", keys), "; did you mean 'walk_length'?");
  EXPECT_EQ(did_you_mean("gen.num", keys), "; did you mean 'gen.num_nodes' or 'gen.num_edges'?");
  EXPECT_EQ(did_you_mean("ab", {"a", "b", "cd", "ac"}), "; did you mean 'a', 'b' or 'ac'?");
  EXPECT_EQ(did_you_mean("nosuch", keys), "");

  // In the errors: a close key is named; none close lists the known keys.
  const std::vector<config_key> schema = {{"walk_length", value_kind::integer, "1", "steps"},
                                          {"gen.seed", value_kind::integer, "0", "a seed"}};
  auto message = [&](const std::string& set) {
    try {
      load_config(schema, "", {set});
    } catch (const usage_error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(message("walk_lenght=5"),
            "--set walk_lenght=5: unknown key 'walk_lenght'; did you mean 'walk_length'?");
  EXPECT_EQ(message("seed=1"), "--set seed=1: unknown key 'seed'; did you mean 'gen.seed'?");
  EXPECT_EQ(message("zzz=1"), "--set zzz=1: unknown key 'zzz' (known keys: walk_length, gen.seed)");
  std::vector<std::string> args = {"cmd", "--exprot", "x"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  try {
    parse_command_args(static_cast<int>(argv.size()), argv.data(), {"--export", "--plot"});
    ADD_FAILURE() << "--exprot accepted";
  } catch (const usage_error& e) {
    EXPECT_EQ(std::string(e.what()), "unknown option '--exprot'; did you mean '--export'?");
  }
}

// A scratch directory for one test, removed with what it holds.
class scratch_dir {
 public:
  scratch_dir() {
    std::string templ = (std::filesystem::temp_directory_path() / "wholestore-cli-XXXXXX").string();
    if (::mkdtemp(templ.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = templ;
  }
  ~scratch_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  scratch_dir(const scratch_dir&) = delete;
  scratch_dir& operator=(const scratch_dir&) = delete;
  std::string file(const std::string& name, const std::string& text) const {
    const std::string p = path_ + "/" + name;
    std::ofstream(p) << text;
    return p;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// YAML forbids a key twice in one mapping; a parser would keep one of the two silently.
TEST(ConfigErrors, DuplicateKeysAreRefusedWithBothLines) {
  const std::vector<config_key> schema = {{"n", value_kind::integer, "1", "a count"},
                                          {"m.a", value_kind::integer, "1", "nested"},
                                          {"m.b", value_kind::integer, "1", "nested"}};
  scratch_dir dir;
  for (const auto& [text, key, lines] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"n: 1\nn: 2\n", "'n'", ":2: key 'n' is given twice (first on line 1)"},
           {"m:\n  a: 1\nn: 3\nm:\n  b: 2\n", "'m'", ":4: key 'm' is given twice"},
           {"m:\n  a: 1\n  a: 2\n", "'m.a'", ":3: key 'm.a' is given twice (first on line 2)"}}) {
    const std::string file = dir.file("dup.yaml", text);
    try {
      load_config(schema, file, {});
      ADD_FAILURE() << "accepted: " << text;
    } catch (const config_error& e) {
      EXPECT_NE(std::string(e.what()).find(file + lines), std::string::npos) << e.what();
    }
  }
  // The same key in a file and in --set is an override, not a duplicate.
  EXPECT_EQ(load_config(schema, dir.file("ok.yaml", "n: 1\nm:\n  a: 2\n"), {"n=5"}).get_int("n"),
            5);
}

TEST(ConfigErrors, DirectoryAsConfigFileIsNamed) {
  scratch_dir dir;
  try {
    load_config({{"n", value_kind::integer, "1", "a count"}}, dir.path(), {});
    FAIL() << "a directory was accepted as a config file";
  } catch (const config_error& e) {
    EXPECT_EQ(std::string(e.what()), dir.path() + ": is a directory, not a config file");
  }
}

// Nesting past the YAML parser's depth limit is named as such (issue 36: yaml-cpp says "bad
// file"), for flow sequences and for indented mappings; a config of ordinary depth loads.
TEST(ConfigErrors, DeepNestingIsNamed) {
  const std::vector<config_key> schema = {{"n", value_kind::integer, "1", "a count"}};
  scratch_dir dir;
  std::string indented = "n:\n";
  for (int i = 0; i < 3000; ++i) indented += std::string(2 * (i + 1), ' ') + "k:\n";
  for (const std::string& text :
       {"n: " + std::string(100000, '[') + std::string(100000, ']') + "\n", indented}) {
    const std::string file = dir.file("deep.yaml", text);
    try {
      load_config(schema, file, {});
      ADD_FAILURE() << "a deep file was accepted";
    } catch (const config_error& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.rfind(file + ":", 0), 0u) << what;
      EXPECT_NE(what.find("levels deep, past the parser's limit"), std::string::npos) << what;
      EXPECT_EQ(what.find("bad file"), std::string::npos) << what;
    }
  }
  EXPECT_EQ(load_config(schema, dir.file("ok.yaml", "n: 3\n"), {}).get_int("n"), 3);
}

// --report to a path that cannot be written fails before anything runs, creating nothing.
TEST(CommandArgs, ReportFileIsCheckedUpFront) {
  scratch_dir dir;
  auto parse = [](std::vector<std::string> args) {
    args.insert(args.begin(), "cmd");
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    return parse_command_args(static_cast<int>(argv.size()), argv.data());
  };
  const std::string fresh = dir.path() + "/report.yaml";
  EXPECT_EQ(parse({"--report", fresh}).report_file, fresh);
  EXPECT_FALSE(std::filesystem::exists(fresh)) << "the check created the file";
  for (const auto& [path, why] : std::vector<std::pair<std::string, std::string>>{
           {dir.path() + "/no-such-dir/report.yaml", "does not exist"},
           {dir.path(), "is a directory"},
           {dir.file("plain", "x") + "/report.yaml", "is not a directory"}}) {
    try {
      parse({"--report", path});
      ADD_FAILURE() << "accepted --report " << path;
    } catch (const usage_error& e) {
      ADD_FAILURE() << "not a usage error: " << e.what();
    } catch (const config_error& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.rfind("--report " + path + ": ", 0), 0u) << what;
      EXPECT_NE(what.find(why), std::string::npos) << what;
    }
  }
  // Another rank than 0 does not write the report, so it does not check it.
  ::setenv("RANK", "1", 1);
  EXPECT_NO_THROW(parse({"--report", dir.path()}));
  ::unsetenv("RANK");
}

// bench refuses sizes and counts that make no sense before it measures anything.
TEST(BenchConfig, NonsenseSizesAndFanoutsAreRefused) {
  const std::vector<std::vector<std::string>> bad = {
      {"--set", "cpu_table_gib=0"},
      {"--set", "cpu_table_gib=-1"},
      {"--set", "cpu_table_gib=nan"},
      {"--set", "cpu_table_gib=1e300"},
      {"--set", "cpu_table_gib=1e-12"},
      {"--set", "cpu_lookups=0"},
      {"--set", "repeats=0"},
      {"--set", "warmup=-1"},
      {"--set", "threads=-2"},
      {"--set", "row_bytes=abc"},
      {"--set", "row_bytes=64,0"},
      {"--set", "suite=sample", "--set", "batch_size=0"},
      {"--set", "suite=sample", "--set", "cpu_batches=0"},
      {"--set", "suite=sample", "--set", "cpu_num_nodes=0"},
      {"--set", "suite=sample", "--set", "fanouts=5;;5"},
      {"--set", "suite=sample", "--set", "fanouts=5,,5"},
      {"--set", "suite=sample", "--set", "fanouts=5;0"},
      {"--set", "suite=sample", "--set", "fanouts=;"},
      {"--set", "suite=sample", "--set", "cpu_target=0"},
  };
  for (std::vector<std::string> args : bad) {
    std::string shown;
    for (const auto& a : args) shown += " " + a;
    args.insert(args.begin(), "bench");
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    EXPECT_THROW(run_bench(static_cast<int>(argv.size()), argv.data()), config_error) << shown;
  }
}

// Sets WHOLESTORE_TIMEOUT (or unsets it, for nullptr) for one test, then restores it.
class timeout_variable {
 public:
  explicit timeout_variable(const char* value) {
    if (const char* old = std::getenv("WHOLESTORE_TIMEOUT")) saved_ = old;
    if (value) {
      ::setenv("WHOLESTORE_TIMEOUT", value, 1);
    } else {
      ::unsetenv("WHOLESTORE_TIMEOUT");
    }
  }
  ~timeout_variable() {
    if (saved_) {
      ::setenv("WHOLESTORE_TIMEOUT", saved_->c_str(), 1);
    } else {
      ::unsetenv("WHOLESTORE_TIMEOUT");
    }
  }
  timeout_variable(const timeout_variable&) = delete;
  timeout_variable& operator=(const timeout_variable&) = delete;

 private:
  std::optional<std::string> saved_;
};

const std::vector<config_key> timeout_schema = {{"n", value_kind::integer, "1", "a count"},
                                                {"timeout_s", value_kind::number, "300", "t"}};

// One rule for every command: the variable, when set, replaces timeout_s whether it came from
// the default, a file or --set.
TEST(ConfigTimeout, VariableReplacesTheKeyWhateverItsOrigin) {
  {
    timeout_variable unset(nullptr);
    EXPECT_EQ(collective_timeout(load_config(timeout_schema, "", {})), std::chrono::seconds(300));
    const config c = load_config(timeout_schema, "", {"timeout_s=0.0001"});
    EXPECT_EQ(collective_timeout(c), std::chrono::milliseconds(1));  // rounded up, not to 0
  }
  timeout_variable set("2.5");
  for (const auto& overrides :
       {std::vector<std::string>{}, std::vector<std::string>{"timeout_s=60"}}) {
    const config c = load_config(timeout_schema, "", overrides);
    EXPECT_EQ(collective_timeout(c), std::chrono::milliseconds(2500));
    EXPECT_EQ(c.get_string("timeout_s"), "2.5");  // what reports show
    EXPECT_EQ(c.origin.at("timeout_s"), "WHOLESTORE_TIMEOUT");
  }
  // A schema without timeout_s is not touched.
  EXPECT_EQ(load_config({{"n", value_kind::integer, "1", "a count"}}, "", {}).values.size(), 1u);
}

TEST(ConfigTimeout, BadValuesNameTheKeyOrVariableAndTheRange) {
  const std::string range = "(0, 31536000]";
  for (const char* bad : {"-1", "0", "nan", "inf", "-inf", "1e300", "31536000.5"}) {
    timeout_variable unset(nullptr);
    try {
      load_config(timeout_schema, "", {std::string("timeout_s=") + bad});
      ADD_FAILURE() << "timeout_s=" << bad << " accepted";
    } catch (const usage_error& e) {
      ADD_FAILURE() << "a number out of range is not a usage error: " << e.what();
    } catch (const config_error& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.rfind(std::string("timeout_s '") + bad + "'", 0), 0u) << what;
      EXPECT_NE(what.find(range), std::string::npos) << what;
    }
  }
  for (const char* bad : {"-1", "0", "nan", "inf", "1e300", "abc", "5s", ""}) {
    timeout_variable set(bad);
    try {
      load_config(timeout_schema, "", {});
      ADD_FAILURE() << "WHOLESTORE_TIMEOUT='" << bad << "' accepted";
    } catch (const std::exception& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(std::string("WHOLESTORE_TIMEOUT='") + bad + "'"), std::string::npos)
          << what;
      EXPECT_NE(what.find(range), std::string::npos) << what;
    }
  }
  EXPECT_EQ(wholememory::max_timeout_seconds, 31536000);
  EXPECT_TRUE(wholememory::parse_timeout_seconds("31536000").has_value());
  EXPECT_FALSE(wholememory::parse_timeout_seconds("5 ").has_value());
}

TEST(Version, YamlBlockHasTheBuildAndTheMachine) {
  const YAML::Node root = YAML::Load(version_yaml());
  const YAML::Node v = root["version"];
  ASSERT_TRUE(v.IsMap());
  for (const char* key : {"wholestore", "git_commit", "build_type", "compiler", "cuda",
                          "cuda_version", "cuda_architectures", "nccl", "nccl_version",
                          "cuda_driver", "cuda_runtime", "nccl_library", "gpus"}) {
    EXPECT_TRUE(v[key].IsDefined()) << key;
  }
  EXPECT_FALSE(v["git_commit"].as<std::string>().empty());
  EXPECT_EQ(static_cast<int>(v["gpus"].size()), wholememory::device_count());
#if defined(WHOLESTORE_HAS_CUDA)
  EXPECT_TRUE(v["cuda"].as<bool>());
  EXPECT_FALSE(v["cuda_version"].as<std::string>().empty());
  EXPECT_FALSE(v["cuda_architectures"].as<std::string>().empty());
#else
  EXPECT_FALSE(v["cuda"].as<bool>());
  EXPECT_FALSE(v["nccl"].as<bool>());
  EXPECT_EQ(v["cuda_version"].as<std::string>(), "");
#endif
  const std::string text = version_text();
  EXPECT_EQ(text.rfind("wholestore " + v["wholestore"].as<std::string>() + "\n", 0), 0u);
  EXPECT_NE(text.find(v["git_commit"].as<std::string>()), std::string::npos);
}

}  // namespace

// What the program prints of an error (issue 36): the library's source locations left out,
// also two of them from a wrapped message, parentheses inside a failed check included; text
// in parentheses that is not a location kept; control bytes from hostile input escaped.
TEST(UserMessage, LeavesOutLocationsAndEscapesControlBytes) {
  using wholestore::apps::user_message;
  EXPECT_EQ(user_message("bad dim 0 (table.cpp:12, failed: o.dim >= 1)"), "bad dim 0");
  EXPECT_EQ(user_message("load: rank 1 failed (dataset.cpp:330, failed: (a) && (b)) "
                         "(bootstrap.cpp:238)"),
            "load: rank 1 failed");
  EXPECT_EQ(user_message("kernel failed (apply_gradients.cu:77): out of memory"),
            "kernel failed: out of memory");
  EXPECT_EQ(user_message("values (1, 2) and (x.cpp) stay (a.cpp:x)"),
            "values (1, 2) and (x.cpp) stay (a.cpp:x)");
  EXPECT_EQ(user_message("line 3: 'a\x1b[2Jb\x07' is not a number"),
            "line 3: 'a\\x1b[2Jb\\x07' is not a number");
  EXPECT_EQ(user_message("tab\tand\nnewline stay"), "tab\tand\nnewline stay");
  EXPECT_EQ(user_message("kept (gather.cpp:9)", true), "kept (gather.cpp:9)");
  EXPECT_EQ(user_message("unclosed (file.cpp:3, failed: x"), "unclosed (file.cpp:3, failed: x");
}
