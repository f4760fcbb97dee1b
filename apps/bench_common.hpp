// Pieces every bench suite uses: the median of repeated timings and the host copy ceiling.
#pragma once

#include <vector>

namespace wholestore::apps {

/// Median of `v` (0 for an empty list).
double median(std::vector<double> v);

/// Host memcpy rate of 256 MiB split over `threads` threads, bytes copied per second (median
/// of 5): the ceiling of CPU-only runs.
double host_memcpy_rate(unsigned threads);

}  // namespace wholestore::apps
