/*
 * umem.h from C99: the host and file contexts through every universal call, and the status of
 * umemCuda where no GPU (or no CUDA) is present.  A plain program: each failed CHECK prints
 * its line and the run exits 1.  WholeMemory contexts need a C++ caller to make the memory;
 * tests/wholememory/umem_test.cpp covers them.
 */
#define _POSIX_C_SOURCE 200809L

#include <wholememory/umem.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int failures = 0;

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                              \
    }                                                                          \
  } while (0)

/* The context is ok; otherwise prints its message. */
#define CHECK_OK(ctx)                                                                            \
  do {                                                                                           \
    if (!umem_is_ok(ctx)) {                                                                      \
      fprintf(stderr, "%s:%d: context not ok: %s\n", __FILE__, __LINE__, umem_get_message(ctx)); \
      ++failures;                                                                                \
    }                                                                                            \
  } while (0)

/* The context has status `type` with `word` in its message; then cleans it. */
#define CHECK_STATUS(ctx, type, word)                                             \
  do {                                                                            \
    CHECK(umem_get_status(ctx) == (type));                                        \
    if (strstr(umem_get_message(ctx), (word)) == NULL) {                          \
      fprintf(stderr, "%s:%d: message \"%s\" lacks \"%s\"\n", __FILE__, __LINE__, \
              umem_get_message(ctx), (word));                                     \
      ++failures;                                                                 \
    }                                                                             \
    umem_clean_status(ctx);                                                       \
  } while (0)

static char temp_dir[] = "/tmp/umem_c_test_XXXXXX";

static const char* temp_path(const char* name) {
  static char path[256];
  snprintf(path, sizeof(path), "%s/%s", temp_dir, name);
  return path;
}

static void fill_pattern(unsigned char* p, size_t n, unsigned seed) {
  size_t i;
  for (i = 0; i < n; ++i) p[i] = (unsigned char)(i * 131u + seed);
}

