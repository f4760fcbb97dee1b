/*
 * The subcommands of the wholestore program.
 *
 * Each command file exports a `command_info`: its name, what it does, its usage, the schemas of
 * its configs and examples.  help.cpp lists them in one table, and from that table come the
 * dispatch in main, `wholestore <command> --help`, the overview, and docs/config.md (`wholestore
 * help --markdown`): the schemas that validate configs are the only description of their keys.
 * A new command adds its file's `*_command()` to that table and gets all of it.
 *
 * A command's run function takes the arguments after its name (argv[0] is the command) and
 * returns the process exit code: 0 success, 1 error, 2 usage error; it throws usage_error
 * (exit 2) or any other exception (exit 1) and main prints the message.
 */
#pragma once

#include "config.hpp"

#include <string>
#include <vector>

namespace wholestore::apps {

/// One schema of a command and the prose around its table (bench has one per suite).  Prose is
/// Markdown inline text: `code`, [links](target); paragraphs separated by blank lines.
struct config_section {
  std::string heading;      ///< empty for a command's only schema; "suite `sample`" for bench
  std::string config_file;  ///< the shipped config, e.g. "configs/sample.yaml"
  std::string intro;        ///< before the keys
  const std::vector<config_key>* keys = nullptr;  ///< the schema load_config checks against
  std::string notes;                              ///< after the keys
};

/// What `wholestore help` and docs/config.md say about a command, and how to run it.
struct command_info {
  std::string name;         ///< "sample"
  std::string summary;      ///< one line for the command list
  std::string usage;        ///< arguments after the name; empty: the config command usage
  std::string description;  ///< paragraphs, Markdown inline text
  std::vector<config_section> configs;  ///< empty: the command takes arguments, not a config
  std::vector<std::string> examples;    ///< whole command lines
  int (*run)(int argc, char** argv) = nullptr;
};

// The commands, in the order of `wholestore help`.
const command_info& sample_command();
const command_info& train_command();
const command_info& demo_command();
const command_info& bench_command();
const command_info& gen_command();
const command_info& convert_command();
const command_info& info_command();
const command_info& launch_command();

/// `wholestore launch -n N [--master-port P] -- <command...>`: runs N ranks of a command.
int run_launch(int argc, char** argv);

/// `wholestore sample [configs/sample.yaml]`: the main job: load (or generate) a graph, sample
/// neighborhoods batch by batch and gather their features on the ranks present.
int run_sample(int argc, char** argv);

/// `wholestore demo [configs/demo.yaml]`: a small tour of WholeMemory on the ranks present.
int run_demo(int argc, char** argv);

/// `wholestore bench [configs/bench_gather.yaml]`: gather/scatter bandwidth next to the
/// machine's measured copy ceilings, on the ranks present; dispatches on the config's `suite`.
int run_bench(int argc, char** argv);

/// `wholestore bench configs/bench_sample.yaml` (a config with `suite: sample`): sampler
/// throughput per case; run_bench dispatches here.
int run_bench_sample(int argc, char** argv);

/// `wholestore bench configs/bench_embedding.yaml` (`suite: embedding`): embedding-table
/// lookup and training-step throughput; run_bench dispatches here.
int run_bench_embedding(int argc, char** argv);

/// `wholestore bench configs/bench_symmetric.yaml` (`suite: symmetric`): put/get between two
/// ranks through the symmetric heap; run_bench dispatches here.
int run_bench_symmetric(int argc, char** argv);

/// The schemas of bench's sample, embedding and symmetric suites (bench_command lists them).
const std::vector<config_key>& bench_sample_keys();
const std::vector<config_key>& bench_embedding_keys();
const std::vector<config_key>& bench_symmetric_keys();

/// The `suite` a bench invocation asks for (config file's `suite:` or `--set suite=`), "gather"
/// when none.
std::string bench_suite(int argc, char** argv);

/// `wholestore convert [configs/convert.yaml] [--set ...]`: edge-list text to a dataset.
int run_convert(int argc, char** argv);

/// `wholestore gen [configs/gen.yaml] [--set ...]`: an R-MAT or uniform random dataset.
int run_gen(int argc, char** argv);

/// `wholestore info <dataset-dir>`: counts, degree statistics, a degree histogram.
int run_info(int argc, char** argv);

}  // namespace wholestore::apps
