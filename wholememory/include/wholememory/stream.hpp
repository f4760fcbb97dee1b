/*
 * The CUDA stream and event types, declared without CUDA headers so that every public header
 * compiles with a plain C++ compiler.  The typedef is the one CUDA's driver_types.h makes, so both
 * can be included in either order.  Host-only builds pass nullptr wherever a stream is taken.
 * The owning types, cuda_stream and cuda_event, are in cuda_stream.hpp.
 */
#pragma once

struct CUstream_st;
typedef struct CUstream_st* cudaStream_t;
struct CUevent_st;
typedef struct CUevent_st* cudaEvent_t;
