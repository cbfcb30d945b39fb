// The state of the launch callbacks' role (LaunchRole, launch_role.h): how its launch cbids are
// enabled now (the phase) and how many times they have all been enabled (the epoch, which the gate
// in launch_gate.h judges a thread's nesting against). Pure value type, no CUPTI; unit-tested in
// tests/unit/lib/launch_gate_test.cc.
//
// Why packed. Both live in one 64-bit word, one std::atomic (AtomicRoleState below, as
// LaunchRole::state), so that a launch reads its role's epoch and phase together with one load,
// never a phase of one epoch with the epoch of another; and so that a phase change is one
// compare-and-swap on both (an admitted launch that finds another state than the one it was
// admitted in backs off). Layout: epoch << 8 | phase. The names compile to the same shifts,
// masks and atomic operations as the bare word did: this is on the application's launch path.
#pragma once

#include <atomic>
#include <cstdint>

namespace parcagpu {

// How a role's launch cbids are enabled now.
enum class RolePhase : uint8_t {
  kOff,         // disabled
  kContinuous,  // enabled while a consumer listens (or PC sampling needs launches)
  kDraining,    // nobody wants launches: off once the announced launches in flight ended
};

class RoleState {
 public:
  constexpr RoleState() = default;
  constexpr RoleState(uint64_t epoch, RolePhase phase)
      : bits_(epoch << kPhaseBits | static_cast<uint8_t>(phase)) {}

  constexpr uint64_t epoch() const { return bits_ >> kPhaseBits; }
  constexpr RolePhase phase() const { return static_cast<RolePhase>(bits_ & kPhaseMask); }
  // The same epoch in another phase.
  constexpr RoleState with(RolePhase phase) const { return {epoch(), phase}; }
  // The next epoch (the role's cbids were all enabled again), in `phase`.
  constexpr RoleState next_epoch(RolePhase phase) const { return {epoch() + 1, phase}; }

  friend constexpr bool operator==(RoleState, RoleState) = default;

 private:
  friend class AtomicRoleState;
  static constexpr unsigned kPhaseBits = 8;
  static constexpr uint64_t kPhaseMask = (uint64_t{1} << kPhaseBits) - 1;
  uint64_t bits_ = 0;  // epoch << kPhaseBits | phase
};

// LaunchRole::state: a RoleState in one std::atomic<uint64_t>. Each operation is the one
// std::atomic operation on the packed word, with the memory order given (seq_cst unless told), so
// the launch path compiles as it did on the bare word (a std::atomic<RoleState> made
// compare-and-swap go through memory).
class AtomicRoleState {
 public:
  RoleState load(std::memory_order order = std::memory_order_seq_cst) const {
    return from_bits(bits_.load(order));
  }
  void store(RoleState s, std::memory_order order = std::memory_order_seq_cst) {
    bits_.store(s.bits_, order);
  }
  RoleState exchange(RoleState s) { return from_bits(bits_.exchange(s.bits_)); }
  // As std::atomic's: on failure `expected` becomes the state found.
  bool compare_exchange_strong(RoleState &expected, RoleState desired) {
    uint64_t bits = expected.bits_;
    const bool done = bits_.compare_exchange_strong(bits, desired.bits_);
    expected.bits_ = bits;
    return done;
  }

 private:
  static RoleState from_bits(uint64_t bits) {
    RoleState s;
    s.bits_ = bits;
    return s;
  }
  static_assert(std::atomic<uint64_t>::is_always_lock_free);
  std::atomic<uint64_t> bits_{0};
};

}  // namespace parcagpu