static void test_host(void) {
  umemHost host, other;
  uintptr_t a, b, z, aligned;
  unsigned char* pa;
  unsigned char before;
  size_t i;
  umemHost_ctor(&host);
  umemHost_ctor(&other);
  CHECK_OK(&host);
  CHECK(strcmp(umem_get_device_name(&host), "Host") == 0);
  CHECK(umem_is_same_device(&host, &other));
  CHECK(umem_is_same_context(&host, &host));

  a = umem_alloc(&host, 100);
  b = umem_calloc(&host, 25, 4);
  CHECK_OK(&host);
  CHECK(a != 0 && b != 0 && a != b);
  for (i = 0; i < 100; ++i) CHECK(((unsigned char*)b)[i] == 0);

  /* set, 0 and 1 bytes, unaligned offsets */
  umem_set(&host, a, 0xab, 100);
  umem_set(&host, a + 3, 0x11, 1);
  umem_set(&host, a, 0x22, 0);
  pa = (unsigned char*)a;
  CHECK(pa[0] == 0xab && pa[3] == 0x11 && pa[4] == 0xab && pa[99] == 0xab);
  fill_pattern(pa, 100, 7);
  umem_copy_to(&host, a + 1, &other, b + 5, 37);
  CHECK_OK(&host);
  CHECK(memcmp((void*)(b + 5), pa + 1, 37) == 0);
  CHECK(((unsigned char*)b)[4] == 0 && ((unsigned char*)b)[42] == 0);
  umem_copy_from(&host, b + 99, &other, a + 50, 1);
  CHECK(((unsigned char*)b)[99] == pa[50]);
  umem_copy_to(&host, 0, &host, 0, 0); /* 0 bytes: nothing, not even the null check */
  CHECK_OK(&host);

  /* zero-byte allocations are distinct */
  z = umem_alloc(&host, 0);
  CHECK_OK(&host);
  CHECK(z != 0 && z != a);
  umem_free(&host, z);

  /* aligned allocations */
  aligned = umem_aligned_alloc(&host, 256, 512);
  CHECK_OK(&host);
  CHECK(aligned % 256 == 0);
  CHECK(umem_aligned_origin(&host, aligned) <= aligned);
  CHECK(umem_aligned_origin(&host, aligned) + 256 > aligned);
  CHECK(umem_fundamental_align(&host) >= 8);
  umem_free(&host, aligned); /* wrong free for an aligned block */
  CHECK_STATUS(&host, umemValueError, "umem_free_aligned");
  umem_free_aligned(&host, aligned);
  CHECK_OK(&host);
  umem_aligned_free(&host, aligned); /* freed already */
  CHECK_STATUS(&host, umemValueError, "umem_free_aligned");
  umem_aligned_alloc(&host, 24, 48);
  CHECK_STATUS(&host, umemValueError, "power of two");
  umem_aligned_alloc(&host, 64, 100);
  CHECK_STATUS(&host, umemValueError, "multiple of alignment");
  umem_aligned_origin(&host, a);
  CHECK_STATUS(&host, umemValueError, "umem_aligned_origin");

  /* bad input */
  umem_free(&host, 0);
  CHECK_STATUS(&host, umemValueError, "umem_free");
  umem_copy_to(&host, 0, &other, b, 4);
  CHECK_STATUS(&host, umemValueError, "null address");
  umem_copy_to(&host, a, &other, 0, 4);
  CHECK_STATUS(&other, umemValueError, "null address");
  CHECK_OK(&host);
  umem_set(&host, a, 0, (size_t)-1);
  CHECK_STATUS(&host, umemIndexError, "overflows");
  umem_calloc(&host, (size_t)-1 / 2, 4);
  CHECK_STATUS(&host, umemValueError, "overflow");
  umem_set_safe(&host, a, 10, 1, 11);
  CHECK_STATUS(&host, umemIndexError, "umem_set_safe");
  umem_copy_to_safe(&host, a, 8, &other, b, 100, 9);
  CHECK_STATUS(&host, umemIndexError, "source");
  CHECK_OK(&other);
  umem_copy_from_safe(&other, b, 8, &host, a, 100, 9);
  CHECK_STATUS(&other, umemIndexError, "destination");
  umem_copy_to_safe(&host, a, 9, &other, b, 9, 9);
  CHECK_OK(&host);
  CHECK_OK(&other);

  /* a context in error does nothing until cleaned; messages accumulate */
  umem_free(&host, b); /* b belongs to host (calloc above) */
  CHECK_OK(&host);
  umem_free(&host, b);
  CHECK(umem_get_status(&host) == umemValueError);
  CHECK(strstr(umem_get_message(&host), "already freed") != NULL);
  CHECK(umem_alloc(&host, 10) == 0);
  umem_set(&host, a, 0x55, 1);
  CHECK(pa[0] != 0x55);
  before = pa[0];
  umem_copy_to(&other, a + 1, &host, a, 1); /* involves host: nothing */
  CHECK(pa[0] == before);
  umem_set_status(&host, umemIOError, "second");
  CHECK(umem_get_status(&host) == umemIOError);
  CHECK(strstr(umem_get_message(&host), "umem_free") != NULL);
  CHECK(strstr(umem_get_message(&host), "\nsecond") != NULL);
  umem_set_status(&host, umemOK, NULL);
  CHECK_OK(&host);
  CHECK(strcmp(umem_get_message(&host), "") == 0);
  umem_set_status(&host, umemRuntimeError, "x");
  umem_clear_status(&host);
  CHECK_OK(&host);

  /* connect to the same memory: the same address, no copy */
  CHECK(umem_connect(&host, a, 100, &other, 0) == a);
  CHECK(umem_connect(&host, a + 1, 64, &other, 16) != a + 1); /* misaligned: a copy */
  umem_sync_to(&host, a, &other, a, 100);                     /* same bytes: nothing */
  umem_disconnect(&host, a, &other, a, 0);                    /* nothing to free */
  CHECK_OK(&host);
  CHECK_OK(&other);

  umem_free(&host, a);
  CHECK_OK(&host);
  umem_dtor(&host);
  CHECK(umem_get_status(&host) == umemOK);
  CHECK(strcmp(umem_get_device_name(&host), "Virtual") == 0);
  umem_alloc(&host, 1); /* destructed */
  CHECK_STATUS(&host, umemValueError, "not constructed");
  umem_dtor(&other); /* frees the aligned mirror it still holds */
}

