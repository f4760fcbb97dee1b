// Small-row gathers over two GPUs (issue 15: two-GPU continuous gathers at 64 and 128 B reach
// 60% and 76% of twice the peer copy rate on two H100s, the targets are 75% and 90%).
// Standalone: build with
//   nvcc -O3 -std=c++17 -arch=sm_90 scripts/experiments/peer_gather_variants.cu -o pgv
// and run ./pgv [table_gib] [lookups] on a machine with two GPUs and peer access.  Each GPU
// holds half of the table; both GPUs gather at once (as two ranks of continuous memory do),
// each from random rows of the whole table, so half of each GPU's rows cross NVLink in each
// direction.  Prints the slower GPU's GB/s of rows gathered for each variant and row size,
// next to the peer copy rate measured in the same run (both directions at once).
#include "experiment_common.cuh"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

constexpr int kThreads = 256;

struct halves {
  const char* lo;  // rows [0, half) (GPU 0)
  const char* hi;  // rows [half, rows) (GPU 1)
  std::int64_t half;
};

__device__ __forceinline__ const char* row_at(const halves& t, std::int64_t r,
                                              std::size_t row_bytes) {
  return r < t.half ? t.lo + r * row_bytes : t.hi + (r - t.half) * row_bytes;
}

__device__ __forceinline__ uint4 load16(const uint4* p, bool nc) {
  if (nc) {
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
  }
  return *p;
}

// Groups of G = 2^shift lanes per row (one 16-byte vector each), F rows in flight per thread,
// rows of a group consecutive in the index list (the library's order).  With `list`, only the
// entries list[0..n) are visited (the local or the remote rows of a split call).
template <int F, bool NC>
__global__ void __launch_bounds__(kThreads)
    gather_kernel(halves t, const std::int64_t* __restrict__ idx,
                  const std::int64_t* __restrict__ list, char* __restrict__ out, std::int64_t n,
                  int W, int shift) {
  const std::size_t row_bytes = static_cast<std::size_t>(W) * 16;
  const int lane = threadIdx.x & ((1 << shift) - 1);
  const int gpw = 32 >> shift;
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
      const std::int64_t j = b + g * F + k;
      d[k] = nullptr;
      if (active && j < n) {
        const std::int64_t i = list != nullptr ? list[j] : j;
        const std::int64_t r = idx[i];
        d[k] = reinterpret_cast<uint4*>(out + i * row_bytes) + lane;
        v[k] = load16(reinterpret_cast<const uint4*>(row_at(t, r, row_bytes)) + lane, NC);
      }
    }
#pragma unroll
    for (int k = 0; k < F; ++k)
      if (d[k] != nullptr) *d[k] = v[k];
  }
}

__global__ void split_kernel(const std::int64_t* idx, std::int64_t n, std::int64_t lo,
                             std::int64_t hi, std::int64_t* local, std::int64_t* remote,
                             unsigned long long* counts) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const bool mine = idx[i] >= lo && idx[i] < hi;
    const unsigned long long at = atomicAdd(counts + (mine ? 0 : 1), 1ull);
    (mine ? local : remote)[at] = i;
  }
}

struct gpu_state {
  int device = 0;
  cudaStream_t main = nullptr, side = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr, side_done = nullptr;
  std::int64_t* idx = nullptr;
  std::int64_t* local = nullptr;
  std::int64_t* remote = nullptr;
  unsigned long long* counts = nullptr;
  char* out = nullptr;
  std::int64_t n_local = 0, n_remote = 0;
};

int sms = 0;

// Runs `launch(gpu)` on both GPUs at once, reps times; returns the median over reps of the
// slower GPU's time in ms.
template <typename L>
double both_ms(std::vector<gpu_state>& gs, L launch, int reps = 9) {
  std::vector<double> t;
  for (int r = 0; r < reps + 2; ++r) {
    for (gpu_state& g : gs) {
      CK(cudaSetDevice(g.device));
      CK(cudaDeviceSynchronize());
    }
    for (gpu_state& g : gs) {
      CK(cudaSetDevice(g.device));
      CK(cudaEventRecord(g.start, g.main));
      launch(g);
      CK(cudaEventRecord(g.stop, g.main));
    }
    double worst = 0;
    for (gpu_state& g : gs) {
      CK(cudaSetDevice(g.device));
      CK(cudaEventSynchronize(g.stop));
      float ms = 0;
      CK(cudaEventElapsedTime(&ms, g.start, g.stop));
      worst = std::max(worst, static_cast<double>(ms));
    }
    if (r >= 2) t.push_back(worst);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

template <int F, bool NC>
void launch_gather(const halves& t, const gpu_state& g, const std::int64_t* list, std::int64_t n,
                   int W, int blocks_per_sm, int share, cudaStream_t s) {
  int shift = 0;
  while ((1 << shift) < W) ++shift;
  auto kernel = gather_kernel<F, NC>;
  int occ = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, kernel, kThreads, 0));
  const int per_sm = blocks_per_sm > 0 ? blocks_per_sm : occ;
  const std::int64_t groups = (n + F - 1) / F;
  const std::int64_t need = (groups * (1 << shift) + kThreads - 1) / kThreads;
  const int blocks = static_cast<int>(std::max<std::int64_t>(
      1, std::min<std::int64_t>(need, static_cast<std::int64_t>(sms) * per_sm / share)));
  kernel<<<blocks, kThreads, 0, s>>>(t, g.idx, list, g.out, n, W, shift);
  CK(cudaGetLastError());
}

