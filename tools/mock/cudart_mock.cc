// A stand-in CUDA runtime: libcudart.so.12 or libcudart.so.13 by its SONAME, with the one entry
// point that says which (cudaRuntimeGetVersion). The mock driver does the work of both runtime
// and driver; this library only has to be in the process, where an application linked to the
// CUDA runtime has it, so that the library under test can tell which CUDA the application runs
// and where that CUDA keeps its CUPTI (parcagpu-mockapp --cudart).
extern "C" __attribute__((visibility("default"))) int cudaRuntimeGetVersion(int *version) {
  if (!version) return 1;  // cudaErrorInvalidValue
  *version = MOCK_CUDART_VERSION;
  return 0;  // cudaSuccess
}
