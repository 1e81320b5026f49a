// Global-memory accesses of one stated width, whichever compiler builds the
// kernel. nvcc turns a copy of a 16-byte uint4 into one 16-byte load or
// store; clang's CUDA front end splits it into two 8-byte ones, and across
// PCIe that is another path: on one H100 on PCIe Gen5 an SM copy into pinned
// host memory moved 4.1 GB/s so split, 52.4 GB/s in 16-byte stores. The
// measured kernels say their width in PTX, so that comparing compilers or
// CUDA releases compares them, not how each lowers a struct copy. Each is the
// instruction nvcc emitted for the plain access (ld.global.nc for data the
// kernel only reads), so nvcc builds issue the same vector loads and stores as
// before.
#pragma once

namespace suite {

// Read-only data (the kernel's pointer is const __restrict__): the
// non-coherent load path nvcc picks for it.
__device__ __forceinline__ uint4 load16_nc(const uint4 *p) {
    uint4 v;
    asm volatile("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    return v;
}

__device__ __forceinline__ void store16(uint4 *p, uint4 v) {
    asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
                 : "memory");
}

// The scan's element types, read-only: clang would take 4 and 8 bytes through
// the coherent path where nvcc takes ld.global.nc, so these say it too.
__device__ __forceinline__ unsigned load_nc(const unsigned *p) {
    unsigned v;
    asm volatile("ld.global.nc.u32 %0, [%1];" : "=r"(v) : "l"(p));
    return v;
}
__device__ __forceinline__ uint2 load_nc(const uint2 *p) {
    uint2 v;
    asm volatile("ld.global.nc.v2.u32 {%0, %1}, [%2];" : "=r"(v.x), "=r"(v.y) : "l"(p));
    return v;
}
__device__ __forceinline__ uint4 load_nc(const uint4 *p) { return load16_nc(p); }
__device__ __forceinline__ void store(unsigned *p, unsigned v) { *p = v; }
__device__ __forceinline__ void store(uint2 *p, uint2 v) { *p = v; }
__device__ __forceinline__ void store(uint4 *p, uint4 v) { store16(p, v); }

}  // namespace suite
