// GraphCompletion on a fake driver table and a fake clock: a watched graph launch ends (the
// activity collector's launch_end) only once its event says the GPU is past it, or when it
// cannot be watched, or at the timeout, or at shutdown.
#include "trackers/graph_completion.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <optional>

namespace parcagpu {
namespace {

struct FakeDriver {
  // Recorded events: finished? (atomic: the waiter thread reads them; never erased, so the
  // map's shape changes only on the test's thread, before the waiter looks.)
  std::map<CUevent, std::atomic<bool>> ready;
  CUresult create_result = CUDA_SUCCESS;
  CUresult record_result = CUDA_SUCCESS;
  CUresult query_error = CUDA_SUCCESS;  // returned for every query when not CUDA_SUCCESS
  int created = 0;
  std::atomic<int> destroyed{0};
  CUstream last_stream = nullptr;
};
FakeDriver *g_fake = nullptr;

CUresult fake_create(CUevent *e, unsigned int) {
  if (g_fake->create_result != CUDA_SUCCESS) return g_fake->create_result;
  *e = reinterpret_cast<CUevent>(static_cast<uintptr_t>(0x1000 + 16 * ++g_fake->created));
  return CUDA_SUCCESS;
}
CUresult fake_record(CUevent e, CUstream s) {
  if (g_fake->record_result != CUDA_SUCCESS) return g_fake->record_result;
  g_fake->ready[e] = false;
  g_fake->last_stream = s;
  return CUDA_SUCCESS;
}
CUresult fake_query(CUevent e) {
  if (g_fake->query_error != CUDA_SUCCESS) return g_fake->query_error;
  return g_fake->ready.at(e) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}
CUresult fake_destroy(CUevent e) {
  (void)e;
  ++g_fake->destroyed;
  return CUDA_SUCCESS;
}

class GraphCompletionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    g_fake = &fake_;
    api_.cuEventCreate = &fake_create;
    api_.cuEventRecord = &fake_record;
    api_.cuEventQuery = &fake_query;
    api_.cuEventDestroy_v2 = &fake_destroy;
  }
  void TearDown() override {
    completion_.reset();  // before g_fake goes: its destructor gives events back
    g_fake = nullptr;
  }
  // The GraphCompletion under test, on `api`, ending launches into ended_ at the clock now_.
  GraphCompletion &completion(const CudaApi *api) {
    completion_.emplace(
        api, [this] { ++ended_; }, [this] { return now_.load(); });
    return *completion_;
  }
  GraphCompletion &completion() { return completion(&api_); }
  // The completion under test watching `launches` graph launches on the null stream.
  GraphCompletion &watching(int launches) {
    GraphCompletion &c = completion();
    for (int i = 0; i < launches; ++i) EXPECT_TRUE(c.watch(nullptr));
    return c;
  }
  void finish_all() {
    for (auto &e : fake_.ready) e.second = true;
  }
  // Polls once to see what finished, then again once the grace after it has passed.
  void poll_past_grace(GraphCompletion &c) {
    c.poll();
    now_ += GraphCompletion::kGraceNs;
    c.poll();
  }
  // Polls `wait` - 1 ns from now (the one launch watched has not ended) and at `wait` (it has).
  void expect_ended_after(GraphCompletion &c, uint64_t wait) {
    now_ += wait - 1;
    c.poll();
    EXPECT_EQ(ended_, 0);
    now_ += 1;
    c.poll();
    EXPECT_EQ(ended_, 1);
  }

  FakeDriver fake_;
  CudaApi api_;
  int ended_ = 0;
  std::atomic<uint64_t> now_{1000};  // the waiter thread reads it too
  std::optional<GraphCompletion> completion_;
};

TEST_F(GraphCompletionTest, EndsALaunchOnlyOnceTheGpuIsPastIt) {
  GraphCompletion &c = completion();
  const CUstream stream = reinterpret_cast<CUstream>(0x42);
  ASSERT_TRUE(c.watch(stream));
  EXPECT_EQ(fake_.last_stream, stream);
  EXPECT_EQ(c.pending(), 1u);
  c.poll();
  c.poll();
  EXPECT_EQ(ended_, 0) << "ended while its kernels still run";
  finish_all();
  poll_past_grace(c);
  EXPECT_EQ(ended_, 1);
  EXPECT_EQ(fake_.destroyed, 1);
  EXPECT_EQ(c.pending(), 0u);
  c.poll();
  EXPECT_EQ(ended_, 1) << "ended twice";
  EXPECT_EQ(c.stats().finished, 1u);
}

// CUPTI finishes a graph's kernel records after the GPU ran them: kernel activity stays on for
// kGraceNs after the event says the GPU is past the launch (on the H100, without it, 7 of 176
// announced launches of a 117-kernel graph got ends tens of ms late).
TEST_F(GraphCompletionTest, ActivityStaysOnForTheGraceAfterTheGpuIsPastIt) {
  GraphCompletion &c = watching(1);
  finish_all();
  c.poll();
  EXPECT_EQ(ended_, 0) << "ended as soon as the event completed: records may be unfinished";
  expect_ended_after(c, GraphCompletion::kGraceNs);
  EXPECT_EQ(c.pending(), 0u);
}

