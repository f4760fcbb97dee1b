// Transitional: the checks are public in <wholememory/cuda_check.hpp>; this keeps the older
// wholememory::detail spellings compiling until every user includes the public header.
#pragma once

#include <wholememory/cuda_check.hpp>

namespace wholememory::detail {
using ::wholememory::cuda_error_text;
using ::wholememory::device_guard;
}  // namespace wholememory::detail