static void test_file(void) {
  umemHost host;
  umemFile file, again, reader, writer, appender, scratch, bad;
  unsigned char src[64], back[64];
  uintptr_t hbuf, off, mirror, end;
  char path[256];
  snprintf(path, sizeof(path), "%s", temp_path("data.bin"));

  umemHost_ctor(&host);
  fill_pattern(src, sizeof(src), 3);
  hbuf = (uintptr_t)src;

  umemFile_ctor(&file, path, "w+b");
  CHECK_OK(&file);
  CHECK(strcmp(umem_get_device_name(&file), "FILE") == 0);
  /* host -> file at an unaligned offset, file -> host back; 1 and 0 bytes */
  umem_copy_to(&host, hbuf, &file, 3, 64);
  CHECK_OK(&file);
  memset(back, 0, sizeof(back));
  umem_copy_from(&host, (uintptr_t)back, &file, 3, 64);
  CHECK_OK(&file);
  CHECK(memcmp(back, src, 64) == 0);
  umem_copy_to(&file, 10, &host, (uintptr_t)back, 1);
  CHECK(back[0] == src[7]);
  umem_copy_to(&host, hbuf, &file, 0, 0);
  CHECK_OK(&file);
  /* within one file: read, then write through the staging buffer */
  umem_copy_to(&file, 3, &file, 200, 64);
  CHECK_OK(&file);

  /* a second context on the same file: the same memory; reservations after its 264 bytes */
  umemFile_ctor(&again, path, "r+");
  CHECK_OK(&again);
  CHECK(umem_is_same_device(&file, &again));
  CHECK(!umem_is_same_device(&file, &host));
  umem_copy_to(&again, 200, &host, (uintptr_t)back, 64);
  CHECK(memcmp(back, src, 64) == 0);
  umem_copy_to(&file, 3, &again, 100, 64);
  CHECK_OK(&again);
  umem_copy_to(&again, 100, &host, (uintptr_t)back, 64);
  CHECK(memcmp(back, src, 64) == 0);
  off = umem_alloc(&again, 8);
  CHECK(off == 264);

  /* mirrors: connect host bytes into the file, change, sync back and forth */
  mirror = umem_connect(&host, hbuf, 64, &again, 0);
  CHECK_OK(&again);
  CHECK(mirror == 272);
  end = mirror + 64;
  umem_copy_to(&again, mirror, &host, (uintptr_t)back, 64);
  CHECK(memcmp(back, src, 64) == 0);
  src[0] ^= 0xff;
  umem_sync_to(&host, hbuf, &again, mirror, 1);
  umem_copy_to(&again, mirror, &host, (uintptr_t)back, 1);
  CHECK(back[0] == src[0]);
  umem_set(&again, mirror + 1, 0, 1);
  umem_sync_from(&host, hbuf, &again, mirror, 2);
  CHECK(src[1] == 0);
  umem_sync_to_safe(&host, hbuf, 64, &again, mirror, 32, 33);
  CHECK_STATUS(&again, umemIndexError, "umem_sync_to_safe");
  umem_sync_from_safe(&host, hbuf, 4, &again, mirror, 64, 4);
  CHECK_OK(&host);
  CHECK_OK(&again);
  umem_disconnect(&host, hbuf, &again, mirror, 0);
  CHECK_OK(&again);
  umem_disconnect(&host, hbuf, &again, mirror, 0);
  CHECK_STATUS(&again, umemValueError, "umem_disconnect");

  /* read-only, then written; read past the end */
  umemFile_ctor(&reader, path, "rb");
  CHECK_OK(&reader);
  umem_copy_to(&host, hbuf, &reader, 0, 4);
  CHECK_STATUS(&reader, umemIOError, "read-only");
  CHECK_OK(&host);
  umem_set(&reader, 0, 1, 1);
  CHECK_STATUS(&reader, umemIOError, "umem_set");
  umem_copy_to(&reader, 1000, &host, (uintptr_t)back, 4);
  CHECK_STATUS(&reader, umemIOError, "ends at offset");
  umem_copy_to(&reader, end - 2, &host, (uintptr_t)back, 4);
  CHECK_STATUS(&reader, umemIOError, "ends at offset");

  /* write-only, then read */
  umemFile_ctor(&writer, temp_path("w.bin"), "w");
  CHECK_OK(&writer);
  umem_copy_to(&host, hbuf, &writer, 0, 4);
  CHECK_OK(&writer);
  umem_copy_to(&writer, 0, &host, (uintptr_t)back, 4);
  CHECK_STATUS(&writer, umemIOError, "does not allow reading");

  /* append: only at the end */
  umemFile_ctor(&appender, path, "a+");
  CHECK_OK(&appender);
  umem_copy_to(&host, hbuf, &appender, 0, 4);
  CHECK_STATUS(&appender, umemValueError, "writes go to its end");
  umem_copy_to(&host, hbuf, &appender, end, 4);
  CHECK_OK(&appender);
  umem_copy_to(&appender, end, &host, (uintptr_t)back, 4);
  CHECK(memcmp(back, src, 4) == 0);

  /* set, calloc, alloc and aligned alloc in offsets */
  umemFile_ctor(&scratch, temp_path("scratch.bin"), "w+");
  umem_set(&scratch, 5, 0x7f, 3);
  umem_copy_to(&scratch, 4, &host, (uintptr_t)back, 4);
  CHECK_OK(&scratch);
  CHECK(back[0] == 0 && back[1] == 0x7f && back[3] == 0x7f);
  off = umem_calloc(&scratch, 4, 8);
  CHECK_OK(&scratch);
  CHECK(off == 0);
  umem_copy_to(&scratch, 4, &host, (uintptr_t)back, 4);
  CHECK(back[1] == 0 && back[3] == 0);
  off = umem_alloc(&scratch, 16);
  CHECK(off == 32);
  umem_free(&scratch, off);
  CHECK_OK(&scratch);
  umem_free(&scratch, off);
  CHECK_STATUS(&scratch, umemValueError, "already freed");
  off = umem_aligned_alloc(&scratch, 64, 64);
  CHECK_OK(&scratch);
  CHECK(off % 64 == 0 && umem_aligned_origin(&scratch, off) <= off);
  umem_free_aligned(&scratch, off);
  CHECK_OK(&scratch);
  CHECK(umem_fundamental_align(&scratch) == 1);

  /* bad modes, missing files */
  umemFile_ctor(&bad, path, "rw");
  CHECK_STATUS(&bad, umemValueError, "umemFile_ctor");
  umem_alloc(&bad, 1); /* its constructor failed */
  CHECK_STATUS(&bad, umemValueError, "not constructed");
  umem_dtor(&bad);
  umemFile_ctor(&bad, path, "r++");
  CHECK_STATUS(&bad, umemValueError, "mode");
  umem_dtor(&bad);
  umemFile_ctor(&bad, path, "x");
  CHECK_STATUS(&bad, umemValueError, "mode");
  umem_dtor(&bad);
  umemFile_ctor(&bad, temp_path("missing.bin"), "r");
  CHECK_STATUS(&bad, umemIOError, "No such file");
  umem_dtor(&bad);
  umemFile_ctor(&bad, NULL, "r");
  CHECK_STATUS(&bad, umemValueError, "null file name");
  umem_dtor(&bad);

  umem_dtor(&scratch);
  umem_dtor(&appender);
  umem_dtor(&writer);
  umem_dtor(&reader);
  umem_dtor(&again);
  umem_dtor(&file);
  umem_dtor(&host);
  unlink(path);
  unlink(temp_path("w.bin"));
  unlink(temp_path("scratch.bin"));
}