// Made-up ends seen (the profiler calls lengthen_grace): the grace grows four times a step, to
// its cap, and the next launch waits the longer grace.
TEST_F(GraphCompletionTest, ALengthenedGraceHoldsTheNextLaunchLonger) {
  GraphCompletion &c = completion();
  EXPECT_EQ(c.grace_ns(), GraphCompletion::kGraceNs);
  EXPECT_EQ(c.lengthen_grace(), 4 * GraphCompletion::kGraceNs);
  ASSERT_TRUE(c.watch(nullptr));
  finish_all();
  c.poll();
  expect_ended_after(c, 4 * GraphCompletion::kGraceNs);
  for (int i = 0; i < 10; ++i) c.lengthen_grace();
  EXPECT_EQ(c.grace_ns(), GraphCompletion::kMaxGraceNs);
}

// The watcher's tick hands over the count of made-up ends so far: only a new one lengthens it.
TEST_F(GraphCompletionTest, OnlyNewMadeUpEndsLengthenTheGrace) {
  GraphCompletion &c = completion();
  c.on_made_up_ends(0);
  EXPECT_EQ(c.grace_ns(), GraphCompletion::kGraceNs);
  c.on_made_up_ends(3);
  EXPECT_EQ(c.grace_ns(), 4 * GraphCompletion::kGraceNs);
  c.on_made_up_ends(3);
  EXPECT_EQ(c.grace_ns(), 4 * GraphCompletion::kGraceNs) << "no new one";
  c.on_made_up_ends(5);
  EXPECT_EQ(c.grace_ns(), 16 * GraphCompletion::kGraceNs);
}

TEST_F(GraphCompletionTest, LaunchesEndInAnyOrder) {
  GraphCompletion &c = watching(2);
  fake_.ready.rbegin()->second = true;  // the second one first (another stream)
  poll_past_grace(c);
  EXPECT_EQ(ended_, 1);
  EXPECT_EQ(c.pending(), 1u);
  finish_all();
  poll_past_grace(c);
  EXPECT_EQ(ended_, 2);
}

TEST_F(GraphCompletionTest, AFailedCreateOrRecordIsNotWatched) {
  GraphCompletion &c = completion();
  fake_.create_result = CUDA_ERROR_OUT_OF_MEMORY;
  EXPECT_FALSE(c.watch(nullptr));
  fake_.create_result = CUDA_SUCCESS;
  fake_.record_result = CUDA_ERROR_INVALID_HANDLE;
  EXPECT_FALSE(c.watch(nullptr));
  EXPECT_EQ(fake_.destroyed, 1) << "the event of the failed record is given back";
  EXPECT_EQ(c.pending(), 0u);
  EXPECT_EQ(c.stats().failed, 2u);
  EXPECT_EQ(ended_, 0) << "the caller ends what was not watched";
}

TEST_F(GraphCompletionTest, AFailedQueryEndsTheLaunch) {
  GraphCompletion &c = watching(1);
  fake_.query_error = CUDA_ERROR_LAUNCH_FAILED;
  c.poll();
  EXPECT_EQ(ended_, 1);
  EXPECT_EQ(c.stats().failed, 1u);
}

TEST_F(GraphCompletionTest, ALaunchStillRunningAtTheTimeoutEnds) {
  GraphCompletion &c = watching(1);
  expect_ended_after(c, GraphCompletion::kTimeoutNs);
  EXPECT_EQ(c.stats().timed_out, 1u);
}

TEST_F(GraphCompletionTest, ShutdownEndsWhatIsWatchedAndWatchesNoMore) {
  GraphCompletion &c = watching(2);
  c.shutdown();
  EXPECT_EQ(ended_, 2);
  EXPECT_EQ(fake_.destroyed, 2) << "their events are given back";
  EXPECT_FALSE(c.watch(nullptr));
  EXPECT_EQ(ended_, 2);
}

TEST_F(GraphCompletionTest, WithoutTheDriverNothingIsWatched) {
  GraphCompletion &c = completion(nullptr);
  EXPECT_FALSE(c.watch(nullptr));
}

TEST_F(GraphCompletionTest, TheWaiterThreadEndsFinishedLaunches) {
  GraphCompletion &c = completion();
  c.start_thread();
  ASSERT_TRUE(c.watch(nullptr));
  finish_all();
  for (int i = 0; i < 5000 && c.pending() != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    now_ += 1000000;  // the fake clock runs along, past the grace
  }
  EXPECT_EQ(c.pending(), 0u);
  c.shutdown();
  EXPECT_EQ(ended_, 1);
}

}  // namespace
}  // namespace parcagpu
