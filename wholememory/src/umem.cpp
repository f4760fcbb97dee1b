// The C boundary of umem.h: status handling, argument checks, and copies between any two
// contexts (umem_context.hpp).  Nothing throws across it.
#include "umem_context.hpp"

#include <wholememory/device.hpp>
#include <wholememory/error.hpp>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <sstream>
#include <string>
#include <vector>

namespace {

using wholememory::detail::umem_context;
using wholememory::detail::umem_failure;
using wholememory::detail::umem_piece;

umemVirtual* head(void* ctx) { return static_cast<umemVirtual*>(ctx); }
umem_context& impl(umemVirtual* v) { return *static_cast<umem_context*>(v->impl); }

std::string hex(std::uintptr_t adr) {
  std::ostringstream os;
  os << "0x" << std::hex << adr;
  return os.str();
}

void append_status(umemVirtual* v, umemStatusType type, const std::string& text) {
  std::string joined = v->message == nullptr ? text : std::string(v->message) + "\n" + text;
  char* copy = static_cast<char*>(std::malloc(joined.size() + 1));
  if (copy != nullptr) {
    std::memcpy(copy, joined.c_str(), joined.size() + 1);
    std::free(v->message);
    v->message = copy;
  }  // else: keep the old message, the status below still says what kind of failure it was
  v->status = type;
}

void clean(umemVirtual* v) {
  std::free(v->message);
  v->message = nullptr;
  v->status = umemOK;
}

void fail(umemVirtual* v, umemStatusType type, const char* call, const std::string& reason) {
  append_status(v, type, std::string(call) + ": " + reason);
}

// Inside a catch block: records the exception being handled on `v`.
void report(umemVirtual* v, const char* call) {
  try {
    throw;
  } catch (const umem_failure& e) {
    fail(v, e.status(), call, e.what());
  } catch (const wholememory::out_of_memory& e) {
    fail(v, umemMemoryError, call, e.what());
  } catch (const std::bad_alloc&) {
    fail(v, umemMemoryError, call, "out of host memory");
  } catch (const wholememory::cuda_error& e) {
    fail(v, umemRuntimeError, call, e.what());
  } catch (const wholememory::system_error& e) {
    fail(v, umemIOError, call, e.what());
  } catch (const wholememory::logic_error& e) {
    fail(v, umemValueError, call, e.what());
  } catch (const std::exception& e) {
    fail(v, umemRuntimeError, call, e.what());
  } catch (...) {
    fail(v, umemRuntimeError, call, "unknown exception");
  }
}

// True when calls may act on the context: not null, ok, constructed.  A context whose
// constructor failed (or that was destructed) gets a status saying so once it is cleaned.
bool usable(umemVirtual* v, const char* call) {
  if (v == nullptr || v->status != umemOK) return false;
  if (v->impl == nullptr) {
    fail(v, umemValueError, call,
         "the context is not constructed (its constructor failed, or umem_dtor ran)");
    return false;
  }
  return true;
}

// Runs body(context) for a one-context call; its exceptions become the context's status.
template <typename Body>
std::uintptr_t on_one(void* ctx, const char* call, Body&& body) {
  umemVirtual* v = head(ctx);
  if (!usable(v, call)) return 0;
  try {
    return body(impl(v));
  } catch (...) {
    report(v, call);
    return 0;
  }
}

// Runs body(blame) for a two-context call; `blame` names the context a failure is recorded on
// (the body moves it to the side it works on).
template <typename Body>
std::uintptr_t on_two(void* first, void* second, const char* call, Body&& body) {
  umemVirtual* a = head(first);
  umemVirtual* b = head(second);
  if (!usable(a, call) || !usable(b, call)) return 0;
  umemVirtual* blame = a;
  try {
    return body(blame);
  } catch (...) {
    report(blame, call);
    return 0;
  }
}

void check_range(std::uintptr_t adr, std::size_t bytes) {
  if (bytes > std::numeric_limits<std::uintptr_t>::max() - adr)
    WM_UMEM_FAIL(umemIndexError,
                 "address " << hex(adr) << " + " << bytes << " bytes overflows the address range");
}

bool same_memory(umemVirtual* a, umemVirtual* b) {
  if (a == b) return true;
  if (a->type != b->type || a->impl == nullptr || b->impl == nullptr) return false;
  return impl(a).same_memory(impl(b));
}

// One side of a copy: its bytes as pieces of this process's memory, or (pieces empty) only
// through read/write.
struct copy_side {
  umemVirtual* ctx;
  std::uintptr_t adr;
  std::vector<umem_piece> pieces;
  bool mapped = false;
};

// Copies `bytes` bytes between the two sides piece by piece: copy_bytes between mapped bytes,
// read/write straight to or from host pieces, a bounded host staging buffer otherwise.
void copy_bytes_between(umemVirtual* src, std::uintptr_t src_adr, umemVirtual* dst,
                        std::uintptr_t dst_adr, std::size_t bytes, umemVirtual*& blame) {
  if (bytes == 0) return;
  copy_side s{src, src_adr, {}}, d{dst, dst_adr, {}};
  for (copy_side* side : {&s, &d}) {
    blame = side->ctx;
    check_range(side->adr, bytes);
    side->mapped = impl(side->ctx).map(side->adr, bytes, side->pieces);
    if (!side->mapped) side->pieces.assign(1, umem_piece{nullptr, bytes, true});
  }
  std::vector<char> staging;
  auto stage = [&](std::size_t want) -> char* {
    if (staging.size() < want) staging.resize(want);
    return staging.data();
  };
  std::size_t si = 0, di = 0, s_used = 0, d_used = 0;
  for (std::size_t done = 0; done < bytes;) {
    const umem_piece& sp = s.pieces[si];
    const umem_piece& dp = d.pieces[di];
    std::size_t n = std::min(sp.bytes - s_used, dp.bytes - d_used);
    char* sptr = s.mapped ? static_cast<char*>(sp.ptr) + s_used : nullptr;
    char* dptr = d.mapped ? static_cast<char*>(dp.ptr) + d_used : nullptr;
    if (sptr != nullptr && dptr != nullptr) {
      blame = dst;
      wholememory::copy_bytes(dptr, sptr, n);
    } else if (sptr != nullptr && sp.host) {
      blame = dst;
      impl(dst).write(dst_adr + done, sptr, n);
    } else if (dptr != nullptr && dp.host) {
      blame = src;
      impl(src).read(src_adr + done, dptr, n);
    } else {
      for (std::size_t k = 0; k < n;) {
        std::size_t m = std::min(n - k, wholememory::detail::umem_staging_bytes);
        char* buf = stage(m);
        blame = src;
        if (sptr != nullptr) {
          wholememory::copy_bytes(buf, sptr + k, m);
        } else {
          impl(src).read(src_adr + done + k, buf, m);
        }
        blame = dst;
        if (dptr != nullptr) {
          wholememory::copy_bytes(dptr + k, buf, m);
        } else {
          impl(dst).write(dst_adr + done + k, buf, m);
        }
        k += m;
      }
    }
    done += n;
    s_used += n;
    d_used += n;
    if (s_used == sp.bytes) {
      ++si;
      s_used = 0;
    }
    if (d_used == dp.bytes) {
      ++di;
      d_used = 0;
    }
  }
}

std::uintptr_t aligned_alloc_in(umem_context& c, std::size_t alignment, std::size_t size) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0)
    WM_UMEM_FAIL(umemValueError, "alignment " << alignment << " is not a power of two");
  alignment = std::max(alignment, c.fundamental_alignment());
  if (size > std::numeric_limits<std::size_t>::max() - alignment)
    WM_UMEM_FAIL(umemValueError, "size " << size << " + alignment " << alignment << " overflows");
  // `alignment` more bytes than asked: the aligned block, even of 0 bytes, starts inside the
  // range reserved for it, so two aligned addresses never coincide.
  std::uintptr_t origin = c.alloc(size + alignment);
  std::uintptr_t aligned = (origin + alignment - 1) & ~static_cast<std::uintptr_t>(alignment - 1);
  c.aligned_origins[aligned] = origin;
  return aligned;
}

