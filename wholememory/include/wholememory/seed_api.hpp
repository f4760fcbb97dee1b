/*
 * The seed-compatible API (namespace whole_memory), a thin layer over wholememory::allocation.
 *
 * Two modes, as in the seed:
 *  - single process, several GPUs (Wmsp*): one process places one allocation over a list of
 *    GPUs (continuous, one virtual range) or in pinned host memory;
 *  - one process per GPU (Wmmp*, Wcmmp*): the processes of one host allocate collectively;
 *    each uses its current CUDA device.
 *
 * Every function returns a status code and never throws; WmLastErrorMessage() gives the text
 * of the calling thread's last failure.  Where the seed ties a call to device memory, a *Host
 * variant places the same allocation in shared host memory.
 */
#pragma once

#include <wholememory/ptr_gen.hpp>

#include <cstddef>

namespace whole_memory {

enum WmStatus : int {
  WM_SUCCESS = 0,
  WM_ERROR_INVALID_ARGUMENT = 1,  ///< a bad argument or an unsupported combination
  WM_ERROR_MISMATCH = 2,          ///< ranks called a collective with different arguments
  WM_ERROR_NOT_INITIALIZED = 3,   ///< WholeMemoryInit / WmmpInit missing, or called twice
  WM_ERROR_CUDA = 4,
  WM_ERROR_NCCL = 5,
  WM_ERROR_SYSTEM = 6,
  WM_ERROR_OUT_OF_MEMORY = 7,
  WM_ERROR_TIMEOUT = 8,  ///< a peer died or did not arrive in time
  WM_ERROR_UNKNOWN = 9,
};

/// Name of a status ("WM_SUCCESS", ...).
const char* WmStatusName(WmStatus status);
/// Message of the calling thread's last failed call ("" when none).
const char* WmLastErrorMessage();

/// Initializes the library; call before any other function.
WmStatus WholeMemoryInit();
/// Frees everything still allocated in both modes and finalizes the multi-process mode.
WmStatus WholeMemoryFinalize();

// ---- Single process, several GPUs ---------------------------------------------------------

/// Allocates `size` bytes as one continuous range over the GPUs in dev_list (all GPUs when
/// dev_list is null or dev_count is 0).  Needs peer access between them.
WmStatus WmspMalloc(void** ptr, std::size_t size, const int* dev_list = nullptr, int dev_count = 0);
/// Allocates `size` bytes of pinned host memory that every GPU can read.
WmStatus WmspMallocHost(void** ptr, std::size_t size);
/// Frees memory from WmspMalloc or WmspMallocHost.
WmStatus WmspFree(void* ptr);

// ---- One process per GPU ------------------------------------------------------------------

/// The out-of-band collectives a caller may supply instead of the built-in TCP bootstrap.
/// `ranks`/`rank_count` select a subset of the group (nullptr/0: all ranks).
class CollectiveCommunicator {
 public:
  virtual ~CollectiveCommunicator() = default;
  virtual void SetRankAndSize(int rank, int size) = 0;
  virtual int Rank() = 0;
  virtual int Size() = 0;
  /// Sends send_size bytes to each rank of the subset, receives recv_size bytes from each.
  virtual void AllToAll(const void* send_buf, int send_size, void* recv_buf, int recv_size,
                        const int* ranks, int rank_count) = 0;
  virtual void Barrier(const int* ranks, int rank_count) = 0;
};

/// Starts multi-process mode for this process as `group_rank` of `group_size`, on the current
/// CUDA device.  With no communicator, ranks meet over TCP at $MASTER_ADDR:$MASTER_PORT
/// (default 127.0.0.1:29500).  Takes ownership of `collective_communicator`, as the seed did.
/// Collective.
WmStatus WmmpInit(int group_rank, int group_size,
                  CollectiveCommunicator* collective_communicator = nullptr);
/// Frees every Wmmp/Wcmmp allocation still alive and ends multi-process mode.  Collective.
WmStatus WmmpFinalize();
/// Allocates `size` bytes of continuous device memory over the ranks (all ranks, or the
/// `ranks` subset, every member calling).  Collective.
WmStatus WmmpMalloc(void** ptr, std::size_t size, const int* ranks = nullptr, int rank_count = 0);
/// The same in host memory shared by the ranks' processes.  Collective.
WmStatus WmmpMallocHost(void** ptr, std::size_t size, const int* ranks = nullptr,
                        int rank_count = 0);
/// Frees memory from WmmpMalloc or WmmpMallocHost.  Collective over the ranks that made it.
WmStatus WmmpFree(void* ptr);
/// True when `dev` (-1: the CPU) can access `ptr` from WmmpMalloc/WmmpMallocHost.
bool WmmpCanAccessFrom(void* ptr, int dev);
/// Barrier over all ranks or the `ranks` subset.
WmStatus WmmpBarrier(const int* ranks = nullptr, int rank_count = 0);

// ---- Chunked memory, one process per GPU --------------------------------------------------

using WholeChunkedMemoryHandle = wholememory::chunked_view;
typedef struct WholeChunkedMemory* WholeChunkedMemory_t;

/// Allocates `size` bytes as one chunk per rank on the ranks' devices; chunk boundaries are
/// multiples of min_granularity rounded up to a multiple of 16 bytes.  Collective.
WmStatus WcmmpMalloc(WholeChunkedMemory_t* pwcmt, std::size_t size, std::size_t min_granularity = 0,
                     const int* ranks = nullptr, int rank_count = 0);
/// The same in host memory, one shared segment per rank.  Collective.
WmStatus WcmmpMallocHost(WholeChunkedMemory_t* pwcmt, std::size_t size,
                         std::size_t min_granularity = 0, const int* ranks = nullptr,
                         int rank_count = 0);
/// Frees a chunked allocation.  Collective.
WmStatus WcmmpFree(WholeChunkedMemory_t wcmt);
/// The handle kernels on `dev_id` pass to PtrGen<const WholeChunkedMemoryHandle, T> (a pointer
/// into that device's memory), or a host copy for dev_id -1.  nullptr on failure.
WholeChunkedMemoryHandle* GetDeviceChunkedHandle(WholeChunkedMemory_t wcmt, int dev_id);

using wholememory::PtrGen;

}  // namespace whole_memory
