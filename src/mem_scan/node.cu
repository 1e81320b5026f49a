// The GPUs and the buffer (node.cuh).
#include "node.cuh"

#include <cinttypes>
#include <cstring>
#include <string>

#include "driver.cuh"
#include "suite.hpp"

namespace mem_scan {

void setup_gpu(Gpu &g, std::uint64_t local_bytes) {
    CUDA_CHECK(cudaSetDevice(g.device));
    CUDA_CHECK(cudaStreamCreateWithFlags(&g.stream, cudaStreamNonBlocking));
    for (auto &mark : g.marks) CUDA_CHECK(cudaEventCreate(&mark));
    CUDA_CHECK(cudaEventCreateWithFlags(&g.warm, cudaEventDisableTiming));
    CUDA_CHECK(cudaMalloc(&g.local, local_bytes));
    CUDA_CHECK(cudaMalloc(&g.bad, sizeof *g.bad));
    CUDA_CHECK(cudaMalloc(&g.sum, sizeof *g.sum));
    int sms = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, g.device));
    g.grid = sms * (2048 / kBlock);
}

void release_gpu(Gpu &g) {
    CUDA_CHECK(cudaSetDevice(g.device));
    CUDA_CHECK(cudaFree(g.local));
    CUDA_CHECK(cudaFree(g.bad));
    CUDA_CHECK(cudaFree(g.sum));
    for (auto &mark : g.marks) CUDA_CHECK(cudaEventDestroy(mark));
    CUDA_CHECK(cudaEventDestroy(g.warm));
    CUDA_CHECK(cudaStreamDestroy(g.stream));
}

// Peer access between every pair of this process's devices, or a clear error.
void enable_peer_access(const std::vector<int> &devices) {
    for (int a : devices)
        for (int b : devices) {
            if (a == b) continue;
            int can = 0;
            CUDA_CHECK(cudaDeviceCanAccessPeer(&can, a, b));
            if (!can)
                suite::die("GPU %d cannot access GPU %d's memory (cudaDeviceCanAccessPeer = 0): no NVLink or PCIe "
                           "peer-to-peer path between them",
                           a, b);
            CUDA_CHECK(cudaSetDevice(a));
            const cudaError_t err = cudaDeviceEnablePeerAccess(b, 0);
            if (err == cudaErrorPeerAccessAlreadyEnabled) cudaGetLastError();
            else CUDA_CHECK(err);
        }
}

