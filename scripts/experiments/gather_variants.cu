// Gather kernel variants side by side (issue 15: small-row gathers).  Standalone: build with
//   nvcc -O3 -std=c++17 -arch=sm_90 scripts/experiments/gather_variants.cu -o gather_variants
// and run ./gather_variants [table_gib] [lookups].  Prints GB/s of rows gathered for each
// variant and row size, with the device copy rate measured in the same run.  The library's
// kernel (wholememory/src/cuda/gather_kernels.cuh) took the winner; this file records how.
#include "experiment_common.cuh"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

constexpr int kThreads = 256;

__device__ __forceinline__ uint4 load_row(const uint4* p, bool nc) {
  if (nc) {
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
  }
  return *p;
}
__device__ __forceinline__ void store_row(uint4* p, uint4 v, bool cs) {
  if (cs)
    __stcs(p, v);
  else
    *p = v;
}

// Groups of G = 2^shift lanes per row, F rows in flight per thread.  Interleaved: the k-th
// row of a warp's batch for group g is batch + k * groups_per_warp + g (a warp's loads and
// stores of one step touch consecutive rows); else batch + g * F + k (the library's order).
template <int F, bool INTERLEAVE, bool HINTS, bool FLAG>
__global__ void __launch_bounds__(kThreads)
    gather_kernel(const char* __restrict__ table, const std::int64_t* __restrict__ idx,
                  char* __restrict__ out, std::int64_t n, int W, int shift, std::int64_t rows,
                  const unsigned long long* flag) {
  if (FLAG && *flag != ~0ull) return;
  const std::size_t row_bytes = static_cast<std::size_t>(W) * 16;
  const int G = 1 << shift;
  const int lane = threadIdx.x & (G - 1);
  const int gpw = 32 >> shift;  // groups per warp
  const int g = (threadIdx.x & 31) >> shift;
  const std::int64_t warp = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const std::int64_t warps = (static_cast<std::int64_t>(gridDim.x) * blockDim.x) >> 5;
  const std::int64_t per_warp = static_cast<std::int64_t>(gpw) * F;
  const bool active = lane < W;
  for (std::int64_t b = warp * per_warp; b < n; b += warps * per_warp) {
    uint4 v[F];
    uint4* d[F];
#pragma unroll
    for (int k = 0; k < F; ++k) {
      const std::int64_t i = INTERLEAVE ? b + k * gpw + g : b + g * F + k;
      d[k] = nullptr;
      if (active && i < n) {
        const std::int64_t r = idx[i];
        d[k] = reinterpret_cast<uint4*>(out + i * row_bytes) + lane;
        v[k] = load_row(reinterpret_cast<const uint4*>(table + r * row_bytes) + lane, HINTS);
      }
    }
#pragma unroll
    for (int k = 0; k < F; ++k)
      if (d[k] != nullptr) store_row(d[k], v[k], HINTS);
  }
}

__global__ void check_kernel(const std::int64_t* __restrict__ idx, std::int64_t n,
                             std::int64_t rows, unsigned long long* result) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const std::int64_t v = idx[i];
    if (v < 0 || v >= rows) {
      atomicMin(result, static_cast<unsigned long long>(i));
      return;
    }
  }
}

// The median of a call, as the variants below time it.
struct timer {
  template <typename F>
  double median_ms(F f, int reps = 15) {
    return ::median_ms(f, reps);
  }
};

int sms = 0;

template <int F, bool IL, bool H, bool FLAG>
double run(const char* table, const std::int64_t* idx, char* out, std::int64_t n, int W,
           std::int64_t rows, int blocks_per_sm, const unsigned long long* flag, timer& t) {
  int shift = 0;
  while ((1 << shift) < W) ++shift;
  auto kernel = gather_kernel<F, IL, H, FLAG>;
  int occ = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, kernel, kThreads, 0));
  const int per_sm = blocks_per_sm > 0 ? blocks_per_sm : occ;
  const std::int64_t groups_needed = (n + F - 1) / F;
  const std::int64_t blocks_needed = (groups_needed * (1 << shift) + kThreads - 1) / kThreads;
  const int blocks =
      static_cast<int>(std::min<std::int64_t>(blocks_needed, std::int64_t(sms) * per_sm));
  return t.median_ms([&] {
    kernel<<<blocks, kThreads>>>(table, idx, out, n, W, shift, rows, flag);
    CK(cudaGetLastError());
  });
}

