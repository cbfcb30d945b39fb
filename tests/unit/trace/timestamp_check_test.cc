// Unit tests of the impossible-kernel-record check (tools/trace/timestamp_check.h) and of the joiner's
// use of it (Joiner::judge, the impossible_* counters, the report's line).
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <string>

#include "joiner.h"
#include "report.h"
#include "test_output.h"
#include "timestamp_check.h"

namespace parcagpu::trace {
namespace {

constexpr uint64_t kMs = 1'000'000, kS = 1'000'000'000;
constexpr uint64_t kBase = 1'700'000'000 * kS;  // CUPTI's clock: the wall clock

// A kernel of stream 7 of pid 1 on device 0, context 1, delivered 10000 s after boot by a process
// then an hour old; its announcement unknown.
KernelTimes kt(uint64_t start, uint64_t end, uint32_t corr = 1, uint32_t stream = 7) {
  KernelTimes k;
  k.pid = 1;
  k.device = 0;
  k.context = 1;
  k.stream = stream;
  k.correlation = corr;
  k.start = start;
  k.end = end;
  k.delivered_ns = 10'000 * kS;
  k.process_start_ns = k.delivered_ns - 3600 * kS;
  k.announced_ns = 0;
  return k;
}

TEST(TimestampCheckTest, BackToBackKernelsOfOneStreamArePossible) {
  TimestampCheck c;
  for (uint32_t i = 0; i < 100; ++i) {
    const uint64_t s = kBase + i * 10 * kMs;
    EXPECT_EQ(c.check(kt(s, s + 10 * kMs, i + 1)), Impossible::kNone) << i;
  }
  EXPECT_EQ(c.total(), 0u);
}

TEST(TimestampCheckTest, ReversedOrZero) {
  TimestampCheck c;
  EXPECT_EQ(c.check(kt(kBase + 10, kBase + 5)), Impossible::kReversed);
  EXPECT_EQ(c.check(kt(0, kBase)), Impossible::kReversed);
  EXPECT_EQ(c.check(kt(kBase, 0)), Impossible::kReversed);
  EXPECT_EQ(c.check(kt(kBase, kBase)), Impossible::kNone);  // 0 ns: short, not impossible
  EXPECT_EQ(c.count(Impossible::kReversed), 3u);
  EXPECT_EQ(c.total(), 3u);
  EXPECT_STREQ(impossible_name(Impossible::kReversed), "reversed");
  EXPECT_STREQ(impossible_name(Impossible::kNone), "");
}

TEST(TimestampCheckTest, LongerThanItsProcessHadLived) {
  TimestampCheck c;
  KernelTimes k = kt(kBase, kBase + 2 * kS);
  k.process_start_ns = k.delivered_ns - 1 * kS;  // the process is 1 s old at the delivery
  EXPECT_EQ(c.check(k), Impossible::kLongerThanProcess);
  k = kt(kBase, kBase + 1 * kS + 5 * kMs);  // within the slack
  k.process_start_ns = k.delivered_ns - 1 * kS;
  EXPECT_EQ(c.check(k), Impossible::kNone);
  // Start unknown: the time since boot (the delivery's monotonic time) bounds it.
  k = kt(kBase + 10 * kS, kBase + 10 * kS + 20'000 * kS);
  k.process_start_ns = 0;
  EXPECT_EQ(c.check(k), Impossible::kLongerThanProcess);
  k = kt(kBase + 100'000 * kS, kBase + 100'000 * kS + 9'000 * kS);
  k.process_start_ns = 0;
  EXPECT_EQ(c.check(k), Impossible::kNone);
  EXPECT_EQ(c.count(Impossible::kLongerThanProcess), 2u);
}

TEST(TimestampCheckTest, LongerThanFromItsAnnouncementToItsDelivery) {
  TimestampCheck c;
  KernelTimes k = kt(kBase, kBase + 500 * kMs);
  k.announced_ns = k.delivered_ns - 100 * kMs;
  EXPECT_EQ(c.check(k), Impossible::kLongerThanLaunch);
  // Within the slack for the launch call (announced at its end, after the kernel started).
  k = kt(kBase + kS, kBase + kS + 105 * kMs);
  k.announced_ns = k.delivered_ns - 100 * kMs;
  EXPECT_EQ(c.check(k), Impossible::kNone);
  // Delivered before its announcement: nothing to compare.
  k = kt(kBase + 2 * kS, kBase + 2 * kS + 500 * kMs);
  k.announced_ns = k.delivered_ns + kMs;
  EXPECT_EQ(c.check(k), Impossible::kNone);
  EXPECT_EQ(c.count(Impossible::kLongerThanLaunch), 1u);
}

TEST(TimestampCheckTest, KernelsOfOneStreamOverlapInWhateverOrderTheyCome) {
  TimestampCheck c;
  EXPECT_EQ(c.check(kt(kBase + 100 * kMs, kBase + 200 * kMs, 1)), Impossible::kNone);
  EXPECT_EQ(c.check(kt(kBase + 150 * kMs, kBase + 250 * kMs, 2)), Impossible::kStreamOverlap);
  // The impossible one is not remembered: what overlaps it alone is fine.
  EXPECT_EQ(c.check(kt(kBase + 220 * kMs, kBase + 240 * kMs, 3)), Impossible::kNone);
  // Out of order: an older kernel that overlaps a newer one.
  EXPECT_EQ(c.check(kt(kBase + 50 * kMs, kBase + 90 * kMs, 4)), Impossible::kNone);
  EXPECT_EQ(c.check(kt(kBase + 80 * kMs, kBase + 95 * kMs, 5)), Impossible::kStreamOverlap);
  // One graph launch's kernels may run side by side.
  EXPECT_EQ(c.check(kt(kBase + 110 * kMs, kBase + 120 * kMs, 1)), Impossible::kNone);
  // Another stream, another context, another process: no overlap.
  EXPECT_EQ(c.check(kt(kBase + 150 * kMs, kBase + 250 * kMs, 6, 8)), Impossible::kNone);
  KernelTimes k = kt(kBase + 150 * kMs, kBase + 250 * kMs, 7);
  k.context = 2;
  EXPECT_EQ(c.check(k), Impossible::kNone);
  k.context = 1;
  k.pid = 2;
  EXPECT_EQ(c.check(k), Impossible::kNone);
  // Touching, or overlapping by at most a microsecond: fine.
  EXPECT_EQ(c.check(kt(kBase + 240 * kMs, kBase + 260 * kMs, 8)), Impossible::kNone);
  EXPECT_EQ(c.check(kt(kBase + 260 * kMs - 1000, kBase + 270 * kMs, 9)), Impossible::kNone);
  EXPECT_EQ(c.count(Impossible::kStreamOverlap), 2u);
}

TEST(TimestampCheckTest, TheWindowKeepsTheLatestKernels) {
  TimestampCheck c;
  for (uint32_t i = 0; i < 3 * TimestampCheck::kWindow; ++i)
    ASSERT_EQ(c.check(kt(kBase + i * kMs, kBase + (i + 1) * kMs, i + 1)), Impossible::kNone);
  // The latest are remembered ...
  const uint64_t last = 3 * TimestampCheck::kWindow - 1;
  EXPECT_EQ(c.check(kt(kBase + last * kMs, kBase + (last + 1) * kMs, 1000)), Impossible::kStreamOverlap);
  // ... the first are forgotten (an overlap that far back goes unseen).
  EXPECT_EQ(c.check(kt(kBase, kBase + kMs / 2, 1001)), Impossible::kNone);
}

TEST(TimestampCheckTest, ADeviceCannotRunMoreThanItsStreamsInASecond) {
  TimestampCheck c;
  // One graph launch's kernels of one stream side by side (allowed by the stream check) add up
  // to more than the stream can run in that second.
  EXPECT_EQ(c.check(kt(kBase, kBase + 600 * kMs, 1)), Impossible::kNone);
  EXPECT_EQ(c.check(kt(kBase + 100 * kMs, kBase + 700 * kMs, 1)), Impossible::kDeviceOverfull);
  // A second stream that second makes room for it.
  EXPECT_EQ(c.check(kt(kBase + 100 * kMs, kBase + 700 * kMs, 2, 8)), Impossible::kNone);
  EXPECT_EQ(c.check(kt(kBase + 100 * kMs, kBase + 700 * kMs, 1)), Impossible::kNone);
  EXPECT_EQ(c.check(kt(kBase + 100 * kMs, kBase + 700 * kMs, 1)), Impossible::kDeviceOverfull);
  // A kernel across a second's end counts in both, by its part in each.
  EXPECT_EQ(c.check(kt(kBase + 5 * kS - 500 * kMs, kBase + 5 * kS + 500 * kMs, 3)), Impossible::kNone);
  EXPECT_EQ(c.check(kt(kBase + 5 * kS - 500 * kMs, kBase + 5 * kS + 500 * kMs, 3)), Impossible::kNone);
  EXPECT_EQ(c.check(kt(kBase + 5 * kS + 100 * kMs, kBase + 5 * kS + 200 * kMs, 3)), Impossible::kDeviceOverfull);
  EXPECT_EQ(c.count(Impossible::kDeviceOverfull), 3u);
  // A second long gone is no longer checked.
  EXPECT_EQ(c.check(kt(kBase, kBase + 900 * kMs, 1)), Impossible::kNone);
}

TEST(TimestampCheckTest, AProcessGoneIsForgotten) {
  TimestampCheck c;
  EXPECT_EQ(c.check(kt(kBase, kBase + 100 * kMs, 1)), Impossible::kNone);
  c.forget_process(2);
  EXPECT_EQ(c.check(kt(kBase + 50 * kMs, kBase + 60 * kMs, 2)), Impossible::kStreamOverlap);
  c.forget_process(1);
  EXPECT_EQ(c.check(kt(kBase + 50 * kMs, kBase + 60 * kMs, 2)), Impossible::kNone);
}

// Every process that exits on the machine is forgotten, most of them never heard from: each
// costs what it had, not a walk of every stream remembered (issue 44: a stop under overload took
// a minute while processes came and went). 16384 streams of one process, 50000 others gone: a
// walk of each is 819 million steps (1-2 s); the index makes it 50000 lookups (a few ms).
TEST(TimestampCheckTest, ForgettingAProcessCostsWhatItHad) {
  TimestampCheck c;
  for (uint32_t stream = 1; stream <= 16384; ++stream)
    ASSERT_EQ(c.check(kt(kBase, kBase + kMs, stream, stream)), Impossible::kNone);
  const auto t0 = std::chrono::steady_clock::now();
  for (uint32_t pid = 100; pid < 50100; ++pid) c.forget_process(pid);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(ms, 100.0) << "50000 processes that had nothing took " << ms << " ms to forget";
  // Still remembered, then forgotten with its process.
  EXPECT_EQ(c.check(kt(kBase, kBase + kMs, 9999, 7)), Impossible::kStreamOverlap);
  c.forget_process(1);
  EXPECT_EQ(c.check(kt(kBase, kBase + kMs, 9999, 7)), Impossible::kNone);
}

// A wrong kernel that came first (its end moved 80 ms late, as CUPTI does when activity goes off
// while it runs) costs the stream one right record, not all those it claims to cover; a right
// one that two longer wrong ones overlap stays.
TEST(TimestampCheckTest, AStretchedKernelThatCameFirstSpoilsOneRecordNotItsStream) {
  TimestampCheck c;
  EXPECT_EQ(c.check(kt(kBase, kBase + 80 * kMs, 1)), Impossible::kNone);  // can't tell yet
  int flagged = 0;
  for (uint32_t i = 0; i < 40; ++i) {
    const uint64_t s = kBase + 10'000 + i * kMs;
    flagged += c.check(kt(s, s + 500'000, 100 + i)) != Impossible::kNone;
  }
  EXPECT_EQ(flagged, 1);
  EXPECT_EQ(c.count(Impossible::kStreamOverlap), 1u);
  // Right ones: a short kernel, then two longer ones over it, each judged impossible.
  EXPECT_EQ(c.check(kt(kBase + kS, kBase + kS + kMs, 200)), Impossible::kNone);
  EXPECT_EQ(c.check(kt(kBase + kS, kBase + kS + 50 * kMs, 201)), Impossible::kStreamOverlap);
  EXPECT_EQ(c.check(kt(kBase + kS, kBase + kS + 60 * kMs, 202)), Impossible::kStreamOverlap);
  EXPECT_EQ(c.check(kt(kBase + kS + 500'000, kBase + kS + 2 * kMs, 203)), Impossible::kStreamOverlap);
}

TEST(TimestampCheckTest, ProcessStartOnTheMonotonicClock) {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  const uint64_t now = static_cast<uint64_t>(ts.tv_sec) * kS + static_cast<uint64_t>(ts.tv_nsec);
  const uint64_t start = process_start_monotonic_ns(static_cast<uint32_t>(getpid()));
  EXPECT_GT(start, 0u);
  EXPECT_LE(start, now);
  EXPECT_LT(now - start, 3600 * kS);  // this test has not run for an hour
  EXPECT_EQ(process_start_monotonic_ns(0x7ffffff0u), 0u);  // no such process
}

// The joiner: a record is judged with its launch's announcement, counted, and left out of the
// GPU time by the sink (KernelRecord::gpu_ns).
TEST(TimestampCheckTest, TheJoinerJudgesWithTheAnnouncement) {
  Joiner j;
  j.on_correlation(10, 1, 211, 0, 50 * kS);
  KernelRecord k;
  k.pid = 10;
  k.correlation_id = 1;
  k.stream_id = 7;
  k.start = kBase;
  k.end = kBase + 500 * kMs;  // 0.5 s, delivered 0.1 s after its announcement
  k.seen_ns = 50 * kS + 100 * kMs;
  k.process_start_ns = 1 * kS;
  k.name = "k";
  EXPECT_EQ(j.judge(&k), Impossible::kLongerThanLaunch);
  EXPECT_EQ(k.gpu_ns(), 0u);
  EXPECT_EQ(k.duration_ns(), 500 * kMs);
  EXPECT_TRUE(j.on_kernel(k).matched);
  // A kernel that came before its launch's announcement: no launch bound.
  KernelRecord early = k;
  early.correlation_id = 2;
  early.start = kBase + kS;
  early.end = kBase + kS + 500 * kMs;
  EXPECT_EQ(j.judge(&early), Impossible::kNone);
  EXPECT_EQ(early.gpu_ns(), 500 * kMs);
  j.on_kernel(early);
  KernelRecord reversed = k;
  reversed.correlation_id = 3;
  reversed.end = reversed.start - 1;
  EXPECT_EQ(j.judge(&reversed), Impossible::kReversed);
  j.on_kernel(reversed);
  Summary s;
  j.add_to(&s);
  EXPECT_EQ(s.impossible_kernel_records, 2u);
  EXPECT_EQ(s.impossible_longer_than_launch, 1u);
  EXPECT_EQ(s.impossible_reversed, 1u);
  EXPECT_EQ(s.impossible_stream_overlap, 0u);
  const Json js = summary_json(s);
  EXPECT_EQ(js.at("impossible_kernel_records"), 2u);
  EXPECT_EQ(js.at("impossible_longer_than_launch"), 1u);
  // The report says so, with the reasons.
  const std::string text = test_output::printed([&](FILE *f) { print_summary(f, s, false); });
  EXPECT_NE(text.find("impossible kernel records: 2 of 3 (reversed or 0 1, longer than launch to delivery 1), "
                      "left out of the GPU time"),
            std::string::npos)
      << text;
}

TEST(TimestampCheckTest, NoLineWithoutImpossibleRecords) {
  Summary s;
  const std::string text = test_output::printed([&](FILE *f) { print_summary(f, s, false); });
  EXPECT_EQ(text.find("impossible"), std::string::npos) << text;
}

}  // namespace
}  // namespace parcagpu::trace