void free_in(umem_context& c, std::uintptr_t adr) {
  if (c.aligned_origins.count(adr) != 0)
    WM_UMEM_FAIL(umemValueError, "address " << hex(adr)
                                            << " came from umem_aligned_alloc; free it with "
                                               "umem_free_aligned");
  if (!c.free(adr))
    WM_UMEM_FAIL(umemValueError, "address " << hex(adr)
                                            << " is not a live allocation of this context "
                                               "(null, allocated elsewhere, or already freed)");
}

void free_aligned_in(umem_context& c, std::uintptr_t aligned_adr) {
  auto it = c.aligned_origins.find(aligned_adr);
  if (it == c.aligned_origins.end())
    WM_UMEM_FAIL(umemValueError, "address " << hex(aligned_adr)
                                            << " is not a live umem_aligned_alloc allocation "
                                               "of this context");
  c.free(it->second);
  c.aligned_origins.erase(it);
}

template <typename Make>
void construct(umemVirtual* v, umemDeviceType type, const char* call, Make&& make) {
  if (v == nullptr) return;
  v->type = type;
  v->status = umemOK;
  v->message = nullptr;
  v->impl = nullptr;
  try {
    v->impl = make();
  } catch (...) {
    report(v, call);
  }
}

// Checks nbytes against the sizes of a _safe call; false (status set) when one is exceeded.
bool sizes_fit(const char* call, umemVirtual* src, std::size_t src_size, umemVirtual* dst,
               std::size_t dst_size, std::size_t nbytes) {
  if (!usable(src, call) || !usable(dst, call)) return false;
  if (nbytes > src_size) {
    fail(src, umemIndexError, call,
         std::to_string(nbytes) + " bytes exceed the source's " + std::to_string(src_size));
    return false;
  }
  if (nbytes > dst_size) {
    fail(dst, umemIndexError, call,
         std::to_string(nbytes) + " bytes exceed the destination's " + std::to_string(dst_size));
    return false;
  }
  return true;
}

