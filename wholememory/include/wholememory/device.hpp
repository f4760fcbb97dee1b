/*
 * Small device utilities for code that must not include CUDA headers (apps, host code).
 * In a build without CUDA they report no devices and copy with memcpy.
 */
#pragma once

#include <wholememory/communicator.hpp>

#include <cstddef>

namespace wholememory {

/// Number of visible CUDA devices; 0 without CUDA or when the query fails.
int device_count();

/// Makes `device` the calling thread's current CUDA device.  Throws logic_error when it does
/// not exist (or in a build without CUDA).
void set_device(int device);

/// The device a rank should use by default: its local rank modulo the visible devices.
/// Throws logic_error when no device is visible.
int default_device(const communicator& comm);

/// Copies `bytes` bytes between any two addresses this process can reach (host, device, or
/// WholeMemory); synchronous.
void copy_bytes(void* dst, const void* src, std::size_t bytes);

}  // namespace wholememory