static void test_cuda_status(void) {
  umemCuda cuda;
  umemCuda_ctor(&cuda, -1);
  CHECK_STATUS(&cuda, umemValueError, "umemCuda_ctor");
  umem_dtor(&cuda);
  umemCuda_ctor(&cuda, 1000);
  CHECK(!umem_is_ok(&cuda));
  CHECK(strstr(umem_get_message(&cuda), "device 1000") != NULL);
  umem_dtor(&cuda);
  umemCuda_ctor(&cuda, 0);
  if (umem_is_ok(&cuda)) {
    printf("umemCuda: a GPU is present; tests/wholememory/gpu/umem_gpu_test.cpp covers it\n");
  } else {
    printf("umemCuda skipped: %s\n", umem_get_message(&cuda));
    CHECK(umem_get_status(&cuda) == umemNotImplementedError ||
          umem_get_status(&cuda) == umemRuntimeError);
    CHECK(umem_alloc(&cuda, 16) == 0);
  }
  umem_dtor(&cuda);
}

static void test_names(void) {
  CHECK(strcmp(umem_get_status_name(umemOK), "OK") == 0);
  CHECK(strcmp(umem_get_status_name(umemIndexError), "IndexError") == 0);
  CHECK(strcmp(umem_get_device_name_from_type(umemCudaDevice), "CUDA") == 0);
  CHECK(strcmp(umem_get_device_name_from_type(umemWholeMemoryDevice), "WholeMemory") == 0);
  CHECK(umem_get_status(NULL) == umemValueError);
  CHECK(!umem_is_ok(NULL));
  CHECK(umem_alloc(NULL, 1) == 0);
}

int main(void) {
  if (mkdtemp(temp_dir) == NULL) {
    perror("mkdtemp");
    return 1;
  }
  test_host();
  test_file();
  test_cuda_status();
  test_names();
  rmdir(temp_dir);
  if (failures != 0) {
    fprintf(stderr, "umem_c_test: %d checks failed\n", failures);
    return 1;
  }
  printf("umem_c_test: all checks passed\n");
  return 0;
}
