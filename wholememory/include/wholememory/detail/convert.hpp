// Transitional: the conversions are public in <wholememory/convert.hpp>; this keeps the older
// wholememory::detail spellings compiling until every user includes the public header.
#pragma once

#include <wholememory/convert.hpp>

namespace wholememory::detail {
using ::wholememory::bfloat16_t;
using ::wholememory::bfloat16_to_float;
using ::wholememory::bit_cast_value;
using ::wholememory::convert_element;
using ::wholememory::convert_row;
using ::wholememory::double_to_bfloat16;
using ::wholememory::double_to_half;
using ::wholememory::float_element_to_double;
using ::wholememory::half_t;
using ::wholememory::half_to_float;
using ::wholememory::is_float_element;
using ::wholememory::round_double_to_bits;
}  // namespace wholememory::detail
