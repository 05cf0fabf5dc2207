// y = W x for one bf16 row x, each program's rows of W landed in shared memory by bulk copies
// (cp.async.bulk, completion counted on an mbarrier) issued before griddepcontrol.wait.
// Used by research/probe_bulk_gemv.py: whether weights streamed into shared memory across a
// kernel boundary hide the boundary of a chain of dependent projections (notes/decode.md,
// sessions 66-68: registers could not, since a share held there leaves no room beside it).
//
// Program p takes rows [p R, (p + 1) R) of W (row-major, K a multiple of 8) in chunks of C
// whole rows (one bulk copy each) through a ring of S buffers: the first S chunks are in
// flight before the wait; a buffer is refilled once every thread has read it. Thread t
// reads row t / (T / C) of a chunk, 8 columns at a time, x from shared memory.
#include <cuda_bf16.h>
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

namespace {

#ifndef THREADS_PER_PROGRAM
#define THREADS_PER_PROGRAM 256
#endif
constexpr int THREADS = THREADS_PER_PROGRAM;
constexpr int WARPS = THREADS / 32;
constexpr int MAX_STAGES = 8;
constexpr int EARLY = 1, LAND_FIRST = 2;

__device__ __forceinline__ unsigned shared_address(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void wait_phase(unsigned barrier, unsigned phase) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT;\n"
      "}\n" ::"r"(barrier), "r"(phase) : "memory");
}

__device__ __forceinline__ long long now() {
  long long t;
  asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ void unpack8(uint4 v, float* out) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&v);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float2 f = __bfloat1622float2(h[i]);
    out[2 * i] = f.x;
    out[2 * i + 1] = f.y;
  }
}

#ifndef MIN_PROGRAMS
#define MIN_PROGRAMS 1
#endif
__global__ void __launch_bounds__(THREADS, MIN_PROGRAMS)
bulk_gemv_kernel(__nv_bfloat16* __restrict__ y, const __nv_bfloat16* x,
                 const __nv_bfloat16* __restrict__ w, int N, int K, int rows_per_program,
                 int chunk_rows, int stages, int flags, long long* trace) {
  // flags: EARLY (the next kernel released at the start), LAND_FIRST (the chunks in flight
  // waited for before griddepcontrol.wait: an mbarrier wait after x's loads may wait for
  // them too). trace (when given): per program the %globaltimer at its start, past the wait,
  // once its first chunk has landed, and at its end
  extern __shared__ __align__(128) unsigned char buffers[];
  __shared__ __align__(8) unsigned long long barriers[MAX_STAGES];
  __shared__ float partial[WARPS];
  const long long started = trace ? now() : 0;
  const bool early = flags & EARLY, land_first = flags & LAND_FIRST;
  if (early) asm volatile("griddepcontrol.launch_dependents;");
  const int first = blockIdx.x * rows_per_program;
  const int rows = min(rows_per_program, N - first);
  const int chunks = (rows + chunk_rows - 1) / chunk_rows;
  const unsigned row_bytes = static_cast<unsigned>(K) * 2;
  const unsigned chunk_bytes = row_bytes * chunk_rows;
  const char* share = reinterpret_cast<const char*>(w) + static_cast<size_t>(first) * row_bytes;
  // the program's results, stored together at its end: a store between two mbarrier waits
  // may be waited for by the second
  float* results = reinterpret_cast<float*>(buffers + stages * chunk_bytes);
  __nv_bfloat16* x_shared = reinterpret_cast<__nv_bfloat16*>(
      buffers + stages * chunk_bytes + 16 * ((rows_per_program + 3) / 4));

  auto issue = [&](int c) {  // chunk c into buffer c % stages (thread 0 only)
    const int s = c % stages;
    const unsigned bytes = row_bytes * min(chunk_rows, rows - c * chunk_rows);
    const unsigned barrier = shared_address(&barriers[s]);
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;"
                 ::"r"(barrier), "r"(bytes) : "memory");
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
        ::"r"(shared_address(buffers + s * chunk_bytes)), "l"(share + static_cast<size_t>(c) * chunk_bytes),
        "r"(bytes), "r"(barrier) : "memory");
  };
  if (threadIdx.x == 0) {
    for (int s = 0; s < stages; ++s)
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(shared_address(&barriers[s])));
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    for (int c = 0; c < min(stages, chunks); ++c) issue(c);
  }
  __syncthreads();  // the barriers are initialised before anyone waits on them
  long long landed = 0;
  if (land_first) {
    for (int c = 0; c < min(stages, chunks); ++c) wait_phase(shared_address(&barriers[c]), 0);
    if (trace) landed = now();
  }

  asm volatile("griddepcontrol.wait;" ::: "memory");  // x is final
  if (!early) asm volatile("griddepcontrol.launch_dependents;");
  const long long waited = trace ? now() : 0;

  const int per_row = THREADS / chunk_rows;  // threads a row: a multiple of 32
  const int local_row = threadIdx.x / per_row;
  const int lane_in_row = threadIdx.x % per_row;
  // x into shared memory beside the weights (one coalesced pass): held in registers it took
  // 32 a thread, and a register cap for more programs an SM spilled it
  for (int col = threadIdx.x * 8; col < K; col += THREADS * 8)
    *reinterpret_cast<uint4*>(x_shared + col) = __ldcg(reinterpret_cast<const uint4*>(x + col));
  __syncthreads();
  for (int c = 0; c < chunks; ++c) {
    const int s = c % stages;
    if (!land_first || c >= stages) {
      wait_phase(shared_address(&barriers[s]), (c / stages) & 1);
      if (c == 0 && trace) landed = now();
    }
    const int row = c * chunk_rows + local_row;
    const __nv_bfloat16* tile =
        reinterpret_cast<const __nv_bfloat16*>(buffers + s * chunk_bytes) + local_row * K;
    float sums[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};  // 8 chains, not one of K / 8
    if (row < rows) {
#pragma unroll 4
      for (int col = lane_in_row * 8; col < K; col += per_row * 8) {
        float wv[8], xv[8];
        unpack8(*reinterpret_cast<const uint4*>(tile + col), wv);
        unpack8(*reinterpret_cast<const uint4*>(x_shared + col), xv);
#pragma unroll
        for (int e = 0; e < 8; ++e) sums[e] = fmaf(wv[e], xv[e], sums[e]);
      }
    }
    float acc = ((sums[0] + sums[1]) + (sums[2] + sums[3]))
        + ((sums[4] + sums[5]) + (sums[6] + sums[7]));
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1)
      acc += __shfl_xor_sync(0xffffffffu, acc, offset);
    if (per_row > 32) {  // a row over several warps: their sums through shared memory
      if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = acc;
      __syncthreads();
      if (lane_in_row == 0) {
        acc = 0.f;
        for (int k = 0; k < per_row / 32; ++k) acc += partial[threadIdx.x / 32 + k];
      }
    }
    if (lane_in_row == 0 && row < rows) results[row] = acc;
    if (c + stages < chunks) {
      __syncthreads();  // every thread is done with buffer s (and with partial)
      if (threadIdx.x == 0) {
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        issue(c + stages);
      }
    } else if (per_row > 32) {
      __syncthreads();  // partial is read before the next chunk writes it
    }
  }
  __syncthreads();
  for (int r = threadIdx.x; r < rows; r += THREADS) y[first + r] = __float2bfloat16(results[r]);
  if (trace && threadIdx.x == 0) {
    long long* mine = trace + 4 * blockIdx.x;
    mine[0] = started;
    mine[1] = waited;
    mine[2] = landed;
    mine[3] = now();
  }
}

}  // namespace

