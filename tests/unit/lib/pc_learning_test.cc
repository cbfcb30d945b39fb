// PcLearning: when kernels count as still first used, when learning resumes at the next launch,
// how long the first episode waits for start-up's module loads; on a fake clock.
#include "pc/pc_learning.h"

#include <gtest/gtest.h>

namespace parcagpu {
namespace {

constexpr uint64_t kMs = 1'000'000, kSec = 1'000'000'000;

PcEpisodeParams params() {
  PcEpisodeParams p;
  p.first_use_quiet_ns = 2 * kSec;
  p.max_learning_ns = 30 * kSec;
  p.max_learning_resumes = 2;
  p.first_enable_quiet_ns = 2 * kSec;
  p.max_first_enable_wait_ns = 30 * kSec;
  return p;
}

TEST(PcLearning, LearningLastsTheQuietAfterTheLastFirstUseAndAtMostItsLongest) {
  PcLearning l(params(), 0);
  EXPECT_FALSE(l.learning(kSec)) << "no first use yet";
  l.on_enabled(kSec, /*first=*/true);  // the first episode's kernels are first used now
  EXPECT_TRUE(l.learning(kSec + 1999 * kMs));
  EXPECT_FALSE(l.learning(kSec + 2 * kSec));
  // First uses every second keep it learning, up to max_learning_ns from its start.
  for (uint64_t t = 2 * kSec; t <= 40 * kSec; t += kSec) l.note_uses(t, 0, true);
  EXPECT_TRUE(l.learning(30 * kSec + kSec - 1));
  EXPECT_FALSE(l.learning(31 * kSec));
}

TEST(PcLearning, AModuleLoadIsAFirstUseOnlyAfterTheFirstEpisodeBegan) {
  PcLearning before(params(), 0);
  before.note_uses(0, 5 * kSec, /*after_first=*/false);
  EXPECT_FALSE(before.learning(5 * kSec + kMs));
  PcLearning after(params(), 0);
  after.note_uses(0, 5 * kSec, /*after_first=*/true);
  EXPECT_TRUE(after.learning(5 * kSec + kMs));
}

TEST(PcLearning, ResumesAreArmedOnlyWithNoEpisodeUnderWayAndAtMostMaxLearningResumes) {
  PcLearning l(params(), 0);
  uint64_t t = kSec;
  EXPECT_FALSE(l.module_loaded(t, /*idle=*/false));
  EXPECT_TRUE(l.learning(t + kMs)) << "an episode under way learns on";
  EXPECT_FALSE(l.resume_due());
  for (int i = 0; i < 2; ++i) {
    t += kSec;
    EXPECT_TRUE(l.module_loaded(t, /*idle=*/true)) << i;
    EXPECT_TRUE(l.resume_due());
    EXPECT_FALSE(l.module_loaded(t, true)) << "one resume at a time";
    EXPECT_TRUE(l.drop_resume());
    EXPECT_FALSE(l.drop_resume());
  }
  EXPECT_FALSE(l.module_loaded(t + kSec, true)) << "max_learning_resumes (2) spent";
  // A context created: a learning period of its own, its resumes counted afresh.
  EXPECT_TRUE(l.learn_again(t + 2 * kSec, true));
  EXPECT_TRUE(l.resume_due());
}

TEST(PcLearning, AnEpisodeEndedForAGraphResumesOnlyWhileLearning) {
  PcLearning l(params(), 0);
  l.on_enabled(kSec, true);
  l.keep_learning();
  EXPECT_TRUE(l.kept_learning());
  EXPECT_TRUE(l.on_disabled(kSec + kMs, /*for_graph=*/true));
  EXPECT_FALSE(l.kept_learning());
  EXPECT_TRUE(l.resume_now(kSec + 2 * kMs));
  EXPECT_TRUE(l.resumed());
  l.on_enabled(kSec + 2 * kMs, false);
  EXPECT_FALSE(l.resume_due()) << "taken by the episode enabled";
  EXPECT_FALSE(l.on_disabled(kSec + 3 * kMs, /*for_graph=*/false)) << "not for a graph";
  EXPECT_FALSE(l.resumed());
  l.on_enabled(5 * kSec, false);
  EXPECT_FALSE(l.on_disabled(5 * kSec, true)) << "quiet for 4 s: learning is over";
}

TEST(PcLearning, TheFirstEnableWaitsForModulesToStopLoadingUntilStartUpIsOver) {
  PcLearning l(params(), 5 * kSec);
  EXPECT_EQ(l.first_enable_ns(), 7 * kSec) << "counted from the start";
  l.note_uses(0, 6 * kSec, false);
  EXPECT_EQ(l.first_enable_ns(), 8 * kSec);
  l.note_uses(0, 40 * kSec, false);
  EXPECT_EQ(l.first_enable_ns(), 35 * kSec) << "max_first_enable_wait_ns";
  EXPECT_TRUE(l.end_start_up());
  EXPECT_EQ(l.first_enable_ns(), 0u);
  EXPECT_FALSE(l.end_start_up());
}

}  // namespace
}  // namespace parcagpu
