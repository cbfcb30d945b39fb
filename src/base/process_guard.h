// What the library must get right about the process it lives in, apart from CUPTI:
//
//  - One profiler per process. Two copies of the library can be loaded at once (one through
//    LD_PRELOAD, another as CUDA_INJECTION64_PATH, from different paths): each has its own
//    statics, and CUPTI has room for one subscriber and one pair of buffer callbacks. The copy
//    that starts first claims the process through a marker every copy exports; a later copy
//    finds the claim and stays inert before it touches CUPTI at all. File names decide nothing:
//    copies may have any name.
//  - fork(). The child has only the forking thread: a mutex another thread held stays locked,
//    and the watcher thread (or any of ours) does not exist. CUDA cannot be used in a child of
//    a process that initialized it, so the profiler goes inert in the child: its exit path does
//    nothing and its callbacks return at once, never waiting on state of the parent's threads.
//  - exit() and quick_exit(): both deliver what was collected (atexit and at_quick_exit).
#pragma once

#include <atomic>
#include <string>

namespace parcagpu::process_guard {

namespace detail {
extern std::atomic<bool> g_forked_child;
}

// True in a process forked from the one where the profiler started (set by a pthread_atfork
// child handler, before fork() returns in the child).
inline bool forked_child() { return detail::g_forked_child.load(std::memory_order_relaxed); }

enum class Claim {
  Ours,     // this copy profiles the process (also when it had claimed it before)
  Another,  // another copy of the library claimed it first: stay inert, touch nothing
};

// Claims the process for this copy of the library. On Another, *other_path names the copy
// that holds the claim (as the dynamic loader knows it). Never throws.
Claim claim_process(std::string *other_path) noexcept;

// Installs the fork handler and runs `fn` at exit() and at quick_exit(), except in a forked
// child. Call once, after the profiler started.
void install(void (*at_exit_fn)()) noexcept;

}  // namespace parcagpu::process_guard