int main(int argc, char** argv) {
  const double gib = argc > 1 ? std::atof(argv[1]) : 8.0;
  const std::int64_t n = argc > 2 ? std::atoll(argv[2]) : 4194304;
  int count = 0;
  CK(cudaGetDeviceCount(&count));
  if (count < 2) {
    std::fprintf(stderr, "needs two GPUs, found %d\n", count);
    return 1;
  }
  int can = 0;
  CK(cudaDeviceCanAccessPeer(&can, 0, 1));
  if (!can) {
    std::fprintf(stderr, "GPUs 0 and 1 have no peer access\n");
    return 1;
  }
  const std::size_t half_bytes = static_cast<std::size_t>(gib * (1ull << 30)) / 2;
  char* part[2] = {nullptr, nullptr};
  std::vector<gpu_state> gs(2);
  for (int d = 0; d < 2; ++d) {
    CK(cudaSetDevice(d));
    CK(cudaDeviceEnablePeerAccess(1 - d, 0));
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, d));
    CK(cudaMalloc(&part[d], half_bytes));
    CK(cudaMemset(part[d], 1 + d, half_bytes));
    gpu_state& g = gs[d];
    g.device = d;
    CK(cudaStreamCreateWithFlags(&g.main, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&g.side, cudaStreamNonBlocking));
    CK(cudaEventCreate(&g.start));
    CK(cudaEventCreate(&g.stop));
    CK(cudaEventCreateWithFlags(&g.side_done, cudaEventDisableTiming));
    CK(cudaMalloc(&g.idx, n * sizeof(std::int64_t)));
    CK(cudaMalloc(&g.local, n * sizeof(std::int64_t)));
    CK(cudaMalloc(&g.remote, n * sizeof(std::int64_t)));
    CK(cudaMalloc(&g.counts, 2 * sizeof(unsigned long long)));
    CK(cudaMalloc(&g.out, static_cast<std::size_t>(n) * 512));
  }
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  // Peer copy, both directions at once: GPU d copies 1 GiB from the other GPU's part.
  const std::size_t copy_bytes = std::min<std::size_t>(std::size_t(1) << 30, half_bytes);
  const double copy_ms = both_ms(gs, [&](gpu_state& g) {
    CK(cudaMemcpyAsync(g.out, part[1 - g.device], std::min<std::size_t>(copy_bytes, n * 512ull),
                       cudaMemcpyDeviceToDevice, g.main));
  });
  const double peer = std::min<std::size_t>(copy_bytes, n * 512ull) / copy_ms / 1e6;
  std::printf(
      "%s x2, %d SMs; peer copy %.1f GB/s per direction (both at once); ceiling of a "
      "gather = 2 x peer = %.1f GB/s per GPU\n",
      prop.name, sms, peer, 2 * peer);
  const int sizes[] = {64, 128, 256, 512};
  std::printf("%-40s", "variant \\ row bytes");
  for (int rb : sizes) std::printf("%14d", rb);
  std::printf("\n");
  using fn = void (*)(const halves&, const gpu_state&, const std::int64_t*, std::int64_t, int, int,
                      int, cudaStream_t);
  struct variant {
    const char* name;
    fn launch;
    int blocks_per_sm;
    bool split;  // local and remote rows as two kernels on two streams
  };
  const variant variants[] = {
      {"F8 (library)", launch_gather<8, false>, 0, false},
      {"F4", launch_gather<4, false>, 0, false},
      {"F16", launch_gather<16, false>, 0, false},
      {"F8 + nc loads", launch_gather<8, true>, 0, false},
      {"F8, 2 blocks/SM", launch_gather<8, false>, 2, false},
      {"F8, 16 blocks/SM", launch_gather<8, false>, 16, false},
      {"F8 split: remote and local streams", launch_gather<8, false>, 0, true},
      {"F16 split: remote and local streams", launch_gather<16, false>, 0, true},
  };
  for (const variant& v : variants) {
    std::printf("%-40s", v.name);
    for (int rb : sizes) {
      const std::int64_t rows = static_cast<std::int64_t>(half_bytes / rb) * 2;
      const halves t{part[0], part[1], rows / 2};
      for (gpu_state& g : gs) {
        CK(cudaSetDevice(g.device));
        random_indices<<<sms * 8, 256>>>(g.idx, n, rows, 1234 + g.device);
        CK(cudaMemset(g.counts, 0, 16));
        const std::int64_t lo = g.device == 0 ? 0 : rows / 2, hi = g.device == 0 ? rows / 2 : rows;
        split_kernel<<<sms * 8, 256>>>(g.idx, n, lo, hi, g.local, g.remote, g.counts);
        unsigned long long c[2];
        CK(cudaMemcpy(c, g.counts, 16, cudaMemcpyDeviceToHost));
        g.n_local = static_cast<std::int64_t>(c[0]);
        g.n_remote = static_cast<std::int64_t>(c[1]);
      }
      const int W = rb / 16;
      const double ms = both_ms(gs, [&](gpu_state& g) {
        if (!v.split) {
          v.launch(t, g, nullptr, n, W, v.blocks_per_sm, 1, g.main);
          return;
        }
        // Remote rows on the main stream (started first), local rows beside them, each kernel
        // on half of the resident blocks so that both are resident at once.
        CK(cudaStreamWaitEvent(g.side, g.start, 0));
        v.launch(t, g, g.remote, g.n_remote, W, v.blocks_per_sm, 2, g.main);
        v.launch(t, g, g.local, g.n_local, W, v.blocks_per_sm, 2, g.side);
        CK(cudaEventRecord(g.side_done, g.side));
        CK(cudaStreamWaitEvent(g.main, g.side_done, 0));
      });
      const double rate = static_cast<double>(n) * rb / ms / 1e6;
      std::printf("%8.1f (%2.0f%%)", rate, 100.0 * rate / (2 * peer));
    }
    std::printf("\n");
  }
  return 0;
}
