/* libdeep-frames.so: a launch four calls below deep_a, each caller's frame DEEP_FRAME_BYTES deep
 * (tests/programs/deep_frames.c). */
#ifndef PARCAGPU_TESTS_DEEP_FRAMES_H
#define PARCAGPU_TESTS_DEEP_FRAMES_H

#include "mock_cuda.h"

/* Four frames of this size: a launch stack of about 36 KiB above deep_launch's own frames, deeper
 * than the copy parcagpu-trace took before issue 29 (8 KiB) and than half of today's (64 KiB). */
#define DEEP_FRAME_BYTES 9000

/* Launches f through the mock driver from deep_e; 0 on success. */
int deep_a(CUfunction f, int i);

#endif
