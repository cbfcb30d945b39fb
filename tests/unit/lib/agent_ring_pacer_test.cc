// The pacer of firings into the agent's ring (agent_ring_pacer.h), on a clock of the test's.
#include "base/agent_ring_pacer.h"

#include <gtest/gtest.h>

namespace parcagpu {
namespace {

constexpr uint64_t kSecond = 1000000000ull;
constexpr uint64_t kSlice = 128 * kAgentPcEventBytes;  // one pc_sample_batch firing of 128

TEST(AgentRingPacer, AFiringOfAThousandRecordsNeverGoesInAtOnce) {
  // The firing the agent gave up the rest of: 1,024 PC records are 737 KB, more than the burst.
  AgentRingPacer p;
  const uint64_t t0 = 5 * kSecond;
  EXPECT_GT(1024 * kAgentPcEventBytes, AgentRingPacer::kBurstBytes);
  EXPECT_EQ(p.wait_ns(kSlice, t0), 0u);  // a slice fits the burst
  uint64_t fired = 0, now = t0;
  while (fired < 1024) {
    const uint64_t w = p.wait_ns(kSlice, now);
    now += w;
    if (w == 0) {
      p.take(kSlice, now);
      fired += 128;
    }
  }
  // Two slices went at once (the burst holds 2.8); the other six waited for the refill.
  const uint64_t expected = (1024 * kAgentPcEventBytes - AgentRingPacer::kBurstBytes) * kSecond /
                            AgentRingPacer::kBytesPerSecond;
  EXPECT_GE(now - t0, expected * 9 / 10);
  EXPECT_LE(now - t0, expected * 11 / 10 + kSecond / 1000);
}

TEST(AgentRingPacer, WhatIsInTheRingAtOnceStaysUnderAQuarterOfItPlusTheRefill) {
  // Whatever the order of takes and waits, the bytes let in over any interval of length d are at
  // most the burst plus d times the rate: a reader that keeps up with the rate never sees more
  // than the burst waiting.
  AgentRingPacer p;
  uint64_t now = kSecond, in = 0;
  const uint64_t start = now;
  for (int i = 0; i < 1000; i++) {
    now += p.wait_ns(kSlice, now);
    p.take(kSlice, now);
    in += kSlice;
  }
  const uint64_t allowed = AgentRingPacer::kBurstBytes +
                           (now - start) * AgentRingPacer::kBytesPerSecond / kSecond + kSlice;
  EXPECT_LE(in, allowed);
  EXPECT_LT(AgentRingPacer::kBurstBytes + kSlice, kAgentRingBytes / 2);
}

TEST(AgentRingPacer, KernelRecordsMayOweHalfTheRingAndPcSlicesWaitForThem) {
  AgentRingPacer p;
  const uint64_t t = 3 * kSecond;
  const uint64_t firing = 128 * kAgentKernelEventBytes;  // one activity_batch firing
  const uint64_t owe = AgentRingPacer::kKernelDebtBytes;
  // A flush's burst of kernel records: the burst and half the ring go in at once...
  uint64_t in = 0;
  while (p.wait_ns(firing, t, owe) == 0) {
    p.take(firing, t);
    in += firing;
  }
  EXPECT_GE(in, AgentRingPacer::kBurstBytes + owe - firing);
  EXPECT_LE(in, AgentRingPacer::kBurstBytes + owe + firing);
  EXPECT_LT(in + kSlice, kAgentRingBytes);  // with a PC slice: still in the ring
  // ... then the next waits, and a PC slice waits for the debt to be paid and its own room.
  const uint64_t debt = in - AgentRingPacer::kBurstBytes;
  const uint64_t w = p.wait_ns(kSlice, t);
  EXPECT_GE(w, (debt + kSlice) * kSecond / AgentRingPacer::kBytesPerSecond);
  EXPECT_EQ(p.wait_ns(kSlice, t + w), 0u);
}

TEST(AgentRingPacer, MoreThanABurstWaitsForAFullBucketOnly) {
  AgentRingPacer p;
  const uint64_t t = kSecond;
  p.take(AgentRingPacer::kBurstBytes, t);
  const uint64_t full = AgentRingPacer::kBurstBytes * kSecond / AgentRingPacer::kBytesPerSecond;
  EXPECT_LE(p.wait_ns(10 * AgentRingPacer::kBurstBytes, t), full + 1);
  EXPECT_EQ(p.wait_ns(10 * AgentRingPacer::kBurstBytes, t + full + 1000), 0u);
}

TEST(AgentRingPacer, ALongIdleGapRefillsToTheBurstOnly) {
  AgentRingPacer p;
  p.take(AgentRingPacer::kBurstBytes, kSecond);
  EXPECT_EQ(p.wait_ns(AgentRingPacer::kBurstBytes, 1000000 * kSecond), 0u);
  p.take(AgentRingPacer::kBurstBytes, 1000000 * kSecond);
  EXPECT_GT(p.wait_ns(kSlice, 1000000 * kSecond), 0u);
}

}  // namespace
}  // namespace parcagpu
