#include "activity/activity_buffers.h"

#include <sys/mman.h>

#include <cstdlib>

#include "parcagpu/abi.h"
#include "parcagpu/record_field.h"

namespace parcagpu {
namespace {

constexpr size_t kRecordAlign = 8;  // CUPTI requires 8-byte aligned buffers

}  // namespace

BufferPool::~BufferPool() {
  for (uint8_t *b : free_) munmap(b, bytes_);
}

uint8_t *BufferPool::acquire() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!free_.empty()) {
    uint8_t *b = free_.back();
    free_.pop_back();
    return b;
  }
  if (alive_ >= max_) return nullptr;
  // Page-aligned, so 8-byte aligned as CUPTI requires (kRecordAlign).
  void *p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  ++alive_;
  return static_cast<uint8_t *>(p);
}

void BufferPool::release(uint8_t *buf) {
  if (!buf) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (free_.size() < kKeepIdle) {
    free_.push_back(buf);
    return;
  }
  munmap(buf, bytes_);
  --alive_;
}

size_t BufferPool::idle() const {
  std::lock_guard<std::mutex> lock(mu_);
  return free_.size();
}

void KernelRecord::set_correlation_id(uint32_t id) {
  correlation_id = id;
  std::memcpy(reinterpret_cast<uint8_t *>(record) + PARCAGPU_KREC_OFF_CORRELATION_ID, &id,
              sizeof id);
}

void KernelRecord::set_name(const char *n) {
  name = n;
  std::memcpy(reinterpret_cast<uint8_t *>(record) + PARCAGPU_KREC_OFF_NAME, &n, sizeof n);
}

BufferWalk walk_kernel_records(const CuptiApi &cupti, uint8_t *buffer, size_t valid_size,
                               KernelRecordHandler handler, void *context) {
  BufferWalk walk;
  CUpti_Activity *record = nullptr;
  CUptiResult next = CUPTI_ERROR_MAX_LIMIT_REACHED;
  while (valid_size > 0 &&
         (next = cupti.cuptiActivityGetNextRecord(buffer, valid_size, &record)) == CUPTI_SUCCESS) {
    if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL &&
        record->kind != CUPTI_ACTIVITY_KIND_KERNEL)
      continue;
    ++walk.kernel_records;
    const auto *r = reinterpret_cast<const uint8_t *>(record);
    KernelRecord k{record,
                   record_field<const char *>(r, PARCAGPU_KREC_OFF_NAME),
                   record_field<uint32_t>(r, PARCAGPU_KREC_OFF_CORRELATION_ID),
                   record_field<uint32_t>(r, PARCAGPU_KREC_OFF_GRAPH_ID),
                   record_field<uint64_t>(r, PARCAGPU_KREC_OFF_START),
                   record_field<uint64_t>(r, PARCAGPU_KREC_OFF_END),
                   record_field<uint32_t>(r, PARCAGPU_KREC_OFF_DEVICE_ID),
                   record_field<uint32_t>(r, PARCAGPU_KREC_OFF_STREAM_ID),
                   record_field<uint64_t>(r, PARCAGPU_KREC_OFF_GRAPH_NODE_ID)};
    handler(context, k);
  }
  // CUPTI_ERROR_MAX_LIMIT_REACHED is the end of the buffer; anything else leaves the rest of it
  // unread.
  walk.cut_short = valid_size > 0 && next != CUPTI_ERROR_MAX_LIMIT_REACHED;
  walk.error = walk.cut_short ? next : CUPTI_SUCCESS;
  return walk;
}

}  // namespace parcagpu
