/*
 * What produced a result: the build (version, git commit, build type, compiler, CUDA and NCCL
 * compiled in and their versions, CUDA architectures; fixed when the binary is built) and the
 * machine it runs on (CUDA driver, runtime and NCCL library loaded, GPUs visible; asked at the
 * call).  `wholestore --version` prints it as text, every --report file carries it as YAML.
 */
#pragma once

#include <string>

namespace YAML {
class Emitter;
}

namespace wholestore::apps {

/// The block for a terminal, several lines.  Never throws for a missing driver or GPU: it says
/// what is missing instead.
std::string version_text();

/// The same as a YAML mapping under the top-level key `version:`, ending in a newline.
std::string version_yaml();

/// Writes the key `version` and that mapping into the mapping `out` has open (a --report's
/// block, the same text as version_yaml's).
void emit_version(YAML::Emitter& out);

}  // namespace wholestore::apps
