// The driver API's VMM calls, found at run time (driver.cuh).
#include "driver.cuh"

#include "suite.hpp"

namespace mem_scan {
namespace {

// The entry point of `symbol` as this program's cuda.h declares it (CUDA_VERSION's ABI).
template <typename Fn>
void find_entry(Fn &fn, const char *symbol) {
    void *entry = nullptr;
#if CUDART_VERSION >= 12050
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    CUDA_CHECK(cudaGetDriverEntryPointByVersion(symbol, &entry, CUDA_VERSION, cudaEnableDefault, &found));
    if (found != cudaDriverEntryPointSuccess) entry = nullptr;
#else
    CUDA_CHECK(cudaGetDriverEntryPoint(symbol, &entry, cudaEnableDefault));
#endif
    if (!entry) suite::die("the CUDA driver has no %s (CUDA %d's)", symbol, CUDA_VERSION);
    fn = reinterpret_cast<Fn>(entry);
}

}  // namespace

const DriverApi &driver() {
    static const DriverApi api = [] {
        DriverApi d;
        find_entry(d.getErrorString, "cuGetErrorString");
        find_entry(d.getErrorName, "cuGetErrorName");
        find_entry(d.memGetAllocationGranularity, "cuMemGetAllocationGranularity");
        find_entry(d.memAddressReserve, "cuMemAddressReserve");
        find_entry(d.memCreate, "cuMemCreate");
        find_entry(d.memMap, "cuMemMap");
        find_entry(d.memSetAccess, "cuMemSetAccess");
        find_entry(d.memUnmap, "cuMemUnmap");
        find_entry(d.memRelease, "cuMemRelease");
        find_entry(d.memAddressFree, "cuMemAddressFree");
        return d;
    }();
    return api;
}

void cu_check(CUresult err, const char *call, const char *file, int line) {
    if (err == CUDA_SUCCESS) return;
    const char *text = "unknown", *name = "unknown";
    driver().getErrorString(err, &text);
    driver().getErrorName(err, &name);
    std::fprintf(stderr, "CUDA error: %s (%s) in %s at %s:%d\n", text, name, call, file, line);
    std::exit(EXIT_FAILURE);
}

}  // namespace mem_scan