// single: N physical chunks mapped into one reserved range, readable and
// writable from every GPU (never multicast: plain cuMemCreate per device).
void allocate_contiguous(Buffer &b, const std::vector<Gpu> &gpus, std::uint64_t chunk, std::uint64_t piece) {
    const std::size_t n = gpus.size();
    CUmemAllocationProp probe{};
    probe.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    probe.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    probe.location.id = gpus[0].device;
    std::size_t granularity = 0;
    CU_CHECK(driver().memGetAllocationGranularity(&granularity, &probe, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    if (chunk % granularity)
        suite::die("a %" PRIu64 "-byte chunk is not a multiple of the VMM granularity, %zu bytes", chunk, granularity);
    if (piece % granularity)
        suite::die("--map-granularity %" PRIu64 " is not a multiple of the VMM granularity, %zu bytes", piece,
                   granularity);
    CU_CHECK(driver().memAddressReserve(&b.base, n * chunk, 0, 0, 0));
    std::vector<CUmemAccessDesc> access(n);
    for (std::size_t i = 0; i < n; ++i) {
        CUmemAllocationProp prop{};
        prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
        prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        prop.location.id = gpus[i].device;
        for (std::uint64_t at = 0; at < chunk; at += piece) {  // one allocation, or chunk / piece of them
            CUmemGenericAllocationHandle h;
            CU_CHECK(driver().memCreate(&h, piece, &prop, 0));
            CU_CHECK(driver().memMap(b.base + i * chunk + at, piece, 0, h, 0));
            b.handles.push_back(h);
        }
        access[i].location = prop.location;
        access[i].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    }
    CU_CHECK(driver().memSetAccess(b.base, n * chunk, access.data(), n));
    b.contiguous = true;
    b.layout.chunk[0] = reinterpret_cast<char *>(b.base);
}

// chunked: one cudaMalloc per GPU, the kernels index their table.
void allocate_table(Buffer &b, const std::vector<Gpu> &gpus, std::uint64_t chunk) {
    for (std::size_t i = 0; i < gpus.size(); ++i) {
        CUDA_CHECK(cudaSetDevice(gpus[i].device));
        void *p = nullptr;
        CUDA_CHECK(cudaMalloc(&p, chunk));
        b.owned.push_back(p);
        b.layout.chunk[i] = static_cast<char *>(p);
    }
}

// multiprocess: our chunk from cudaMalloc, the others' through CUDA IPC.
struct Published {
    cudaIpcMemHandle_t handle;
    char bus_id[32];
};

void allocate_shared(Buffer &b, const Gpu &g, std::uint64_t chunk, Exchange &ex) {
    CUDA_CHECK(cudaSetDevice(g.device));
    void *p = nullptr;
    CUDA_CHECK(cudaMalloc(&p, chunk));
    b.owned.push_back(p);
    b.layout.chunk[ex.rank()] = static_cast<char *>(p);
    Published mine{};
    CUDA_CHECK(cudaIpcGetMemHandle(&mine.handle, p));
    CUDA_CHECK(cudaDeviceGetPCIBusId(mine.bus_id, sizeof mine.bus_id, g.device));
    ex.publish("handle", std::string(reinterpret_cast<const char *>(&mine), sizeof mine));
    for (int r = 0; r < ex.nranks(); ++r) {
        if (r == ex.rank()) continue;
        const std::string data = ex.read(r, "handle");
        if (data.size() != sizeof(Published)) suite::die("rank %d's handle file is damaged", r);
        Published theirs;
        std::memcpy(&theirs, data.data(), sizeof theirs);
        int peer = -1, can = 1;
        if (cudaDeviceGetByPCIBusId(&peer, theirs.bus_id) == cudaSuccess) {
            CUDA_CHECK(cudaDeviceCanAccessPeer(&can, g.device, peer));
            if (peer == g.device)
                suite::die("ranks %d and %d both run on GPU %s: one rank per GPU", ex.rank(), r, mine.bus_id);
        } else {
            cudaGetLastError();  // the peer's GPU is not visible here: let IPC say whether it can be reached
        }
        if (!can)
            suite::die("rank %d's GPU (%s) cannot access rank %d's GPU (%s) (cudaDeviceCanAccessPeer = 0)", ex.rank(),
                       mine.bus_id, r, theirs.bus_id);
        void *q = nullptr;
        CUDA_CHECK(cudaIpcOpenMemHandle(&q, theirs.handle, cudaIpcMemLazyEnablePeerAccess));
        b.imported.push_back(q);
        b.layout.chunk[r] = static_cast<char *>(q);
    }
}

void release_buffer(Buffer &b, const std::vector<Gpu> &gpus, std::uint64_t chunk) {
    for (void *q : b.imported) CUDA_CHECK(cudaIpcCloseMemHandle(q));
    if (b.contiguous) {
        CU_CHECK(driver().memUnmap(b.base, b.layout.nchunks * chunk));
        for (auto h : b.handles) CU_CHECK(driver().memRelease(h));
        CU_CHECK(driver().memAddressFree(b.base, b.layout.nchunks * chunk));
    }
    for (std::size_t i = 0; i < b.owned.size(); ++i) {
        CUDA_CHECK(cudaSetDevice(gpus[i].device));
        CUDA_CHECK(cudaFree(b.owned[i]));
    }
}

unsigned *chunk_of(const Buffer &b, const Gpu &g) {
    return reinterpret_cast<unsigned *>(b.contiguous ? b.layout.chunk[0] + g.index * b.layout.chunk_bytes
                                                     : b.layout.chunk[g.index]);
}

}  // namespace mem_scan
