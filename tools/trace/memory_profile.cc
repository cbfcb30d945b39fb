#include "memory_profile.h"

#include <cinttypes>

#include "parcagpu/abi.h"

namespace parcagpu::trace {

const char *memory_frame_name(uint32_t kind, uint8_t copy_kind) {
  if (kind == PARCAGPU_KIND_MEMSET) return "[memset]";
  // CUpti_ActivityMemcpyKind.
  switch (copy_kind) {
    case 1: return "[memcpy HtoD]";
    case 2: return "[memcpy DtoH]";
    case 3: return "[memcpy HtoA]";
    case 4: return "[memcpy AtoH]";
    case 5: return "[memcpy AtoA]";
    case 6: return "[memcpy AtoD]";
    case 7: return "[memcpy DtoA]";
    case 8: return "[memcpy DtoD]";
    case 9: return "[memcpy HtoH]";
    case 10: return "[memcpy PtoP]";
    default: return "[memcpy]";
  }
}

void MemoryProfile::add(uint32_t stack, const char *what, const MemoryCopy &copy) {
  for (Cell *c : {&cells_[{stack, what}], &total_}) {
    ++c->count;
    c->bytes += copy.bytes;
    c->gpu_ns += copy.gpu_ns;
    c->call_ns += copy.cpu_blocked_ns;
    if (copy.waits) {
      ++c->sync_count;
      c->sync_gpu_ns += copy.gpu_ns;
      c->cpu_blocked_ns += copy.cpu_blocked_ns;
    }
  }
}

void MemoryProfile::add_json(Json &summary) const {
  Json rows = Json::array();
  for (const auto &[key, c] : cells_) {
    Json frames = Json::array();
    for (const std::string &f : frames_(key.first)) frames.push_back(f);
    rows.push_back(Json{{"stack_id", key.first},
                        {"what", key.second},
                        {"count", c.count},
                        {"bytes", c.bytes},
                        {"gpu_ns", c.gpu_ns},
                        {"sync_count", c.sync_count},
                        {"sync_gpu_ns", c.sync_gpu_ns},
                        {"sync_blocked_ns", c.cpu_blocked_ns},
                        {"call_ns", c.call_ns},
                        {"frames", frames}});
  }
  summary["memory"] = Json{{"count", total_.count},
                           {"bytes", total_.bytes},
                           {"gpu_ns", total_.gpu_ns},
                           {"sync_count", total_.sync_count},
                           {"sync_gpu_ns", total_.sync_gpu_ns},
                           {"sync_blocked_ns", total_.cpu_blocked_ns},
                           {"call_ns", total_.call_ns},
                           {"by_stack", rows}};
}

void MemoryProfile::print(FILE *out) const {
  if (total_.count == 0) return;
  std::fprintf(out,
               "\nCopies and fills: %" PRIu64 " (%" PRIu64 " bytes, %.3f ms GPU); CPU blocked in "
               "synchronous copies %.3f ms (%" PRIu64 " calls that wait, %.3f ms of GPU time; all "
               "copy and fill calls %.3f ms)\n",
               total_.count, total_.bytes, total_.gpu_ns / 1e6, total_.cpu_blocked_ns / 1e6,
               total_.sync_count, total_.sync_gpu_ns / 1e6, total_.call_ns / 1e6);
  for (const auto &[key, c] : cells_) {
    const std::vector<std::string> frames = frames_(key.first);
    std::fprintf(out, "  %-16s %8" PRIu64 " x %12" PRIu64 " bytes %10.3f ms GPU  blocked %.3f ms  at %s\n",
                 key.second.c_str(), c.count, c.bytes, c.gpu_ns / 1e6, c.cpu_blocked_ns / 1e6,
                 frames.empty() ? "?" : frames.front().c_str());
  }
}

}  // namespace parcagpu::trace
