/*
 * libumem-compatible C API: one set of calls to allocate, fill and copy memory in different
 * places ("devices"), each reached through a context object.  Compiles as C99 and as C++.
 *
 * Contexts (a struct the caller owns, made by its constructor, released by umem_dtor):
 *   umemHost         host RAM; an address is the pointer value.
 *   umemFile         a stdio file; an address is a byte offset in the file.
 *   umemCuda         device memory of one GPU; an address is the device pointer value.
 *   umemWholeMemory  an existing wholememory::allocation (any type x location, not owned);
 *                    an address is a byte offset into the whole allocation.
 *
 * Addresses are uintptr_t.  Copies work between any two contexts (umem_copy_to/_from) and go
 * through the memory layer: wholememory::copy_bytes between addressable bytes (host, device,
 * the parts of a WholeMemory mapped in this process), stdio for files, with a bounded host
 * staging buffer where neither side is host memory.  Copies, umem_set and umem_connect are
 * synchronous; a copy between overlapping ranges of one context is undefined, as for memcpy.
 * Distributed WholeMemory: only this rank's own part is mapped here, so a range touching
 * another rank's part is refused (use gather/scatter, which are collective).
 *
 * Status: each context carries a status (umemOK or an error type) and a message.  No call
 * aborts, throws or returns an error code: a failure sets the status of the context it
 * concerns (for a copy: the side that failed, or the source for a bad argument) and a message
 * "<call>: <reason>" naming the values involved; a later failure appends its message on a new
 * line.  While a context is not ok, every call on it (or involving it, for copies) does nothing
 * and returns 0, until umem_clean_status.  umem_dtor always releases.
 *
 * Allocations: every context tracks what it allocated, so freeing an address it did not
 * allocate (null, foreign, or already freed) is reported, not undefined.  Zero-byte
 * allocations return a distinct address.  umem_dtor frees what is still allocated, closes
 * files.  A context is not thread-safe; distinct contexts may be used from distinct threads.
 *
 * Files: umemFile_ctor opens the file at once with a mode r, r+, w, w+, a or a+ plus an
 * optional b (C's fopen rules: r and r+ need the file, w and w+ truncate it).  Reading needs r,
 * r+, w+ or a+; writing anything but r.  Append modes write only at the end of the file (the
 * address must equal the file size).  Reading past the end is an umemIOError.  umem_alloc on a
 * file reserves a range of offsets after the bytes present at open time.
 *
 * umemCuda without a GPU: the constructor sets umemRuntimeError ("no CUDA device is visible"),
 * umemValueError for a device number out of range, and in a build without CUDA
 * (WHOLESTORE_WITH_CUDA=OFF) umemNotImplementedError; the context can still be destructed.
 */
#ifndef WHOLEMEMORY_UMEM_H
#define WHOLEMEMORY_UMEM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Kind of a context (umemVirtualDevice: destructed or never constructed). */
typedef enum {
  umemVirtualDevice = 0,
  umemHostDevice,
  umemFileDevice,
  umemCudaDevice,
  umemMMapDevice, /* libumem's name, not implemented */
  umemRMMDevice,  /* libumem's name, not implemented */
  umemWholeMemoryDevice
} umemDeviceType;

/** Status of a context. */
typedef enum {
  umemOK = 0,
  umemMemoryError,         /* an allocation failed */
  umemRuntimeError,        /* CUDA failed, no device, unexpected failure */
  umemIOError,             /* a file could not be opened, read or written */
  umemValueError,          /* bad argument: null or unknown address, bad mode, alignment */
  umemTypeError,           /* unused; libumem's name */
  umemIndexError,          /* a range outside the memory or outside the given sizes */
  umemNotImplementedError, /* a context this build does not have */
  umemAssertError          /* unused; libumem's name */
} umemStatusType;

/** Common head of every context.  Read it through the umem_* calls only. */
typedef struct {
  umemDeviceType type;
  umemStatusType status;
  char* message; /* owned by the context; NULL when there is none */
  void* impl;    /* the library's state; NULL after umem_dtor */
} umemVirtual;

typedef struct {
  umemVirtual super;
} umemHost;

typedef struct {
  umemVirtual super;
} umemFile;

typedef struct {
  umemVirtual super;
  int device;
} umemCuda;

typedef struct {
  umemVirtual super;
} umemWholeMemory;

/* ---- constructors: a failure leaves the context constructed, with its status set ---- */

/** Host RAM context. */
void umemHost_ctor(umemHost* ctx);

/** File context: opens `filename` with `mode` (see the header comment).  umemValueError for a
    null name or a bad mode, umemIOError when fopen fails (errno's text in the message). */
void umemFile_ctor(umemFile* ctx, const char* filename, const char* mode);

/** Device memory of CUDA device `device`; makes it the calling thread's current device. */
void umemCuda_ctor(umemCuda* ctx, int device);

/** Context over an existing allocation: `memory` points to a wholememory::allocation that
    must outlive the context (not owned; umem_alloc reserves offset ranges inside it).
    umemValueError for null or an empty handle. */
void umemWholeMemory_ctor(umemWholeMemory* ctx, void* memory);

/** Releases the context: frees its live allocations, closes its file, drops the message. */
void umem_dtor(void* ctx);

/* ---- allocation ---- */

/** Allocates `nbytes` (uninitialized); returns the address, 0 on failure. */
uintptr_t umem_alloc(void* ctx, size_t nbytes);
/** Allocates nmemb * size zeroed bytes; umemValueError when the product overflows. */
uintptr_t umem_calloc(void* ctx, size_t nmemb, size_t size);
/** Frees an address from umem_alloc/umem_calloc of this context; umemValueError for any other
    address (null, foreign, already freed, or from umem_aligned_alloc). */
