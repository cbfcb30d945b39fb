// Four eager launches and two launches of a captured graph: enough for the library's search to
// be exercised and its callbacks to be seen (CUDA runtime static or shared, by the build).
#include <cstdio>
__global__ void add(float *x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] += 1; }
int main() {
  int rt = 0; cudaRuntimeGetVersion(&rt);
  float *x; cudaMalloc(&x, 1024 * sizeof(float));
  for (int i = 0; i < 4; ++i) add<<<4, 256>>>(x, 1024);
  cudaStream_t s; cudaStreamCreate(&s);
  cudaGraph_t g; cudaGraphExec_t e;
  cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
  add<<<4, 256, 0, s>>>(x, 1024); add<<<4, 256, 0, s>>>(x, 1024);
  cudaStreamEndCapture(s, &g); cudaGraphInstantiate(&e, g, 0);
  cudaGraphLaunch(e, s); cudaGraphLaunch(e, s);
  cudaError_t err = cudaDeviceSynchronize();
  printf("k: runtime %d, %s\n", rt, cudaGetErrorString(err));
  return err != cudaSuccess;
}
