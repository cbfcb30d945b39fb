// Statistics counters that cost one uncontended store on the hot path: each thread bumps its own
// block, readers add up all blocks. Eight threads launching at full speed would otherwise fight
// over shared cache lines in the mock, and the mock must never be the bottleneck it measures.
// Blocks are never freed (one per thread that ever counted), so totals survive thread exit.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace mockstats {

// Tag makes each user (each library, each set of counters) its own family of blocks.
template <typename Tag, size_t N>
class PerThreadCounters {
 public:
  static void add(size_t index, uint64_t delta = 1) {
    std::atomic<uint64_t> &c = local().values[index];
    // Only this thread writes its block: no read-modify-write instruction needed.
    c.store(c.load(std::memory_order_relaxed) + delta, std::memory_order_relaxed);
  }

  static uint64_t sum(size_t index) {
    uint64_t total = 0;
    for (const Block *b = head().load(std::memory_order_acquire); b; b = b->next)
      total += b->values[index].load(std::memory_order_relaxed);
    return total;
  }

 private:
  struct alignas(64) Block {
    std::atomic<uint64_t> values[N] = {};
    Block *next = nullptr;
  };

  static std::atomic<Block *> &head() {
    static std::atomic<Block *> h{nullptr};
    return h;
  }

  static Block &local() {
    thread_local Block *block = nullptr;
    if (__builtin_expect(block == nullptr, 0)) {
      Block *b = new Block;
      b->next = head().load(std::memory_order_relaxed);
      while (!head().compare_exchange_weak(b->next, b, std::memory_order_release,
                                           std::memory_order_relaxed)) {
      }
      block = b;
    }
    return *block;
  }
};

}  // namespace mockstats
