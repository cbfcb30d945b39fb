// Statistics counters that cost one uncontended store on the hot path: each thread bumps its own
// block, readers add up all blocks. Eight threads launching at full speed would otherwise fight
// over shared cache lines in the mock, and the mock must never be the bottleneck it measures.
// Blocks are never freed (one per thread that ever counted), so totals survive thread exit.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

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

  // The totals of counters 0, 1, ... copied into `out`, a struct of nothing but uint64_t fields
  // declared in the order of the counters' indices (both generated from one list).
  template <typename Struct>
  static void sum_into(Struct *out) {
    static_assert(std::is_trivially_copyable_v<Struct> && sizeof(Struct) % sizeof(uint64_t) == 0);
    uint64_t totals[sizeof(Struct) / sizeof(uint64_t)];
    static_assert(sizeof(totals) / sizeof(totals[0]) <= N);
    for (size_t i = 0; i < sizeof(totals) / sizeof(totals[0]); ++i) totals[i] = sum(i);
    std::memcpy(out, totals, sizeof(totals));
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
