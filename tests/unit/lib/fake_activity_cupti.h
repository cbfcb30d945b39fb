// Kernel activity's parts (activity/) on a fake CUPTI table: activity switched on and off (each
// call counted, each result settable), the buffer callbacks as registered, flushes that hand a
// prepared buffer back as CUPTI does, dropped records, CUPTI's clock. Records sit one per
// kSlot-byte slot of a buffer, walked by the fake cuptiActivityGetNextRecord. For the unit
// tests of activity.cc, buffer_router.cc, kernel_delivery.cc, graph_kernel_filter.cc,
// activity_losses.cc and extra_kinds.cc.
#pragma once

#include <cupti.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "activity/activity_buffers.h"
#include "base/cupti_api.h"
#include "base/log.h"
#include "parcagpu/abi.h"
#include "repeated_errors.h"

namespace parcagpu::fake_activity {

constexpr size_t kSlot = 256;  // one record per slot

struct FakeCupti {
  std::vector<CUpti_ActivityKind> enabled, disabled;  // every call, failed ones included
  CUptiResult enable_result = CUPTI_SUCCESS, disable_result = CUPTI_SUCCESS;
  CUptiResult register_result = CUPTI_SUCCESS;
  CUpti_BuffersCallbackRequestFunc requested = nullptr;
  CUpti_BuffersCallbackCompleteFunc completed = nullptr;
  int flushes = 0;
  CUptiResult flush_result = CUPTI_SUCCESS;
  // What the next flush hands back through `completed` (then cleared): records, in slots.
  std::vector<uint8_t> on_flush;
  size_t dropped = 0;  // cuptiActivityGetNumDroppedRecords
  CUptiResult dropped_result = CUPTI_SUCCESS;
  size_t fail_next_at = SIZE_MAX;  // cuptiActivityGetNextRecord fails asked for this record
  uint64_t timestamp = 0;          // CUPTI's clock
};
inline FakeCupti *g_fake = nullptr;

inline CUptiResult CUPTIAPI fake_enable(CUpti_ActivityKind kind) {
  g_fake->enabled.push_back(kind);
  return g_fake->enable_result;
}
inline CUptiResult CUPTIAPI fake_disable(CUpti_ActivityKind kind) {
  g_fake->disabled.push_back(kind);
  return g_fake->disable_result;
}
inline CUptiResult CUPTIAPI fake_register(CUpti_BuffersCallbackRequestFunc requested,
                                          CUpti_BuffersCallbackCompleteFunc completed) {
  g_fake->requested = requested;
  g_fake->completed = completed;
  return g_fake->register_result;
}
// A buffer from the library's callback, holding `records` (slots), handed back as completed.
inline void hand_back(const std::vector<uint8_t> &records) {
  uint8_t *buffer = nullptr;
  size_t size = 0, max_records = 0;
  g_fake->requested(&buffer, &size, &max_records);
  ASSERT_NE(buffer, nullptr);
  ASSERT_GE(size, records.size());
  std::memcpy(buffer, records.data(), records.size());
  g_fake->completed(nullptr, 0, buffer, size, records.size());
}
inline CUptiResult CUPTIAPI fake_flush(uint32_t) {
  ++g_fake->flushes;
  if (!g_fake->on_flush.empty() && g_fake->completed) {
    const std::vector<uint8_t> records = std::move(g_fake->on_flush);
    g_fake->on_flush.clear();
    hand_back(records);
  }
  return g_fake->flush_result;
}
inline CUptiResult CUPTIAPI fake_next(uint8_t *buffer, size_t valid_size, CUpti_Activity **record) {
  const size_t i = *record ? (reinterpret_cast<uint8_t *>(*record) - buffer) / kSlot + 1 : 0;
  if (i == g_fake->fail_next_at) return CUPTI_ERROR_INVALID_KIND;
  if ((i + 1) * kSlot > valid_size) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  *record = reinterpret_cast<CUpti_Activity *>(buffer + i * kSlot);
  return CUPTI_SUCCESS;
}
inline CUptiResult CUPTIAPI fake_dropped(CUcontext, uint32_t, size_t *dropped) {
  *dropped = g_fake->dropped;
  return g_fake->dropped_result;
}
inline CUptiResult CUPTIAPI fake_timestamp(uint64_t *ts) {
  *ts = g_fake->timestamp;
  return CUPTI_SUCCESS;
}
// A graph's or an exec's ID is its handle's value.
inline CUptiResult CUPTIAPI fake_graph_id(CUgraph graph, uint32_t *id) {
  *id = static_cast<uint32_t>(reinterpret_cast<uintptr_t>(graph));
  return CUPTI_SUCCESS;
}
inline CUptiResult CUPTIAPI fake_exec_id(CUgraphExec exec, uint32_t *id) {
  return fake_graph_id(reinterpret_cast<CUgraph>(exec), id);
}

// The table, every activity entry point the fake's.
inline CuptiApi fake_api() {
  CuptiApi api;
  api.cuptiActivityEnable = &fake_enable;
  api.cuptiActivityDisable = &fake_disable;
  api.cuptiActivityRegisterCallbacks = &fake_register;
  api.cuptiActivityFlushAll = &fake_flush;
  api.cuptiActivityGetNextRecord = &fake_next;
  api.cuptiActivityGetNumDroppedRecords = &fake_dropped;
  api.cuptiGetTimestamp = &fake_timestamp;
  api.cuptiGetGraphId = &fake_graph_id;
  api.cuptiGetGraphExecId = &fake_exec_id;
  return api;
}

template <typename T>
void put(uint8_t *r, size_t off, T v) {
  std::memcpy(r + off, &v, sizeof v);
}

// Appends a record slot of `kind` to `records`: its first bytes.
inline uint8_t *add_slot(std::vector<uint8_t> *records, CUpti_ActivityKind kind) {
  records->resize(records->size() + kSlot);
  uint8_t *r = records->data() + records->size() - kSlot;
  put<uint32_t>(r, PARCAGPU_KREC_OFF_KIND, kind);
  return r;
}
// A CONCURRENT_KERNEL record (graph_id 0: an eager launch's).
inline void add_kernel(std::vector<uint8_t> *records, uint32_t correlation_id,
                       uint64_t start = 1000, uint64_t end = 2000, uint32_t graph_id = 0,
                       const char *name = "kernel") {
  uint8_t *r = add_slot(records, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  put<uint64_t>(r, PARCAGPU_KREC_OFF_START, start);
  put<uint64_t>(r, PARCAGPU_KREC_OFF_END, end);
  put<uint32_t>(r, PARCAGPU_KREC_OFF_CORRELATION_ID, correlation_id);
  put<uint32_t>(r, PARCAGPU_KREC_OFF_GRAPH_ID, graph_id);
  put<const char *>(r, PARCAGPU_KREC_OFF_NAME, name);
}
// The correlation ID a kernel record of `records` (slot i) carries now.
inline uint32_t correlation_at(const std::vector<uint8_t> &records, size_t i) {
  uint32_t id = 0;
  std::memcpy(&id, records.data() + i * kSlot + PARCAGPU_KREC_OFF_CORRELATION_ID, sizeof id);
  return id;
}

// How often the RepeatedError site `what` (its summary text) has counted so far.
inline uint64_t repeated_count(const std::string &what) { return repeated_error_count(what); }

// What a RepeatedError site (`what`: its summary text) said and counted while `f` ran. It says
// only its first occurrence in the process (an earlier test may have had it).
struct Said {
  std::string text;  // stderr meanwhile
  uint64_t counted;
  bool first;  // the site had counted nothing before
  // How often `line` (a part of the site's message) stands in text.
  size_t times(const std::string &line) const {
    size_t n = 0;
    for (size_t at = text.find(line); at != std::string::npos; at = text.find(line, at + 1)) ++n;
    return n;
  }
  // Said once if it was the site's first occurrence, else not again.
  size_t expected_times() const { return first ? 1 : 0; }
};
template <typename F>
Said said_while(const std::string &what, F f) {
  const uint64_t before = repeated_count(what);
  testing::internal::CaptureStderr();
  f();
  Said s{testing::internal::GetCapturedStderr(), 0, before == 0};
  s.counted = repeated_count(what) - before;
  return s;
}

class ActivityFixture : public ::testing::Test {
 protected:
  void SetUp() override { g_fake = &fake_; }
  void TearDown() override { g_fake = nullptr; }
  FakeCupti fake_;
  CuptiApi api_ = fake_api();
};

}  // namespace parcagpu::fake_activity
