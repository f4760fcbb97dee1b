// The version block (version.hpp): build facts from the generated headers, machine facts from
// wholememory's describe_cuda_environment.
#include "version.hpp"

#include "build_config.hpp"  // generated at configure time (apps/CMakeLists.txt)
#include "git_commit.hpp"    // generated at build time (cmake/git_commit.cmake)

#include <wholememory/device.hpp>

#include <yaml-cpp/yaml.h>

#include <cstdio>
#include <sstream>
#include <string>

namespace wholestore::apps {

namespace {

#if defined(WHOLESTORE_HAS_CUDA)
constexpr bool cuda_compiled = true;
#else
constexpr bool cuda_compiled = false;
#endif

// 12040 -> "12.4" (CUDA's major * 1000 + minor * 10); 0 -> "".
std::string cuda_version_name(int v) {
  if (v <= 0) return "";
  return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}

// 22105 -> "2.21.5" (NCCL >= 2.9: major * 10000 + minor * 100 + patch; older: * 1000); 0 -> "".
std::string nccl_version_name(int v) {
  if (v <= 0) return "";
  const int major_unit = v >= 20900 ? 10000 : 1000;
  return std::to_string(v / major_unit) + "." + std::to_string(v % major_unit / 100) + "." +
         std::to_string(v % 100);
}

std::string gib(std::size_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f", static_cast<double>(bytes) / (1ull << 30));
  return text;
}

}  // namespace

std::string version_text() {
  const wholememory::cuda_environment env = wholememory::describe_cuda_environment();
  std::ostringstream out;
  out << "wholestore " << WHOLESTORE_VERSION << "\n";
  out << "  commit    " << WHOLESTORE_GIT_COMMIT << "\n";
  out << "  build     " << WHOLESTORE_BUILD_TYPE << ", " << WHOLESTORE_COMPILER << "\n";
  if (!cuda_compiled) {
    out << "  CUDA      not compiled in (host-only build)\n";
    out << "  NCCL      not compiled in\n";
    return out.str();
  }
  out << "  CUDA      " << WHOLESTORE_BUILD_CUDA_VERSION << ", architectures "
      << WHOLESTORE_BUILD_CUDA_ARCHITECTURES << "\n";
  out << "  NCCL      " << WHOLESTORE_BUILD_NCCL_VERSION << "\n";
  out << "  runtime   CUDA driver "
      << (env.driver_version ? cuda_version_name(env.driver_version) : "none") << ", runtime "
      << (env.runtime_version ? cuda_version_name(env.runtime_version) : "none")
      << ", NCCL library " << (env.nccl_version ? nccl_version_name(env.nccl_version) : "none")
      << "\n";
  if (env.gpus.empty()) {
    out << "  GPUs      none visible" << (env.note.empty() ? "" : " (" + env.note + ")") << "\n";
  }
  for (std::size_t i = 0; i < env.gpus.size(); ++i) {
    const auto& g = env.gpus[i];
    out << (i == 0 ? "  GPUs      " : "            ") << g.device << ": " << g.name << ", sm_"
        << g.compute_major << g.compute_minor << ", " << gib(g.memory_bytes) << " GiB, "
        << g.pci_bus_id << "\n";
  }
  return out.str();
}

void emit_version(YAML::Emitter& out) {
  const wholememory::cuda_environment env = wholememory::describe_cuda_environment();
  // Texts quoted even where plain would do: "12.4" and "0.1" stay versions, not numbers.
  auto text = [&](const char* key, const std::string& value) {
    out << YAML::Key << key << YAML::Value << YAML::DoubleQuoted << value;
  };
  out << YAML::Key << "version" << YAML::Value << YAML::BeginMap;
  text("wholestore", WHOLESTORE_VERSION);
  text("git_commit", WHOLESTORE_GIT_COMMIT);
  text("build_type", WHOLESTORE_BUILD_TYPE);
  text("compiler", WHOLESTORE_COMPILER);
  out << YAML::Key << "cuda" << YAML::Value << cuda_compiled;
  text("cuda_version", WHOLESTORE_BUILD_CUDA_VERSION);
  text("cuda_architectures", WHOLESTORE_BUILD_CUDA_ARCHITECTURES);
  out << YAML::Key << "nccl" << YAML::Value << cuda_compiled;
  text("nccl_version", WHOLESTORE_BUILD_NCCL_VERSION);
  text("cuda_driver", cuda_version_name(env.driver_version));
  text("cuda_runtime", cuda_version_name(env.runtime_version));
  text("nccl_library", nccl_version_name(env.nccl_version));
  out << YAML::Key << "gpus" << YAML::Value;
  if (env.gpus.empty()) out << YAML::Flow;  // `gpus: []`
  out << YAML::BeginSeq;
  for (const auto& g : env.gpus) {
    out << YAML::Flow << YAML::BeginMap;
    out << YAML::Key << "device" << YAML::Value << g.device;
    text("name", g.name);
    text("compute_capability",
         std::to_string(g.compute_major) + "." + std::to_string(g.compute_minor));
    out << YAML::Key << "memory_gib" << YAML::Value << gib(g.memory_bytes);  // "79.1": a number
    text("pci_bus_id", g.pci_bus_id);
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;
  if (!env.note.empty()) text("gpu_note", env.note);
  out << YAML::EndMap;
}

std::string version_yaml() {
  YAML::Emitter out;
  out << YAML::BeginMap;
  emit_version(out);
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace wholestore::apps
