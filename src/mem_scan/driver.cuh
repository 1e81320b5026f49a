// The driver API calls of the single mode's VMM range (driver.cu).
#pragma once

#include <cuda.h>

namespace mem_scan {

// The driver API's virtual memory calls, found at run time through the CUDA
// runtime (which loads libcuda itself) rather than linked: the program then
// starts, checks its options and prints --help where no driver is
// installed, as every other program of the suite does.
struct DriverApi {
    decltype(&cuGetErrorString) getErrorString = nullptr;
    decltype(&cuGetErrorName) getErrorName = nullptr;
    decltype(&cuMemGetAllocationGranularity) memGetAllocationGranularity = nullptr;
    decltype(&cuMemAddressReserve) memAddressReserve = nullptr;
    decltype(&cuMemCreate) memCreate = nullptr;
    decltype(&cuMemMap) memMap = nullptr;
    decltype(&cuMemSetAccess) memSetAccess = nullptr;
    decltype(&cuMemUnmap) memUnmap = nullptr;
    decltype(&cuMemRelease) memRelease = nullptr;
    decltype(&cuMemAddressFree) memAddressFree = nullptr;
};

// The entry points, found on first use.
const DriverApi &driver();

// The driver API's errors, reported like CUDA_CHECK's.
void cu_check(CUresult err, const char *call, const char *file, int line);
#define CU_CHECK(call) ::mem_scan::cu_check((call), #call, __FILE__, __LINE__)

}  // namespace mem_scan
