/*
 * The subcommands of the wholestore program.  Each takes the arguments after its name
 * (argv[0] is the subcommand) and returns the process exit code.
 */
#pragma once

#include <string>

namespace wholestore::apps {

/// `wholestore launch -n N [--master-port P] -- <command...>`: runs N ranks of a command.
int run_launch(int argc, char** argv);

/// `wholestore sample [configs/sample.yaml]`: the main job: load (or generate) a graph, sample
/// neighborhoods batch by batch and gather their features on the ranks present.
int run_sample(int argc, char** argv);

/// `wholestore demo [configs/demo.yaml]`: a small tour of WholeMemory on the ranks present.
int run_demo(int argc, char** argv);

/// `wholestore bench [configs/bench_gather.yaml]`: gather/scatter bandwidth next to the
/// machine's measured copy ceilings, on the ranks present.
int run_bench(int argc, char** argv);

/// `wholestore bench configs/bench_sample.yaml` (a config with `suite: sample`): sampler
/// throughput per case; run_bench dispatches here.
int run_bench_sample(int argc, char** argv);

/// `wholestore bench configs/bench_embedding.yaml` (`suite: embedding`): embedding-table
/// lookup and training-step throughput; run_bench dispatches here.
int run_bench_embedding(int argc, char** argv);

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
