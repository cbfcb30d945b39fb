// A base for the trace's classes that own kernel or library handles (perf and BPF file
// descriptors, BPF objects and links, libdwfl sessions): a copy would release them twice, so none
// is allowed.
#pragma once

namespace parcagpu::trace {

class OwnsHandles {
 public:
  OwnsHandles(const OwnsHandles &) = delete;
  OwnsHandles &operator=(const OwnsHandles &) = delete;

 protected:
  OwnsHandles() = default;
  ~OwnsHandles() = default;
};

}  // namespace parcagpu::trace