int main(int argc, char** argv) {
  const double gib = argc > 1 ? std::atof(argv[1]) : 8.0;
  const std::int64_t n = argc > 2 ? std::atoll(argv[2]) : 4194304;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  const std::size_t table_bytes = static_cast<std::size_t>(gib * (1ull << 30));
  char* table = nullptr;
  char* out = nullptr;
  std::int64_t* idx = nullptr;
  unsigned long long* flag = nullptr;
  CK(cudaMalloc(&table, table_bytes));
  CK(cudaMemset(table, 1, table_bytes));
  CK(cudaMalloc(&out, static_cast<std::size_t>(n) * 4096));
  CK(cudaMalloc(&idx, n * sizeof(std::int64_t)));
  CK(cudaMalloc(&flag, 8));
  CK(cudaMemset(flag, 0xff, 8));
  timer t;
  const std::size_t copy_bytes = std::size_t(1) << 30;
  const double copy_ms =
      t.median_ms([&] { CK(cudaMemcpyAsync(out, table, copy_bytes, cudaMemcpyDeviceToDevice)); });
  const double d2d = 2.0 * copy_bytes / copy_ms / 1e6;
  std::printf("device %s, %d SMs; D2D copy %.1f GB/s (read+write), half %.1f\n", prop.name, sms,
              d2d, d2d / 2);
  std::printf("%-34s", "variant \\ row bytes");
  const int sizes[] = {64, 128, 256, 512};
  for (int rb : sizes) std::printf("%10d", rb);
  std::printf("\n");
  struct variant {
    const char* name;
    double (*fn)(const char*, const std::int64_t*, char*, std::int64_t, int, std::int64_t, int,
                 const unsigned long long*, timer&);
    int bps;
  };
  const variant variants[] = {
      {"F8 blocked (library order)", run<8, false, false, false>, 0},
      {"F8 interleaved", run<8, true, false, false>, 0},
      {"F4 interleaved", run<4, true, false, false>, 0},
      {"F16 interleaved", run<16, true, false, false>, 0},
      {"F8 interleaved + hints", run<8, true, true, false>, 0},
      {"F16 interleaved + hints", run<16, true, true, false>, 0},
      {"F8 interleaved, 4 blocks/SM", run<8, true, false, false>, 4},
      {"F8 interleaved, 16 blocks/SM", run<8, true, false, false>, 16},
      {"F8 interleaved + flag read", run<8, true, false, true>, 0},
      {"F8 blocked + hints", run<8, false, true, false>, 0},
  };
  std::vector<double> check_ms;
  for (const variant& v : variants) {
    std::printf("%-34s", v.name);
    for (int rb : sizes) {
      const std::int64_t rows = static_cast<std::int64_t>(table_bytes / rb);
      random_indices<<<sms * 8, 256>>>(idx, n, rows, 1234);
      CK(cudaDeviceSynchronize());
      const double ms = v.fn(table, idx, out, n, rb / 16, rows, v.bps, flag, t);
      std::printf("%10.1f", static_cast<double>(n) * rb / ms / 1e6);
    }
    std::printf("\n");
  }
  // The index check alone, and check + copy back to back (no host round trip between them).
  std::printf("%-34s", "check kernel alone (us)");
  for (int rb : sizes) {
    const std::int64_t rows = static_cast<std::int64_t>(table_bytes / rb);
    random_indices<<<sms * 8, 256>>>(idx, n, rows, 1234);
    const double ms = t.median_ms([&] {
      CK(cudaMemsetAsync(flag, 0xff, 8));
      check_kernel<<<std::min<std::int64_t>((n + 255) / 256, sms * 8), 256>>>(idx, n, rows, flag);
    });
    std::printf("%10.1f", ms * 1000);
  }
  std::printf("\n%-34s", "check + F8 interleaved + flag");
  for (int rb : sizes) {
    const std::int64_t rows = static_cast<std::int64_t>(table_bytes / rb);
    random_indices<<<sms * 8, 256>>>(idx, n, rows, 1234);
    int shift = 0;
    while ((1 << shift) < rb / 16) ++shift;
    auto kernel = gather_kernel<8, true, false, true>;
    int occ = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, kernel, kThreads, 0));
    const double ms = t.median_ms([&] {
      CK(cudaMemsetAsync(flag, 0xff, 8));
      check_kernel<<<std::min<std::int64_t>((n + 255) / 256, sms * 8), 256>>>(idx, n, rows, flag);
      kernel<<<sms * occ, kThreads>>>(table, idx, out, n, rb / 16, shift, rows, flag);
    });
    std::printf("%10.1f", static_cast<double>(n) * rb / ms / 1e6);
  }
  std::printf("\n");
  return 0;
}