void umem_free(void* ctx, uintptr_t adr);
/** Allocates `size` bytes at an address that is a multiple of `alignment` (a power of two;
    `size` a multiple of it, as C11 aligned_alloc asks; umemValueError otherwise).  Alignments
    below umem_fundamental_align(ctx) are raised to it. */
uintptr_t umem_aligned_alloc(void* ctx, size_t alignment, size_t size);
/** The address umem_aligned_alloc obtained from the context for `aligned_adr` (where the
    aligned block starts); umemValueError for an address it did not return. */
uintptr_t umem_aligned_origin(void* ctx, uintptr_t aligned_adr);
/** Frees an address from umem_aligned_alloc. */
void umem_free_aligned(void* ctx, uintptr_t aligned_adr);
/** libumem's other name of umem_free_aligned. */
void umem_aligned_free(void* ctx, uintptr_t aligned_adr);
/** Smallest alignment umem_aligned_alloc gives: 16 host, 256 CUDA, 1 file and WholeMemory. */
size_t umem_fundamental_align(void* ctx);

/* ---- filling and copying ---- */

/** Sets `nbytes` bytes at `adr` to (unsigned char)c. */
void umem_set(void* ctx, uintptr_t adr, int c, size_t nbytes);
/** umem_set after checking nbytes <= size (the bytes available at adr); umemIndexError. */
void umem_set_safe(void* ctx, uintptr_t adr, size_t size, int c, size_t nbytes);

/** Copies `nbytes` from src_ctx at src_adr to dest_ctx at dest_adr. */
void umem_copy_to(void* src_ctx, uintptr_t src_adr, void* dest_ctx, uintptr_t dest_adr,
                  size_t nbytes);
/** The same copy, written from the destination's side. */
void umem_copy_from(void* dest_ctx, uintptr_t dest_adr, void* src_ctx, uintptr_t src_adr,
                    size_t nbytes);
/** umem_copy_to after checking nbytes against the bytes available at each address
    (umemIndexError on the context whose size is exceeded). */
void umem_copy_to_safe(void* src_ctx, uintptr_t src_adr, size_t src_size, void* dest_ctx,
                       uintptr_t dest_adr, size_t dest_size, size_t nbytes);
void umem_copy_from_safe(void* dest_ctx, uintptr_t dest_adr, size_t dest_size, void* src_ctx,
                         uintptr_t src_adr, size_t src_size, size_t nbytes);

/* ---- mirrors: a region of one context kept in another ---- */

/** Makes a mirror of [src_adr, src_adr + nbytes) of src_ctx in dest_ctx: allocates there
    (aligned to dest_alignment when it is not 0) and copies; returns the mirror's address.
    When both contexts are the same memory (umem_is_same_device) and src_adr meets the
    alignment, returns src_adr and copies nothing. */
uintptr_t umem_connect(void* src_ctx, uintptr_t src_adr, size_t nbytes, void* dest_ctx,
                       size_t dest_alignment);
/** Frees a mirror made by umem_connect with the same arguments (nothing when it returned
    src_adr itself). */
void umem_disconnect(void* src_ctx, uintptr_t src_adr, void* dest_ctx, uintptr_t dest_adr,
                     size_t dest_alignment);
/** Pushes the source region to its mirror (src -> dest); nothing when both are the same
    bytes. */
void umem_sync_to(void* src_ctx, uintptr_t src_adr, void* dest_ctx, uintptr_t dest_adr,
                  size_t nbytes);
/** Pulls the mirror back into the source region (dest -> src); nothing when both are the same
    bytes. */
void umem_sync_from(void* src_ctx, uintptr_t src_adr, void* dest_ctx, uintptr_t dest_adr,
                    size_t nbytes);
void umem_sync_to_safe(void* src_ctx, uintptr_t src_adr, size_t src_size, void* dest_ctx,
                       uintptr_t dest_adr, size_t dest_size, size_t nbytes);
void umem_sync_from_safe(void* src_ctx, uintptr_t src_adr, size_t src_size, void* dest_ctx,
                         uintptr_t dest_adr, size_t dest_size, size_t nbytes);

/* ---- status ---- */

/** The context's status (umemValueError for a null context). */
umemStatusType umem_get_status(void* ctx);
/** The context's message, "" when there is none; valid until the status changes. */
const char* umem_get_message(void* ctx);
/** Sets the status; a message is appended to an existing one on a new line.  umemOK cleans. */
void umem_set_status(void* ctx, umemStatusType type, const char* message);
/** Back to umemOK, message dropped. */
void umem_clean_status(void* ctx);
/** libumem's other name of umem_clean_status. */
void umem_clear_status(void* ctx);
/** Nonzero when the status is umemOK. */
int umem_is_ok(void* ctx);

/* ---- utilities ---- */

/** Nonzero when both contexts reach the same memory: the same context, two host contexts,
    two CUDA contexts of one device, two contexts of one file or of one WholeMemory. */
int umem_is_same_device(void* one_ctx, void* other_ctx);
/** libumem's other name of umem_is_same_device. */
int umem_is_same_context(void* one_ctx, void* other_ctx);
/** "Host", "FILE", "CUDA", "WholeMemory" ("Virtual" for a destructed context). */
const char* umem_get_device_name(void* ctx);
const char* umem_get_device_name_from_type(umemDeviceType type);
/** "OK", "MemoryError", ... */
const char* umem_get_status_name(umemStatusType type);

#ifdef __cplusplus
}
#endif

#endif /* WHOLEMEMORY_UMEM_H */
