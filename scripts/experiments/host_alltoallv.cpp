// Host communicator alltoallv rate between the ranks of one host (CPU only).  Build against a
// build directory's library, e.g.
//   g++ -O2 -std=c++17 -Iwholememory/include scripts/experiments/host_alltoallv.cpp \
//     build-nocuda/wholememory/libwholestore_wholememory.a -lpthread -o /tmp/a2a
//   build-nocuda/apps/wholestore launch -n 2 -- /tmp/a2a 134217728
// Each rank sends `bytes` split evenly over all ranks (itself included); prints ms and GB/s.
#include <wholememory/bootstrap.hpp>
#include <wholememory/communicator.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

int main(int argc, char** argv) {
  const std::size_t bytes = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : (128u << 20);
  std::shared_ptr<wholememory::bootstrap> bs = wholememory::make_job_bootstrap();
  auto comm = wholememory::make_host_communicator(bs);
  const std::size_t n = static_cast<std::size_t>(comm->size());
  const std::size_t per = bytes / 4 / n;  // float elements per destination
  std::vector<float> send(per * n, 1.0f), recv(per * n, 0.0f);
  std::vector<std::size_t> counts(n, per), displs(n);
  for (std::size_t i = 0; i < n; ++i) displs[i] = i * per;
  for (int r = 0; r < 6; ++r) {
    comm->barrier(nullptr);
    const auto t0 = std::chrono::steady_clock::now();
    comm->alltoallv(send.data(), counts.data(), displs.data(), recv.data(), counts.data(),
                    displs.data(), wholememory::dtype::float32, nullptr);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (comm->rank() == 0 && r > 0)
      std::printf("alltoallv %zu bytes per rank, %zu ranks: %.2f ms, %.2f GB/s per rank\n",
                  per * n * 4, n, s * 1e3, per * n * 4 / s / 1e9);
  }
  return 0;
}
