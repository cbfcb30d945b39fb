// A module of many large kernels, compiled to its own cubin and loaded by gpu_memory_facts
// (module=PATH) with cuModuleLoad: with lazy loading a kernel's code reaches the GPU only when
// cuModuleGetFunction asks for it, so the module's GPU memory shows how many of its kernels were
// loaded (issue 27 item 3, docs/pc-sampling.md P34).
//
// Build:  nvcc -O2 -arch=sm_90 -cubin -o big_module.cubin big_module.cu
// Kernels: extern "C" big_0 .. big_127, each ~64 KB of code (4096 dependent FMAs whose constants
// differ, which the compiler can neither fold nor loop), ~8 MiB in all.

template <int K>
__device__ __forceinline__ void body(float *out) {
  float a = threadIdx.x + K;
#pragma unroll
  for (int i = 0; i < 4096; ++i) a = fmaf(a, 1.000001f + i * 1e-7f, 0.5f + K);
  if (a == 12345.0f) out[threadIdx.x] = a;
}

#define BIG(K) \
  extern "C" __global__ void big_##K(float *out) { body<K>(out); }
#define BIG8(K) BIG(K##0) BIG(K##1) BIG(K##2) BIG(K##3) BIG(K##4) BIG(K##5) BIG(K##6) BIG(K##7)
#define BIG64(K) BIG8(K##0) BIG8(K##1) BIG8(K##2) BIG8(K##3) BIG8(K##4) BIG8(K##5) BIG8(K##6) BIG8(K##7)
BIG64(1)
BIG64(2)
