// What the agent-faithful consumer received, per process, and its JSON summary. Fed with the
// ring-buffer events of agent_consumer.bpf.c and its per-pid counters; no BPF here, unit-tested
// in agent_summary_test.cc.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "agent_consumer.h"
#include "tools/trace/timestamp_check.h"

namespace parcagpu::agent {

// Reads `size` bytes at `addr` in process `pid` into *bytes (the agent reads cubins through
// /proc/PID/mem); false when they cannot all be read.
using MemoryReader =
    std::function<bool(uint32_t pid, uint64_t addr, uint64_t size, std::vector<uint8_t> *bytes)>;
// When process `pid` started, on CLOCK_MONOTONIC (trace::process_start_monotonic_ns); 0 unknown.
using ProcessStartReader = std::function<uint64_t(uint32_t pid)>;

// Whether `bytes` is an ELF image whose section headers can be read: the agent parses each cubin
// it reads as an ELF file and drops those it cannot parse.
bool is_elf_image(const std::vector<uint8_t> &bytes);

// A PC record's fields, decoded from the bytes the agent copies.
struct PcRecord {
  uint64_t size, cubin_crc, pc_offset, function_name, stall_reason_count, stall_reason;
  uint32_t function_index, correlation_id;
};
PcRecord decode_pc_record(const uint8_t record[AC_PC_RECORD_SIZE]);

struct ProcessView {
  // Launches and kernels.
  std::unordered_map<uint32_t, int32_t> announced;  // correlation ID -> signed cbid
  uint64_t correlations = 0, correlation_repeats = 0;
  std::map<int32_t, uint64_t> correlations_by_cbid;
  std::unordered_map<uint32_t, uint64_t> kernels_by_correlation;
  uint64_t kernel_records = 0;
  uint64_t kernel_names_cut = 0;  // 255 bytes read: the name was longer (or exactly that)
  // start 0, end before start, or longer than a minute: what upstream users saw after ~25M
  // records of sustained graph replay (parcagpu#23).
  uint64_t invalid_timestamps = 0;
  // Kernel records whose times no GPU could give, by reason (tools/trace/timestamp_check.h: the
  // check parcagpu-trace makes), and what the check needs: when each launch was announced, when
  // the process started.
  std::array<uint64_t, static_cast<size_t>(trace::Impossible::kCount)> impossible{};
  std::unordered_map<uint32_t, uint64_t> announced_ns;  // correlation ID -> cuda_correlation's time
  uint64_t process_start_ns = 0;
  uint64_t impossible_total() const;
  // Metadata.
  struct GpuConfig {
    uint32_t device_id, sampling_factor, clock_khz, sm_count;
  };
  std::vector<GpuConfig> gpu_configs;    // first firing per device only (the agent's dedup)
  uint64_t gpu_config_overwrites = 0;    // ... one replacing another of a different factor/clock
  uint64_t stall_maps = 0;               // stall_reason_map firings read in full
  std::vector<std::string> stall_names;  // of the last one: index -> name ("" = none)
  uint32_t stall_count = 0;
  struct Cubin {
    uint64_t size = 0;
    bool readable = false;  // /proc/PID/mem read of all `size` bytes succeeded
    bool elf = false;       // ... and they parse as an ELF image
  };
  std::map<uint64_t, Cubin> cubins;  // by CRC
  // PC samples.
  uint64_t pc_records = 0, pc_stall_samples = 0;
  std::map<uint32_t, uint64_t> pc_samples_by_stall_index;
  std::map<uint64_t, uint64_t> pc_records_by_crc;
  std::set<std::string> pc_function_names;
  uint64_t pc_function_names_cut = 0;  // records whose name was read to its 127-byte limit
  uint64_t pc_correlation_zero = 0;
  std::vector<uint32_t> pc_correlation_ids;  // non-zero, checked against `announced` at the end
  // Errors.
  struct Error {
    int32_t code;
    std::string component, message;
  };
  std::vector<Error> errors;  // the first 100
  uint64_t error_count = 0;
  // Counters from BPF (enum ac_stat).
  uint64_t stats[AC_STAT_MAX] = {};

  uint64_t read_failures() const;
};

class Summary {
 public:
  explicit Summary(MemoryReader read_memory, ProcessStartReader process_start = nullptr)
      : read_memory_(std::move(read_memory)), process_start_(std::move(process_start)) {}

  // One ring-buffer event. Returns false for an event it does not understand (counted).
  bool on_event(const void *data, size_t size);
  void add_stat(uint32_t pid, uint32_t stat, uint64_t value);

  void set_attached(std::vector<std::string> attached, std::vector<std::string> ignored,
                    std::map<std::string, int> sites);

  // The agent ring's size (agent_consumer.h), said in the JSON.
  void set_ring_bytes(uint64_t bytes) { ring_bytes_ = bytes; }

  const std::map<uint32_t, ProcessView> &processes() const { return pids_; }
  std::string json() const;
  // What the consumer says at the end about impossible kernel records ("" when there were none):
  // "N impossible kernel records of M (reason n, ...)".
  std::string impossible_line() const;

 private:
  ProcessView &process(uint32_t pid);
  // The event as its type's struct, handed to add; false (counted) when it is too short for one.
  template <typename Event, typename Add>
  bool take(const void *data, size_t size, Add add) {
    if (size < sizeof(Event)) return ++bad_events_, false;
    add(*static_cast<const Event *>(data));
    return true;
  }
  void add_cubin(ProcessView &v, uint32_t pid, const ac_cubin_event &e) const;

  MemoryReader read_memory_;
  ProcessStartReader process_start_;
  trace::TimestampCheck times_;
  std::map<uint32_t, ProcessView> pids_;
  uint64_t bad_events_ = 0;
  uint64_t ring_bytes_ = AC_AGENT_RING_BYTES;
  std::vector<std::string> attached_, ignored_;
  std::map<std::string, int> sites_;
};

}  // namespace parcagpu::agent
