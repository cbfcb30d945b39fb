// A consumer attached to one probe in a unit test: the semaphore the kernel would raise, raised by
// the test for the life of an Attached. For consumers_test.cc and nvtx_collector_test.cc.
#pragma once

namespace parcagpu {

#if defined(__SANITIZE_THREAD__)
// The kernel raises a semaphore from outside the process, where ThreadSanitizer sees no write;
// the test's own write stands in for it, so it is hidden from TSan the same way (libtsan's
// dynamic annotations), rather than reported as a race with the watcher's plain read.
extern "C" void AnnotateIgnoreWritesBegin(const char *file, int line);
extern "C" void AnnotateIgnoreWritesEnd(const char *file, int line);
#define PARCAGPU_KERNEL_WRITE_BEGIN() AnnotateIgnoreWritesBegin(__FILE__, __LINE__)
#define PARCAGPU_KERNEL_WRITE_END() AnnotateIgnoreWritesEnd(__FILE__, __LINE__)
#else
#define PARCAGPU_KERNEL_WRITE_BEGIN()
#define PARCAGPU_KERNEL_WRITE_END()
#endif

// One consumer attached to the probe of `semaphore` for the life of this object.
class Attached {
 public:
  explicit Attached(unsigned short &semaphore) : semaphore_(semaphore) { bump(+1); }
  ~Attached() { bump(-1); }
  Attached(const Attached &) = delete;
  Attached &operator=(const Attached &) = delete;

 private:
  void bump(int by) {
    volatile unsigned short &s = semaphore_;
    PARCAGPU_KERNEL_WRITE_BEGIN();
    s = static_cast<unsigned short>(s + by);
    PARCAGPU_KERNEL_WRITE_END();
  }
  unsigned short &semaphore_;
};

}  // namespace parcagpu
