// The kernels of parcagpu-mockapp, for real: nvcc compiles this file into the cubin the mock
// driver hands to CUPTI's MODULE_LOADED callback, and the mock CUPTI reports PC samples at
// instruction offsets of these functions. The names (hence the mangled names) match the kernel
// names the mock application launches (tools/mock/mockapp_workload.cc), so a PC sample's function is
// the kernel that was launched. Built with -lineinfo: the cubin carries a DWARF line table that
// maps every offset to a line of this file, which parcagpu-trace shows.
//
// The bodies are small but of different character (memory streaming, arithmetic, reductions),
// so their instruction offsets and source lines differ.

__global__ void k_add(float *a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i] = a[i] + 1.0f;  // load, add, store
}

__global__ void k_mul(float *a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = i < n ? a[i] : 0.0f;
  for (int k = 0; k < 64; ++k) v = v * 1.0001f + 0.5f;  // dependent multiply-adds
  if (i < n) a[i] = v;
}

__global__ void k_coop(float *a) {
  __shared__ float s[256];
  s[threadIdx.x] = a[blockIdx.x * blockDim.x + threadIdx.x];
  __syncthreads();
  a[blockIdx.x * blockDim.x + threadIdx.x] = s[(threadIdx.x + 1) % blockDim.x];
}

__global__ void k(float *a) { a[threadIdx.x] *= 2.0f; }

__global__ void k_cond(unsigned long long handle, int *counter) {
  if (threadIdx.x == 0 && handle) atomicSub(counter, 1);
}

__global__ void k_dec(int *counter) {
  if (threadIdx.x == 0) atomicSub(counter, 1);
}

__global__ void gemm_tiled(const float *A, const float *B, float *C, int M, int N, int K) {
  __shared__ float ta[16][16], tb[16][16];
  int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
  float acc = 0.0f;
  for (int t = 0; t < K; t += 16) {
    ta[threadIdx.y][threadIdx.x] = row < M && t + threadIdx.x < K ? A[row * K + t + threadIdx.x] : 0.0f;
    tb[threadIdx.y][threadIdx.x] = col < N && t + threadIdx.y < K ? B[(t + threadIdx.y) * N + col] : 0.0f;
    __syncthreads();
    for (int i = 0; i < 16; ++i) acc += ta[threadIdx.y][i] * tb[i][threadIdx.x];
    __syncthreads();
  }
  if (row < M && col < N) C[row * N + col] = acc;
}

__global__ void softmax(float *out, const float *in, int n) {
  float m = -1e30f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) m = fmaxf(m, in[i]);
  float sum = 0.0f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) sum += __expf(in[i] - m);
  for (int i = threadIdx.x; i < n; i += blockDim.x) out[i] = __expf(in[i] - m) / sum;
}

__global__ void reduce_sum(float *out, const float *in, int n) {
  __shared__ float s[256];
  float v = 0.0f;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) v += in[i];
  s[threadIdx.x] = v;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) s[threadIdx.x] += s[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(out, s[0]);
}

// Kernels whose mangled names are longer than a consumer's copy of them: the production agent
// reads a PC record's function name up to 127 bytes and a kernel record's name up to 255
// (docs/probe-abi.md). All four share their first 127 bytes (the namespace), so cut at 127 they
// are one name; the two deep<> ones (over 255 bytes) share their first 255 too. Tests launch them
// with parcagpu-mockapp --kernel-names (tests/integration/test_pc_names.py).
namespace a_namespace_whose_name_alone_is_longer_than_the_production_agents_cut_of_pc_function_names_at_127_bytes_so_that_every_kernel_in_it_is_cut_there {

template <int N>
__global__ void variant(float *a) {
  a[threadIdx.x] = a[threadIdx.x] * N + 1.0f;
}
template __global__ void variant<1>(float *);
template __global__ void variant<2>(float *);

namespace and_a_second_one_nested_in_it_so_that_the_whole_mangled_name_is_longer_than_the_production_agents_cut_of_kernel_names_at_255_bytes_as_well {

template <int N>
__global__ void deep(float *a) {
  for (int k = 0; k < N * 8; ++k) a[threadIdx.x] = a[threadIdx.x] * 0.5f + N;
}
template __global__ void deep<1>(float *);
template __global__ void deep<2>(float *);

}  // namespace and_a_second_one_nested_in_it_so_that_the_whole_mangled_name_is_longer_than_the_production_agents_cut_of_kernel_names_at_255_bytes_as_well
}  // namespace a_namespace_whose_name_alone_is_longer_than_the_production_agents_cut_of_pc_function_names_at_127_bytes_so_that_every_kernel_in_it_is_cut_there
