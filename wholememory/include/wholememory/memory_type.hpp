/*
 * The kinds of WholeMemory: how an allocation is spread (type) and where its bytes live
 * (location).  See allocation.hpp for what each combination means.
 */
#pragma once

#include <string>

namespace wholememory {

enum class memory_type { continuous, chunked, distributed };
enum class memory_location { device, host };

const char* memory_type_name(memory_type t);
const char* memory_location_name(memory_location l);
/// Parses "continuous" | "chunked" | "distributed"; throws logic_error otherwise.
memory_type parse_memory_type(const std::string& name);
/// Parses "device" | "host"; throws logic_error otherwise.
memory_location parse_memory_location(const std::string& name);

}  // namespace wholememory
