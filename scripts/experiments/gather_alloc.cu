// Does the way a table is allocated change random small-row gathers (issue 15)?  The same
// kernel (the library's row order: groups of W lanes per row, 8 rows in flight per thread)
// reads tables made by cudaMalloc, by one cuMemCreate piece mapped at the minimum VMM
// alignment (what continuous memory does), by the same piece mapped at a 1 GiB-aligned
// address, and by several pieces (a continuous table of several ranks on one GPU).  Small
// tables show the cost of address translation by its absence.  Standalone:
//   nvcc -O3 -std=c++17 -arch=sm_90 scripts/experiments/gather_alloc.cu -lcuda -o gather_alloc
//   ./gather_alloc [lookups]
#include "experiment_common.cuh"

#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CU(x)                                                                        \
  do {                                                                               \
    CUresult r_ = (x);                                                               \
    if (r_ != CUDA_SUCCESS) {                                                        \
      const char* s_ = nullptr;                                                      \
      cuGetErrorString(r_, &s_);                                                     \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, s_ ? s_ : "?"); \
      std::exit(1);                                                                  \
    }                                                                                \
  } while (0)

constexpr int threads_per_block = 256;
constexpr int in_flight = 8;

__global__ void __launch_bounds__(threads_per_block)
    gather_kernel(const char* __restrict__ table, const std::int64_t* __restrict__ idx,
                  char* __restrict__ out, std::int64_t n, int W, int shift) {
  const std::size_t row_bytes = static_cast<std::size_t>(W) * 16;
  const int lane = threadIdx.x & ((1 << shift) - 1);
  const std::int64_t tid = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::int64_t groups = (static_cast<std::int64_t>(gridDim.x) * blockDim.x) >> shift;
  const bool active = lane < W;
  for (std::int64_t r0 = (tid >> shift) * in_flight; r0 < n; r0 += groups * in_flight) {
    uint4 v[in_flight];
    uint4* d[in_flight];
#pragma unroll
    for (int k = 0; k < in_flight; ++k) {
      const std::int64_t i = r0 + k;
      d[k] = nullptr;
      if (active && i < n) {
        const std::int64_t r = idx[i];
        d[k] = reinterpret_cast<uint4*>(out + i * row_bytes) + lane;
        v[k] = reinterpret_cast<const uint4*>(table + r * row_bytes)[lane];
      }
    }
#pragma unroll
    for (int k = 0; k < in_flight; ++k)
      if (d[k] != nullptr) *d[k] = v[k];
  }
}

struct table_alloc {
  char* ptr = nullptr;
  std::size_t reserved = 0;
  std::vector<CUmemGenericAllocationHandle> handles;
  bool vmm = false;
};

// pieces > 0: VMM with that many equal pieces, the range reserved at `align` bytes.
table_alloc make_table(std::size_t bytes, int pieces, std::size_t align) {
  table_alloc t;
  if (pieces == 0) {
    CK(cudaMalloc(&t.ptr, bytes));
  } else {
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    std::size_t g = 0;
    CU(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    const std::size_t piece = (bytes / pieces + g - 1) / g * g;
    t.reserved = piece * pieces;
    CUdeviceptr base = 0;
    CU(cuMemAddressReserve(&base, t.reserved, std::max(align, g), 0, 0));
    for (int p = 0; p < pieces; ++p) {
      CUmemGenericAllocationHandle h = 0;
      CU(cuMemCreate(&h, piece, &prop, 0));
      CU(cuMemMap(base + p * piece, piece, 0, h, 0));
      t.handles.push_back(h);
    }
    CUmemAccessDesc acc{};
    acc.location = prop.location;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CU(cuMemSetAccess(base, t.reserved, &acc, 1));
    t.ptr = reinterpret_cast<char*>(base);
    t.vmm = true;
  }
  CK(cudaMemset(t.ptr, 1, bytes));
  return t;
}

void free_table(table_alloc& t) {
  if (!t.vmm) {
    CK(cudaFree(t.ptr));
    return;
  }
  CU(cuMemUnmap(reinterpret_cast<CUdeviceptr>(t.ptr), t.reserved));
  for (auto h : t.handles) CU(cuMemRelease(h));
  CU(cuMemAddressFree(reinterpret_cast<CUdeviceptr>(t.ptr), t.reserved));
}

int main(int argc, char** argv) {
  const std::int64_t n = argc > 1 ? std::atoll(argv[1]) : 4194304;
  CK(cudaFree(nullptr));
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  char* out = nullptr;
  std::int64_t* idx = nullptr;
  CK(cudaMalloc(&out, static_cast<std::size_t>(n) * 512));
  CK(cudaMalloc(&idx, n * sizeof(std::int64_t)));
  {
    char* a = nullptr;
    CK(cudaMalloc(&a, std::size_t(1) << 30));
    const double ms = median_ms(
        [&] { CK(cudaMemcpyAsync(out, a, std::size_t(n) * 256, cudaMemcpyDeviceToDevice)); });
    std::printf("device %s, %d SMs; D2D copy %.1f GB/s (read+write)\n", prop.name, sms,
                2.0 * n * 256 / ms / 1e6);
    CK(cudaFree(a));
  }
  struct mode {
    const char* name;
    int pieces;
    std::size_t align;
  };
  const mode modes[] = {{"cudaMalloc", 0, 0},
                        {"VMM 1 piece, min align", 1, 0},
                        {"VMM 1 piece, 1 GiB align", 1, std::size_t(1) << 30},
                        {"VMM 4 pieces, min align", 4, 0},
                        {"VMM 4 pieces, 1 GiB align", 4, std::size_t(1) << 30}};
  const double gibs[] = {0.25, 2, 8};
  const int sizes[] = {64, 128, 256, 512};
  std::printf("%-28s %6s", "allocation", "GiB");
  for (int rb : sizes) std::printf("%9d B", rb);
  std::printf("   (GB/s of rows gathered, %lld random rows)\n", static_cast<long long>(n));
  for (const mode& m : modes) {
    for (double gib : gibs) {
      const std::size_t bytes = static_cast<std::size_t>(gib * (1ull << 30));
      table_alloc t = make_table(bytes, m.pieces, m.align);
      std::printf("%-28s %6.2f", m.name, gib);
      for (int rb : sizes) {
        const std::int64_t rows = static_cast<std::int64_t>(bytes / rb);
        random_indices<<<sms * 8, 256>>>(idx, n, rows, 1234);
        CK(cudaDeviceSynchronize());
        const int W = rb / 16;
        int shift = 0;
        while ((1 << shift) < W) ++shift;
        int occ = 0;
        CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, gather_kernel, threads_per_block,
                                                         0));
        const std::int64_t needed =
            (((n + in_flight - 1) / in_flight << shift) + threads_per_block - 1) /
            threads_per_block;
        const int blocks =
            static_cast<int>(std::min<std::int64_t>(needed, std::int64_t(sms) * occ));
        const double ms = median_ms([&] {
          gather_kernel<<<blocks, threads_per_block>>>(t.ptr, idx, out, n, W, shift);
          CK(cudaGetLastError());
        });
        std::printf("%11.1f", static_cast<double>(n) * rb / ms / 1e6);
      }
      std::printf("\n");
      free_table(t);
    }
  }
  return 0;
}
