/*
 * Relabel kernels of the GPU sampler (sampling_run.cuh): the open-addressing key table, the
 * insertion of the seeds (hop 0) and of a hop's entries, the new-node flags that the rank scan
 * reads and the assignment of local ids.  Templates only: K is the key width (unsigned int
 * below 2^32 - 1 nodes, else unsigned long long), instantiated in sampling_keys32.cu and
 * sampling_keys64.cu.
 */
#pragma once

#include "sample_common.cuh"

#include <cstdint>

namespace wholestore::graph::gpu {

// ---- the key table -----------------------------------------------------------------------------

/// Open addressing with linear probing; keys[s] == empty marks a free slot, first[s] the
/// smallest entry position holding keys[s] (0xffffffff while none).
template <typename K>
struct key_table {
  K* keys;
  unsigned* first;
  std::uint32_t mask;
  static constexpr K empty = ~K(0);
};

__device__ __forceinline__ std::uint32_t slot_hash(unsigned long long key) {
  return static_cast<std::uint32_t>(d::mix64(key) >> 32);
}

/// Inserts `key` seen at entry position `pos`; returns its slot.
template <typename K>
__device__ __forceinline__ std::uint32_t table_insert(key_table<K> t, K key, unsigned pos) {
  std::uint32_t s = slot_hash(key) & t.mask;
  for (;;) {
    const K cur = __ldcg(&t.keys[s]);
    if (cur == key) break;
    if (cur == key_table<K>::empty) {
      const K prev = atomicCAS(&t.keys[s], key_table<K>::empty, key);
      if (prev == key_table<K>::empty || prev == key) break;
    }
    s = (s + 1) & t.mask;
  }
  atomicMin(&t.first[s], pos);
  return s;
}

/// Hop 0 entries: the seeds.  A seed outside the graph is recorded in *bad (as ~position, the
/// largest for the first one) and replaced by node 0; the call throws before returning.
template <typename K>
__global__ void seed_insert_kernel(const std::int64_t* seeds, std::int64_t n,
                                   std::int64_t num_nodes, key_table<K> table, std::uint32_t* slot,
                                   unsigned long long* bad) {
  for (std::int64_t i = thread_id(); i < n; i += thread_count()) {
    std::int64_t s = seeds[i];
    if (s < 0 || s >= num_nodes) {
      atomicMax(bad, ~static_cast<unsigned long long>(i));
      s = 0;
    }
    slot[i] = table_insert(table, static_cast<K>(s), static_cast<unsigned>(i));
  }
}

/// The hop's table entries: entry x < n_dst is dst node x, entry n_dst + e the node id at edge
/// eids[e], read from col (or from `gathered` values, distributed memory), for e < *n_edges.
/// A node id outside [0, num_nodes) is recorded in `fault` and replaced by node 0.
template <typename K, typename ColGen>
__global__ void entry_insert_kernel(const std::int64_t* dst, const std::int64_t* eids,
                                    const std::int64_t* gathered, ColGen col, device_count n_dst,
                                    const std::int64_t* n_edges, key_table<K> table,
                                    std::uint32_t* slot, std::int64_t num_nodes, long long* fault) {
  const std::int64_t nd = n_dst.get();
  const std::int64_t total = nd + *n_edges;
  for (std::int64_t x = thread_id(); x < total; x += thread_count()) {
    std::int64_t id;
    if (x < nd) {
      id = dst[x];
    } else {
      id =
          gathered != nullptr ? gathered[x - nd] : static_cast<std::int64_t>(*col.At(eids[x - nd]));
      if (id < 0 || id >= num_nodes) {
        record_fault(fault, fault_column, eids != nullptr ? eids[x - nd] : -1);
        id = 0;
      }
    }
    slot[x] = table_insert(table, static_cast<K>(id), static_cast<unsigned>(x));
  }
}

/// 1 for entry x when it is the first occurrence of a node that is not a dst node (x past
/// the entries: 0), the input of the new-node rank scan.
template <typename K>
struct new_node_flag {
  key_table<K> table;
  const std::uint32_t* slot;
  device_count n_dst;
  const std::int64_t* n_edges;  ///< null: no edges (hop 0: every entry counts from n_dst = 0)
  std::int64_t n_entries;       ///< entries when n_edges is null
  WM_HOST_DEVICE std::int32_t operator()(std::int64_t x) const {
    const std::int64_t nd = n_dst.get();
    const std::int64_t total = n_edges != nullptr ? nd + *n_edges : n_entries;
    if (x < nd || x >= total) return 0;
    return table.first[slot[x]] == static_cast<unsigned>(x) ? 1 : 0;
  }
};

/// flags[x] = f(x) for x <= bound.
template <typename K>
__global__ void mark_new_kernel(new_node_flag<K> f, std::int64_t bound, std::int32_t* flags) {
  for (std::int64_t x = thread_id(); x <= bound; x += thread_count()) flags[x] = f(x);
}

/// Local ids: src_index (entries past n_dst; null for the seeds), src_nodes, the src count
/// (n_dst + new nodes, rank[bound]) in *num_src and the edge count in *edges_out.
template <typename K>
__global__ void assign_kernel(new_node_flag<K> f, const std::int32_t* rank, std::int64_t bound,
                              std::int32_t* src_index, std::int64_t* src_nodes, long long* num_src,
                              long long* edges_out) {
  const std::int64_t nd = f.n_dst.get();
  const std::int64_t ne = f.n_edges != nullptr ? *f.n_edges : f.n_entries;
  const std::int64_t total = nd + ne;
  if (thread_id() == 0) {
    *num_src = static_cast<long long>(nd + rank[bound]);
    if (edges_out != nullptr) *edges_out = static_cast<long long>(ne);
  }
  for (std::int64_t x = thread_id(); x < total; x += thread_count()) {
    const std::uint32_t s = f.slot[x];
    const std::int64_t first = f.table.first[s];
    const std::int64_t local = first < nd ? first : nd + rank[first];
    if (x >= nd && src_index != nullptr) src_index[x - nd] = static_cast<std::int32_t>(local);
    if (first == x) src_nodes[local] = static_cast<std::int64_t>(f.table.keys[s]);
  }
}

}  // namespace wholestore::graph::gpu