void copy_call(const char* call, void* src, std::uintptr_t src_adr, void* dst,
               std::uintptr_t dst_adr, std::size_t nbytes) {
  on_two(src, dst, call, [&](umemVirtual*& blame) -> std::uintptr_t {
    copy_bytes_between(head(src), src_adr, head(dst), dst_adr, nbytes, blame);
    return 0;
  });
}

// sync: a copy unless both are the same bytes of the same memory.
void sync_call(const char* call, void* from, std::uintptr_t from_adr, void* to,
               std::uintptr_t to_adr, std::size_t nbytes) {
  on_two(from, to, call, [&](umemVirtual*& blame) -> std::uintptr_t {
    if (from_adr == to_adr && same_memory(head(from), head(to))) return 0;
    copy_bytes_between(head(from), from_adr, head(to), to_adr, nbytes, blame);
    return 0;
  });
}

}  // namespace

extern "C" {

void umemHost_ctor(umemHost* ctx) {
  if (ctx == nullptr) return;
  construct(&ctx->super, umemHostDevice, "umemHost_ctor",
            [] { return wholememory::detail::make_host_context(); });
}

void umemFile_ctor(umemFile* ctx, const char* filename, const char* mode) {
  if (ctx == nullptr) return;
  construct(&ctx->super, umemFileDevice, "umemFile_ctor",
            [&] { return wholememory::detail::make_file_context(filename, mode); });
}

void umemCuda_ctor(umemCuda* ctx, int device) {
  if (ctx == nullptr) return;
  ctx->device = device;
  construct(&ctx->super, umemCudaDevice, "umemCuda_ctor",
            [&] { return wholememory::detail::make_cuda_context(device); });
}

void umemWholeMemory_ctor(umemWholeMemory* ctx, void* memory) {
  if (ctx == nullptr) return;
  construct(&ctx->super, umemWholeMemoryDevice, "umemWholeMemory_ctor", [&] {
    return wholememory::detail::make_wholememory_context(
        static_cast<wholememory::allocation*>(memory));
  });
}

void umem_dtor(void* ctx) {
  umemVirtual* v = head(ctx);
  if (v == nullptr) return;
  delete static_cast<umem_context*>(v->impl);  // context destructors never throw
  v->impl = nullptr;
  v->type = umemVirtualDevice;
  clean(v);
}

uintptr_t umem_alloc(void* ctx, size_t nbytes) {
  return on_one(ctx, "umem_alloc", [&](umem_context& c) { return c.alloc(nbytes); });
}

uintptr_t umem_calloc(void* ctx, size_t nmemb, size_t size) {
  return on_one(ctx, "umem_calloc", [&](umem_context& c) {
    if (size != 0 && nmemb > std::numeric_limits<std::size_t>::max() / size)
      WM_UMEM_FAIL(umemValueError, nmemb << " members of " << size << " bytes overflow size_t");
    std::size_t bytes = nmemb * size;
    std::uintptr_t adr = c.alloc(bytes);
    try {
      if (bytes != 0) c.set(adr, 0, bytes);
    } catch (...) {
      c.free(adr);
      throw;
    }
    return adr;
  });
}

void umem_free(void* ctx, uintptr_t adr) {
  on_one(ctx, "umem_free", [&](umem_context& c) -> std::uintptr_t {
    free_in(c, adr);
    return 0;
  });
}

uintptr_t umem_aligned_alloc(void* ctx, size_t alignment, size_t size) {
  return on_one(ctx, "umem_aligned_alloc", [&](umem_context& c) {
    if (alignment != 0 && size % alignment != 0)
      WM_UMEM_FAIL(umemValueError,
                   "size " << size << " is not a multiple of alignment " << alignment);
    return aligned_alloc_in(c, alignment, size);
  });
}

uintptr_t umem_aligned_origin(void* ctx, uintptr_t aligned_adr) {
  return on_one(ctx, "umem_aligned_origin", [&](umem_context& c) {
    auto it = c.aligned_origins.find(aligned_adr);
    if (it == c.aligned_origins.end())
      WM_UMEM_FAIL(umemValueError, "address " << hex(aligned_adr)
                                              << " is not a live umem_aligned_alloc "
                                                 "allocation of this context");
    return it->second;
  });
}

void umem_free_aligned(void* ctx, uintptr_t aligned_adr) {
  on_one(ctx, "umem_free_aligned", [&](umem_context& c) -> std::uintptr_t {
    free_aligned_in(c, aligned_adr);
    return 0;
  });
}

void umem_aligned_free(void* ctx, uintptr_t aligned_adr) { umem_free_aligned(ctx, aligned_adr); }

size_t umem_fundamental_align(void* ctx) {
  umemVirtual* v = head(ctx);
  if (v == nullptr || v->impl == nullptr) return 1;
  return impl(v).fundamental_alignment();
}

void umem_set(void* ctx, uintptr_t adr, int c, size_t nbytes) {
  on_one(ctx, "umem_set", [&](umem_context& context) -> std::uintptr_t {
    if (nbytes == 0) return 0;
    check_range(adr, nbytes);
    context.set(adr, c, nbytes);
    return 0;
  });
}

void umem_set_safe(void* ctx, uintptr_t adr, size_t size, int c, size_t nbytes) {
  umemVirtual* v = head(ctx);
  if (!usable(v, "umem_set_safe")) return;
  if (nbytes > size) {
    fail(v, umemIndexError, "umem_set_safe",
         std::to_string(nbytes) + " bytes exceed the " + std::to_string(size) +
             " bytes available at " + hex(adr));
    return;
  }
  umem_set(ctx, adr, c, nbytes);
}

void umem_copy_to(void* src_ctx, uintptr_t src_adr, void* dest_ctx, uintptr_t dest_adr,
                  size_t nbytes) {
  copy_call("umem_copy_to", src_ctx, src_adr, dest_ctx, dest_adr, nbytes);
}

void umem_copy_from(void* dest_ctx, uintptr_t dest_adr, void* src_ctx, uintptr_t src_adr,
                    size_t nbytes) {
  copy_call("umem_copy_from", src_ctx, src_adr, dest_ctx, dest_adr, nbytes);
}

void umem_copy_to_safe(void* src_ctx, uintptr_t src_adr, size_t src_size, void* dest_ctx,
                       uintptr_t dest_adr, size_t dest_size, size_t nbytes) {
  if (sizes_fit("umem_copy_to_safe", head(src_ctx), src_size, head(dest_ctx), dest_size, nbytes))
    copy_call("umem_copy_to_safe", src_ctx, src_adr, dest_ctx, dest_adr, nbytes);
}

void umem_copy_from_safe(void* dest_ctx, uintptr_t dest_adr, size_t dest_size, void* src_ctx,
                         uintptr_t src_adr, size_t src_size, size_t nbytes) {
  if (sizes_fit("umem_copy_from_safe", head(src_ctx), src_size, head(dest_ctx), dest_size, nbytes))
    copy_call("umem_copy_from_safe", src_ctx, src_adr, dest_ctx, dest_adr, nbytes);
}

uintptr_t umem_connect(void* src_ctx, uintptr_t src_adr, size_t nbytes, void* dest_ctx,
                       size_t dest_alignment) {
  return on_two(src_ctx, dest_ctx, "umem_connect", [&](umemVirtual*& blame) -> std::uintptr_t {
    umemVirtual* src = head(src_ctx);
    umemVirtual* dst = head(dest_ctx);
    if (same_memory(src, dst) && (dest_alignment == 0 || src_adr % dest_alignment == 0))
      return src_adr;
    blame = dst;
    umem_context& d = impl(dst);
    std::uintptr_t adr = 0;
    if (dest_alignment == 0) {
      adr = d.alloc(nbytes);
    } else {
      adr = aligned_alloc_in(d, dest_alignment, nbytes);
    }
    try {
      copy_bytes_between(src, src_adr, dst, adr, nbytes, blame);
    } catch (...) {
      if (dest_alignment == 0) {
        d.free(adr);
      } else {
        free_aligned_in(d, adr);
      }
      throw;
    }
    return adr;
  });
}

void umem_disconnect(void* src_ctx, uintptr_t src_adr, void* dest_ctx, uintptr_t dest_adr,
                     size_t dest_alignment) {
  on_two(src_ctx, dest_ctx, "umem_disconnect", [&](umemVirtual*& blame) -> std::uintptr_t {
    if (src_adr == dest_adr && same_memory(head(src_ctx), head(dest_ctx))) return 0;
    blame = head(dest_ctx);
    if (dest_alignment == 0) {
      free_in(impl(blame), dest_adr);
    } else {
      free_aligned_in(impl(blame), dest_adr);
    }
    return 0;
  });
}

void umem_sync_to(void* src_ctx, uintptr_t src_adr, void* dest_ctx, uintptr_t dest_adr,
                  size_t nbytes) {
  sync_call("umem_sync_to", src_ctx, src_adr, dest_ctx, dest_adr, nbytes);
}

void umem_sync_from(void* src_ctx, uintptr_t src_adr, void* dest_ctx, uintptr_t dest_adr,
                    size_t nbytes) {
  sync_call("umem_sync_from", dest_ctx, dest_adr, src_ctx, src_adr, nbytes);
}

void umem_sync_to_safe(void* src_ctx, uintptr_t src_adr, size_t src_size, void* dest_ctx,
                       uintptr_t dest_adr, size_t dest_size, size_t nbytes) {
  if (sizes_fit("umem_sync_to_safe", head(src_ctx), src_size, head(dest_ctx), dest_size, nbytes))
    sync_call("umem_sync_to_safe", src_ctx, src_adr, dest_ctx, dest_adr, nbytes);
}

void umem_sync_from_safe(void* src_ctx, uintptr_t src_adr, size_t src_size, void* dest_ctx,
                         uintptr_t dest_adr, size_t dest_size, size_t nbytes) {
  if (sizes_fit("umem_sync_from_safe", head(src_ctx), src_size, head(dest_ctx), dest_size, nbytes))
    sync_call("umem_sync_from_safe", dest_ctx, dest_adr, src_ctx, src_adr, nbytes);
}

umemStatusType umem_get_status(void* ctx) {
  umemVirtual* v = head(ctx);
  return v == nullptr ? umemValueError : v->status;
}

const char* umem_get_message(void* ctx) {
  umemVirtual* v = head(ctx);
  if (v == nullptr) return "null context";
  return v->message == nullptr ? "" : v->message;
}

void umem_set_status(void* ctx, umemStatusType type, const char* message) {
  umemVirtual* v = head(ctx);
  if (v == nullptr) return;
  if (type == umemOK) {
    clean(v);
    return;
  }
  append_status(v, type, message == nullptr ? "" : message);
}

void umem_clean_status(void* ctx) {
  if (ctx != nullptr) clean(head(ctx));
}

void umem_clear_status(void* ctx) { umem_clean_status(ctx); }

int umem_is_ok(void* ctx) { return ctx != nullptr && head(ctx)->status == umemOK; }

int umem_is_same_device(void* one_ctx, void* other_ctx) {
  if (one_ctx == nullptr || other_ctx == nullptr) return 0;
  return same_memory(head(one_ctx), head(other_ctx)) ? 1 : 0;
}

int umem_is_same_context(void* one_ctx, void* other_ctx) {
  return umem_is_same_device(one_ctx, other_ctx);
}

const char* umem_get_device_name_from_type(umemDeviceType type) {
  switch (type) {
    case umemVirtualDevice:
      return "Virtual";
    case umemHostDevice:
      return "Host";
    case umemFileDevice:
      return "FILE";
    case umemCudaDevice:
      return "CUDA";
    case umemMMapDevice:
      return "MMap";
    case umemRMMDevice:
      return "RMM";
    case umemWholeMemoryDevice:
      return "WholeMemory";
  }
  return "unknown";
}

const char* umem_get_device_name(void* ctx) {
  if (ctx == nullptr) return "unknown";
  return umem_get_device_name_from_type(head(ctx)->type);
}

const char* umem_get_status_name(umemStatusType type) {
  switch (type) {
    case umemOK:
      return "OK";
    case umemMemoryError:
      return "MemoryError";
    case umemRuntimeError:
      return "RuntimeError";
    case umemIOError:
      return "IOError";
    case umemValueError:
      return "ValueError";
    case umemTypeError:
      return "TypeError";
    case umemIndexError:
      return "IndexError";
    case umemNotImplementedError:
      return "NotImplementedError";
    case umemAssertError:
      return "AssertError";
  }
  return "unknown";
}

}  // extern "C"
