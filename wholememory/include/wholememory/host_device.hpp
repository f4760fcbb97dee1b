/*
 * WM_HOST_DEVICE: the one marker for functions that run in CUDA kernels and on the host alike
 * (PtrGen::At, the element conversions, the sampler's selection logic), so that one templated
 * implementation serves the CUDA path and the CPU path.  Under nvcc it expands to
 * __host__ __device__ __forceinline__; a plain C++ compiler sees `inline`.
 */
#pragma once

#if defined(__CUDACC__)
#define WM_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define WM_HOST_DEVICE inline
#endif
