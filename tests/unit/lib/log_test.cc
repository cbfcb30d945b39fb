#include "base/log.h"

#include <gtest/gtest.h>

#include <algorithm>

#include <thread>
#include <vector>

namespace parcagpu {
namespace {

TEST(RepeatedErrorTest, FirstOccurrenceReportedRestCounted) {
  static RepeatedError site("test", "flush failed");
  testing::internal::CaptureStderr();
  EXPECT_TRUE(site.report(5, "flush failed: %s", "CUPTI_ERROR_UNKNOWN"));
  for (int i = 0; i < 99; ++i) EXPECT_FALSE(site.report(5, "flush failed: %s", "again"));
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(site.count(), 100u);
  // One line, not a hundred.
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  EXPECT_NE(err.find("test: flush failed: CUPTI_ERROR_UNKNOWN"), std::string::npos) << err;
}

TEST(RepeatedErrorTest, ConcurrentReportsYieldOneLineAndAnExactCount) {
  static RepeatedError site("test", "enable failed");
  testing::internal::CaptureStderr();
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([] {
      for (int i = 0; i < 1000; ++i) site.report(1, "enable failed");
    });
  for (auto &t : threads) t.join();
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(site.count(), 8000u);
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
}

TEST(RepeatedErrorTest, TotalsNameEverySiteThatRepeated) {
  static RepeatedError once("test", "happened once");
  static RepeatedError many("test", "happened often");
  testing::internal::CaptureStderr();
  once.report(1, "x");
  for (int i = 0; i < 7; ++i) many.report(2, "y");
  report_repeated_error_totals();
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("happened often: 7 times in all"), std::string::npos) << err;
  EXPECT_EQ(err.find("happened once:"), std::string::npos) << err;
  int sites = 0;
  for_each_repeated_error([](const RepeatedError &, void *n) { ++*static_cast<int *>(n); },
                          &sites);
  EXPECT_GE(sites, 2);
}

TEST(RepeatedErrorTest, ReportNCountsThingsNotCalls) {
  static RepeatedError site("test", "records dropped", "records");
  testing::internal::CaptureStderr();
  EXPECT_FALSE(site.report_n(0, 4, "nothing"));  // nothing happened: no line, no count
  EXPECT_TRUE(site.report_n(300, 4, "dropped %d records", 300));
  EXPECT_FALSE(site.report_n(200, 4, "dropped %d records", 200));
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(site.count(), 500u);
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
}

TEST(RepeatedErrorTest, ProgressSaysWhatWasCountedSinceTheLastLine) {
  static RepeatedError site("test", "flushes failed");
  testing::internal::CaptureStderr();
  site.report(2, "first");
  for (int i = 0; i < 9; ++i) site.report(2, "again");
  report_repeated_error_progress();
  report_repeated_error_progress();  // nothing new: nothing said
  site.report(2, "again");
  report_repeated_error_progress();
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("flushes failed: 9 more times (10 in all)"), std::string::npos) << err;
  EXPECT_NE(err.find("flushes failed: 1 more times (11 in all)"), std::string::npos) << err;
  // The first report and two progress lines of this site (other tests' sites may add theirs).
  size_t lines = 0;
  for (size_t at = err.find("flushes failed"); at != std::string::npos;
       at = err.find("flushes failed", at + 1))
    ++lines;
  EXPECT_EQ(lines, 2u) << err;  // the first report's text is "first"
  EXPECT_NE(err.find("test: first"), std::string::npos) << err;
}

}  // namespace
}  // namespace parcagpu
