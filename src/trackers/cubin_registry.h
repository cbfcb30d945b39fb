// The cubins of the loaded modules (CUPTI's MODULE_LOADED / MODULE_UNLOAD_STARTING resource
// callbacks), published as cubin_loaded(crc, bytes, size) / cubin_unloaded(crc).
//
// The CRC is cuptiGetCubinCrc's, the one CUPTI puts in every PC sample of that cubin
// (cubinCrc), so a consumer finds the cubin of a sample by it. A consumer reads the bytes later
// from /proc/PID/mem, so they must stay readable at the published address while the module is
// loaded. On an H100 with CUDA 13 the callback's pointer was not inside any loaded object
// (docs/pc-sampling.md): the driver's own buffer, which nothing promises to keep. So the bytes
// are copied, except when the pointer lies inside a loaded ELF object (an embedded, uncompressed
// fatbin), which stays mapped while its module is loaded.
//
// Known from process start (the resource callbacks are enabled whatever the consumers), so a
// consumer that attaches late gets every loaded cubin again (refire()).
//
// A consumer reads the bytes after the firing, from its own thread; a module unloaded right
// after loading (short programs, JIT compilers) would leave it reading freed memory. So copies
// of unloaded cubins are kept kRetiredGraceNs more, within kRetiredMaxBytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "base/cupti_api.h"
#include "base/usdt.h"

namespace parcagpu {

struct CubinStats {
  uint64_t loaded = 0;        // MODULE_LOADED callbacks with a cubin
  uint64_t unloaded = 0;      // MODULE_UNLOAD_STARTING callbacks matched to a loaded cubin
  uint64_t copied = 0;        // cubins whose bytes we copied (not inside a loaded object)
  uint64_t copied_bytes = 0;  // bytes held now
  uint64_t live = 0;          // distinct CRCs loaded now
  uint64_t no_crc = 0;        // cuptiGetCubinCrc missing or failed: not published
};

class CubinRegistry {
 public:
  // loaded: where cubin_loaded goes.
  explicit CubinRegistry(const CuptiApi &cupti,
                         usdt::cubin_loaded_probe loaded = usdt::probe::cubin_loaded)
      : cupti_(cupti), loaded_(loaded) {}

  void on_module_loaded(const void *cubin, size_t size);
  void on_module_unload(const void *cubin, size_t size);
  // Fires cubin_loaded for every loaded cubin (a consumer attached).
  void refire();
  CubinStats stats() const;

 private:
  struct Entry {
    uint64_t crc;
    const void *source;  // the callback's pointer (to match the unload)
    size_t size;
    const char *published;  // what consumers read: `copy` or `source`
    std::unique_ptr<char[]> copy;
    uint32_t refs;  // modules loaded with this CRC
  };
  bool crc_of(const void *cubin, size_t size, uint64_t *crc);
  void free_retired(uint64_t now_ns);  // under mu_

  static constexpr uint64_t kRetiredGraceNs = 10'000'000'000;
  static constexpr uint64_t kRetiredMaxBytes = 64ull << 20;
  struct Retired {
    std::unique_ptr<char[]> copy;
    size_t size;
    uint64_t since_ns;
  };
  std::vector<Retired> retired_;
  uint64_t retired_bytes_ = 0;

  const CuptiApi &cupti_;
  const usdt::cubin_loaded_probe loaded_;
  mutable std::mutex mu_;
  std::vector<Entry> entries_;
  CubinStats stats_;
};

}  // namespace parcagpu
