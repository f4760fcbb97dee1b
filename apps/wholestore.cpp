// The wholestore program: dispatches to a subcommand.
#include "commands.hpp"

#include <cstdio>
#include <cstring>
#include <exception>

namespace {

void print_usage(std::FILE* out) {
  std::fprintf(
      out,
      "usage: wholestore <command> [args]\n"
      "\n"
      "commands:\n"
      "  sample [config.yaml] [--set k=v]       load or generate a graph, sample, gather features\n"
      "  demo [config.yaml] [--set key=value]   tour of WholeMemory on the ranks present\n"
      "  bench [config.yaml] [--set key=value]  gather/scatter bandwidth vs. ceilings\n"
      "  convert [config.yaml] [--set k=v]      edge-list text to a dataset\n"
      "  gen [config.yaml] [--set k=v]          generate an R-MAT or uniform random dataset\n"
      "  info <dataset-dir>                     counts, degree statistics, degree histogram\n"
      "  launch -n N [--master-port P] -- CMD   run N ranks of CMD on this host\n"
      "  help                                   this text\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "help") == 0 || std::strcmp(argv[1], "--help") == 0 ||
      std::strcmp(argv[1], "-h") == 0) {
    print_usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const char* command = argv[1];
  try {
    if (std::strcmp(command, "launch") == 0)
      return wholestore::apps::run_launch(argc - 1, argv + 1);
    if (std::strcmp(command, "sample") == 0)
      return wholestore::apps::run_sample(argc - 1, argv + 1);
    if (std::strcmp(command, "demo") == 0) return wholestore::apps::run_demo(argc - 1, argv + 1);
    if (std::strcmp(command, "bench") == 0) return wholestore::apps::run_bench(argc - 1, argv + 1);
    if (std::strcmp(command, "convert") == 0)
      return wholestore::apps::run_convert(argc - 1, argv + 1);
    if (std::strcmp(command, "gen") == 0) return wholestore::apps::run_gen(argc - 1, argv + 1);
    if (std::strcmp(command, "info") == 0) return wholestore::apps::run_info(argc - 1, argv + 1);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "wholestore %s: error: %s\n", command, e.what());
    return 1;
  }
  std::fprintf(stderr, "wholestore: unknown command '%s'\n\n", command);
  print_usage(stderr);
  return 2;
}
