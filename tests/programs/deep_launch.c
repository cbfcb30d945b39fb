/* A CUDA program as distributions build them: -O2 -fomit-frame-pointer (tests/CMakeLists.txt),
 * launching k_add through the mock driver five calls below main, in a library of deep frames
 * (deep_a .. deep_e, libdeep-frames.so, about 36 KiB of stack). The launch stack parcagpu-trace
 * shows must hold the whole chain main;deep_a;...;deep_e and end at the thread's first frame,
 * which only DWARF CFI unwinding of a copy reaching the stack's end finds: none of these
 * functions keeps a frame pointer (issues 18 and 29).
 *
 *   deep_launch [LAUNCHES] [--thread]
 *
 * LAUNCHES defaults to 200. With --thread the launches come from a second thread (whose stack is
 * megabytes deep, so the copy never reaches its end) instead of the main thread (whose stack ends
 * a few KiB above main, inside any copy of 64 KiB). The injection library comes from
 * CUDA_INJECTION64_PATH. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "deep_frames.h"

struct launches {
  CUfunction f;
  int count;
  int failed;
};

static void *launch_all(void *arg) {
  struct launches *l = arg;
  for (int i = 0; i < l->count; i++) l->failed += deep_a(l->f, 0);
  return NULL;
}

int main(int argc, char **argv) {
  int launches = 200, thread = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--thread") == 0)
      thread = 1;
    else
      launches = atoi(argv[i]);
  }
  if (launches <= 0) {
    fprintf(stderr, "usage: deep_launch [LAUNCHES > 0] [--thread]\n");
    return 2;
  }
  struct launches l = {mock_cuda_function("k_add"), launches, 0};
  if (thread) {
    pthread_t t;
    if (pthread_create(&t, NULL, launch_all, &l) != 0 || pthread_join(t, NULL) != 0) {
      fprintf(stderr, "deep_launch: no thread\n");
      return 1;
    }
  } else {
    launch_all(&l);
  }
  mock_cuda_device_synchronize();
  printf("deep_launch: %d launches, %d failed%s\n", launches, l.failed, thread ? " (thread)" : "");
  return l.failed != 0;
}
