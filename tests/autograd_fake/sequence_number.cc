// The fake libtorch_cpu.so's node counter (tests/autograd_fake/README.md): PyTorch's
// at::sequence_number (aten/src/ATen/SequenceNumber.cpp) as it behaves, written here: a
// per-thread counter, get_and_increment returns the old value. In a file of its own so that the
// Node constructors call it for real (the uretprobe's site).
#include <cstdint>

namespace at {
namespace sequence_number {

namespace {
thread_local uint64_t sequence_nr_ = 0;
}  // namespace

__attribute__((noinline)) uint64_t get_and_increment() { return sequence_nr_++; }

}  // namespace sequence_number
}  // namespace at
