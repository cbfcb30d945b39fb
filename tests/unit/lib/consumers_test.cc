// The consumer watcher on the probes' real semaphores: a test raises and lowers them the way the
// kernel does when a consumer attaches a uprobe with a reference counter (each attach adds one,
// each detach takes it back), and watches what the clients are told, in which order, and when
// the watcher thread runs them.
#include "base/consumers.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <iterator>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "base/usdt.h"
#include "attached_consumer.h"

namespace parcagpu {
namespace {

using namespace std::chrono_literals;

struct Told {
  Consumers now, before;
  int client;
};

// A client that records what it is told, and ticks as often as `tick_every_ns` asks.
class Recorder : public ConsumerWatcher::Client {
 public:
  Recorder(int id, std::vector<Told> *log, std::mutex *mu) : id_(id), log_(log), mu_(mu) {}

  void on_consumers(const Consumers &now, const Consumers &before) override {
    std::lock_guard<std::mutex> lock(*mu_);
    log_->push_back({now, before, id_});
    changed_.notify_all();
  }
  uint64_t on_tick(uint64_t now_ns) override {
    std::lock_guard<std::mutex> lock(*mu_);
    ticks_++;
    changed_.notify_all();
    if (throw_on_tick_ > 0) {
      throw_on_tick_--;
      throw std::runtime_error("a client failed");
    }
    return tick_every_ns_ ? now_ns + tick_every_ns_ : ConsumerWatcher::Client::on_tick(now_ns);
  }
  // Waits until `done()` holds (under the lock), at most `limit`.
  template <typename Pred>
  bool wait_for(Pred done, std::chrono::milliseconds limit = 2s) {
    std::unique_lock<std::mutex> lock(*mu_);
    return changed_.wait_for(lock, limit, done);
  }
  int ticks() {
    std::lock_guard<std::mutex> lock(*mu_);
    return ticks_;
  }
  void tick_every(uint64_t ns) {
    std::lock_guard<std::mutex> lock(*mu_);
    tick_every_ns_ = ns;
  }

  uint64_t tick_every_ns_ = 0;
  int throw_on_tick_ = 0;
  int ticks_ = 0;

