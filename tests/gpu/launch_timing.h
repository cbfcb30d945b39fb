// The launch-path timings the PC fact programs (pc_episode_facts, pc_sampling_facts) compare
// across PC sampling states. Include after pc_facts.h (the kernels tiny and spin) and after the
// program's CHECK, which the calls below report through.
#pragma once

#include <cuda_runtime.h>

// ns per launch of `n` 1-block tiny kernels on `s`, counted until the stream has run them.
static double tiny_launch_ns(cudaStream_t s, int *d_tiny, int n) {
  CHECK(cudaDeviceSynchronize());
  double t0 = now_ms();
  for (int i = 0; i < n; ++i) tiny<<<1, 32, 0, s>>>(d_tiny);
  CHECK(cudaStreamSynchronize(s));
  return (now_ms() - t0) * 1e6 / n;
}

// ms for `per_stream` 1-block spin(cycles) kernels on each of two streams: about one stream's
// worth when the kernels overlap, twice that when they are serialized.
static double concurrency_ms(cudaStream_t a, cudaStream_t b, long long cycles, int per_stream) {
  CHECK(cudaDeviceSynchronize());
  double t0 = now_ms();
  for (int i = 0; i < per_stream; ++i) {
    spin<<<1, 32, 0, a>>>(cycles);
    spin<<<1, 32, 0, b>>>(cycles);
  }
  CHECK(cudaDeviceSynchronize());
  return now_ms() - t0;
}