void bulk_gemv(torch::Tensor y, torch::Tensor x, torch::Tensor w, int64_t rows_per_program,
               int64_t chunk_rows, int64_t stages, int64_t flags, torch::Tensor trace) {
  TORCH_CHECK(w.dtype() == torch::kBFloat16 && w.is_contiguous() && w.dim() == 2, "w: bf16 2-D");
  const int N = w.size(0), K = w.size(1);
  TORCH_CHECK(K % 8 == 0, "K must be a multiple of 8");
  TORCH_CHECK(THREADS % chunk_rows == 0 && (THREADS / chunk_rows) % 32 == 0,
              "chunk_rows must divide ", WARPS);
  TORCH_CHECK(stages >= 1 && stages <= MAX_STAGES, "stages");
  TORCH_CHECK(reinterpret_cast<uintptr_t>(x.data_ptr()) % 16 == 0, "x must be 16-byte aligned");
  const size_t shared = static_cast<size_t>(stages) * chunk_rows * K * 2
      + 16 * ((rows_per_program + 3) / 4) + 2 * K;  // the chunks, the results, x
  TORCH_CHECK(shared <= 227 * 1024 - 1024, "shared memory ", shared);
  static bool configured = false;
  if (!configured) {  // dynamic shared memory past 48 KB: the opt-in less the static part
    int optin = 0, device = 0;
    C10_CUDA_CHECK(cudaGetDevice(&device));
    C10_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    cudaFuncAttributes attributes;
    C10_CUDA_CHECK(cudaFuncGetAttributes(&attributes, bulk_gemv_kernel));
    C10_CUDA_CHECK(cudaFuncSetAttribute(bulk_gemv_kernel,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        optin - static_cast<int>(attributes.sharedSizeBytes)));
    configured = true;
  }
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3((N + rows_per_program - 1) / rows_per_program);
  config.blockDim = dim3(THREADS);
  config.dynamicSmemBytes = shared;
  config.stream = at::cuda::getCurrentCUDAStream();
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute[0].val.programmaticStreamSerializationAllowed = 1;
  config.attrs = attribute;
  config.numAttrs = 1;
  auto* y_ptr = reinterpret_cast<__nv_bfloat16*>(y.data_ptr());
  auto* x_ptr = reinterpret_cast<const __nv_bfloat16*>(x.data_ptr());
  auto* w_ptr = reinterpret_cast<const __nv_bfloat16*>(w.data_ptr());
  C10_CUDA_CHECK(cudaLaunchKernelEx(&config, bulk_gemv_kernel, y_ptr, x_ptr, w_ptr, N, K,
                                    static_cast<int>(rows_per_program),
                                    static_cast<int>(chunk_rows), static_cast<int>(stages),
                                    static_cast<int>(flags),
                                    trace.numel() ? reinterpret_cast<long long*>(trace.data_ptr<int64_t>()) : nullptr));
}