 private:
  const int id_;
  std::vector<Told> *log_;
  std::mutex *mu_;
  std::condition_variable changed_;
};

struct WatcherTest : ::testing::Test {
  std::mutex mu;
  std::vector<Told> log;
  Recorder first{1, &log, &mu}, second{2, &log, &mu};
  size_t told() {
    std::lock_guard<std::mutex> lock(mu);
    return log.size();
  }
};

TEST_F(WatcherTest, NobodyListeningIsNotNews) {
  ConsumerWatcher w(10'000);
  w.add(&first);
  w.poll_now();
  EXPECT_EQ(told(), 0u);
  EXPECT_EQ(w.last(), Consumers{});
}

TEST_F(WatcherTest, AnAttachIsToldToEveryClientInTheOrderAdded) {
  ConsumerWatcher w(10'000);
  w.add(&first);
  w.add(&second);
  Attached consumer(parcagpu_cuda_correlation_semaphore);
  w.poll_now();
  ASSERT_EQ(told(), 2u);
  EXPECT_EQ(log[0].client, 1);
  EXPECT_EQ(log[1].client, 2);
  for (const Told &t : log) {
    EXPECT_EQ(t.now.cuda_correlation, 1u);
    EXPECT_TRUE(t.now.wants_launches());
    EXPECT_EQ(t.before, Consumers{});
  }
  EXPECT_EQ(w.last().cuda_correlation, 1u);
}

TEST_F(WatcherTest, TheSameConsumersAreToldOnceThenTheDetach) {
  ConsumerWatcher w(10'000);
  w.add(&first);
  {
    Attached consumer(parcagpu_kernel_executed_semaphore);
    w.poll_now();
    w.poll_now();
    EXPECT_EQ(told(), 1u) << "an unchanged snapshot is not told again";
  }
  w.poll_now();
  ASSERT_EQ(told(), 2u);
  EXPECT_EQ(log[1].now, Consumers{});
  EXPECT_EQ(log[1].before.kernel_executed, 1u);
  EXPECT_FALSE(log[1].now.wants_kernels());
}

TEST(Consumers, EachSemaphoreIsReadIntoItsOwnField) {
  // Every probe of the one list (parcagpu/probe_list.h), its semaphore raised i + 1 times: a
  // semaphore read into another's field shows as another count.
  struct Probe {
    unsigned short *semaphore;
    uint16_t Consumers::*field;
  };
#define PARCAGPU_TEST_PROBE(name, params, args, nargs, sizes) \
  {&parcagpu_##name##_semaphore, &Consumers::name},
  const Probe probes[] = {PARCAGPU_PROBE_LIST(PARCAGPU_TEST_PROBE)};
#undef PARCAGPU_TEST_PROBE
  std::vector<std::unique_ptr<Attached>> attached;
  for (size_t i = 0; i < std::size(probes); ++i)
    for (size_t n = 0; n <= i; ++n)
      attached.push_back(std::make_unique<Attached>(*probes[i].semaphore));
  const Consumers c = Consumers::read();
  for (size_t i = 0; i < std::size(probes); ++i) EXPECT_EQ(c.*probes[i].field, i + 1) << i;
  attached.clear();
  EXPECT_EQ(Consumers::read(), Consumers{});
}

TEST(Consumers, KernelsAreWantedByEitherKernelProbe) {
  Consumers c;
  EXPECT_FALSE(c.wants_kernels());
  EXPECT_FALSE(c.wants_launches());
  c.activity_batch = 1;
  EXPECT_TRUE(c.wants_kernels());
  c = Consumers{};
  c.kernel_executed = 2;
  EXPECT_TRUE(c.wants_kernels());
  EXPECT_FALSE(c.wants_launches());
  c = Consumers{};
  c.pc_sample_batch = c.stall_reason_map = c.cubin_loaded = 1;
  EXPECT_FALSE(c.wants_kernels());
}

// The thread polls on its own: an attach long after the start is told within an interval.
TEST_F(WatcherTest, TheThreadNoticesALateAttach) {
  ConsumerWatcher w(1);
  w.add(&first);
  ASSERT_TRUE(w.start_thread());
  std::this_thread::sleep_for(5ms);
  EXPECT_EQ(told(), 0u);
  Attached consumer(parcagpu_pc_sample_batch_semaphore);
  EXPECT_TRUE(first.wait_for([&] { return !log.empty(); }));
  w.stop();
  ASSERT_FALSE(log.empty());
  EXPECT_EQ(log[0].now.pc_sample_batch, 1u);
}

// wake() runs a cycle now, not at the next interval (10 s here). A wake that finds the watcher
// busy is dropped by design (never blocks), so the test wakes until it is heard.
TEST_F(WatcherTest, AWakeRunsACycleBeforeTheInterval) {
  ConsumerWatcher w(10'000);
  w.add(&first);
  ASSERT_TRUE(w.start_thread());
  Attached consumer(parcagpu_activity_batch_semaphore);
  bool heard = false;
  for (int i = 0; i < 200 && !heard; ++i) {
    w.wake();
    heard = first.wait_for([&] { return !log.empty(); }, 10ms);
  }
  EXPECT_TRUE(heard) << "2 s of wakes, no cycle";
  w.stop();
}

// A client that asks for 1 ms ticks gets them although the interval is 10 s.
TEST_F(WatcherTest, TicksComeWhenAClientAsksForThem) {
  first.tick_every_ns_ = 1'000'000;
  ConsumerWatcher w(10'000);
  w.add(&first);
  w.add(&second);  // wants no ticks: the earliest wish wins
  ASSERT_TRUE(w.start_thread());
  EXPECT_TRUE(first.wait_for([&] { return first.ticks_ >= 5; })) << first.ticks() << " ticks";
  EXPECT_TRUE(second.wait_for([&] { return second.ticks_ >= 5; }))
      << "every client ticks on every cycle: " << second.ticks();
  w.stop();
}

TEST_F(WatcherTest, StopIsPromptAndEndsTheCalls) {
  first.tick_every_ns_ = 1'000'000;
  ConsumerWatcher w(10'000);
  w.add(&first);
  ASSERT_TRUE(w.start_thread());
  ASSERT_TRUE(first.wait_for([&] { return first.ticks_ >= 1; }));
  first.tick_every(0);  // from its next cycle on, the thread sleeps the whole 10 s interval
  std::this_thread::sleep_for(20ms);
  const auto t0 = std::chrono::steady_clock::now();
  w.stop();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s) << "stop waited for the interval";
  const int ticks = first.ticks();
  Attached consumer(parcagpu_gpu_config_semaphore);
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(first.ticks(), ticks);
  EXPECT_EQ(told(), 0u);
}

TEST_F(WatcherTest, AClientThatThrowsIsReportedAndTheWatcherGoesOn) {
  first.tick_every_ns_ = 1'000'000;
  first.throw_on_tick_ = 1;
  ConsumerWatcher w(1);  // after a failed cycle the watcher sleeps one interval
  w.add(&first);
  testing::internal::CaptureStderr();
  ASSERT_TRUE(w.start_thread());
  const bool went_on = first.wait_for([&] { return first.ticks_ >= 3; });
  w.stop();
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_TRUE(went_on) << first.ticks() << " ticks";
  EXPECT_NE(err.find("unexpected exception in the consumer watcher"), std::string::npos) << err;
}

}  // namespace
}  // namespace parcagpu
