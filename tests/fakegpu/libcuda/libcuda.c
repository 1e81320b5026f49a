/* A stand-in for the CUDA driver (libcuda.so.1) on a machine without a GPU
 * (tests/test_fake_gpu.py builds it): the calls systems/detect.py's
 * CudaDriver makes, each succeeding. No page-table attribute is set (the
 * node's addressing is none). While the one device buffer is allocated,
 * which is while CudaDriver.load_link copies to the GPU, fake_link_loaded is
 * set: the fake NVML (tests/fakegpu/site/pynvml.py) then reports the link as
 * trained up, as a real link under load is. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

int fake_link_loaded = 0;

static int context;

int cuInit(unsigned flags) { (void)flags; return 0; }

int cuDeviceGetAttribute(int *value, int attribute, int device) {
    (void)attribute, (void)device;
    *value = 0;
    return 0;
}

int cuDeviceGetByPCIBusId(int *device, const char *bus_id) {
    (void)bus_id;
    *device = 0;
    return 0;
}

int cuDevicePrimaryCtxRetain(void **ctx, int device) {
    (void)device;
    *ctx = &context;
    return 0;
}

int cuDevicePrimaryCtxRelease(int device) { (void)device; return 0; }

int cuCtxSetCurrent(void *ctx) { (void)ctx; return 0; }

int cuMemAllocHost_v2(void **host, size_t bytes) {
    (void)bytes;  /* never touched: one byte stands for it */
    *host = malloc(1);
    return *host ? 0 : 2;  /* CUDA_ERROR_OUT_OF_MEMORY */
}

int cuMemFreeHost(void *host) { free(host); return 0; }

int cuMemAlloc_v2(uint64_t *dev, size_t bytes) {
    (void)bytes;
    *dev = 0x100000;
    fake_link_loaded = 1;
    return 0;
}

int cuMemFree_v2(uint64_t dev) { (void)dev; fake_link_loaded = 0; return 0; }

int cuMemcpyHtoD_v2(uint64_t dev, const void *host, size_t bytes) {
    (void)dev, (void)host, (void)bytes;
    usleep(1000);  /* a copy takes time: the copying thread does not spin */
    return 0;
}
