#include "pc/pc_learning.h"

#include <algorithm>

namespace parcagpu {

bool PcLearning::learning(uint64_t now_ns) const {
  // (A first use noted by another thread may carry a time a little after now_ns.)
  const auto since = [now_ns](uint64_t t) { return now_ns > t ? now_ns - t : 0; };
  return last_first_use_ns_ != 0 && since(last_first_use_ns_) < p_.first_use_quiet_ns &&
         since(learning_since_ns_) < p_.max_learning_ns;
}

void PcLearning::note_uses(uint64_t last_first_use_ns, uint64_t last_module_load_ns,
                           bool after_first) {
  if (last_first_use_ns > last_first_use_ns_) last_first_use_ns_ = last_first_use_ns;
  if (last_module_load_ns > last_module_load_ns_) last_module_load_ns_ = last_module_load_ns;
  // A module loaded is a kernel first used (module_loaded), whichever thread saw it.
  if (after_first && last_module_load_ns_ > last_first_use_ns_)
    last_first_use_ns_ = last_module_load_ns_;
}

uint64_t PcLearning::first_enable_ns() const {
  if (start_up_over_) return 0;
  // The first launches load the first modules (inside their calls, after this decision): the
  // quiet is counted from the scheduler's start as from a module loaded then.
  return std::min(std::max(last_module_load_ns_, began_ns_) + p_.first_enable_quiet_ns,
                  began_ns_ + p_.max_first_enable_wait_ns);
}

bool PcLearning::end_start_up() {
  if (start_up_over_) return false;
  start_up_over_ = true;
  return true;
}

bool PcLearning::module_loaded(uint64_t now_ns, bool idle) {
  // Kernels are first used now: a learning period goes on, or a new one begins (its length
  // counted from here: a program that loads a module now and then starts one each time).
  if (!learning(now_ns)) learning_since_ns_ = now_ns;
  last_first_use_ns_ = std::max(last_first_use_ns_, now_ns);
  if (!idle || resume_ || resumes_ >= p_.max_learning_resumes) return false;
  ++resumes_;
  resume_ = true;
  return true;
}

bool PcLearning::learn_again(uint64_t now_ns, bool idle) {
  learning_since_ns_ = now_ns;
  last_first_use_ns_ = std::max(last_first_use_ns_, now_ns);
  resumes_ = 0;
  if (!idle) return false;  // the episode under way stays enabled while learning
  resume_ = true;
  return true;
}

bool PcLearning::drop_resume() {
  if (!resume_) return false;
  resume_ = false;
  return true;
}

void PcLearning::on_enabled(uint64_t now_ns, bool first) {
  resume_ = false;
  if (!resumed_) learning_since_ns_ = now_ns;
  // The process's first episode: its kernels are being launched for the first time now (their
  // activity records, which tell which are new, come later).
  if (first) last_first_use_ns_ = std::max(last_first_use_ns_, now_ns);
}

bool PcLearning::on_disabled(uint64_t now_ns, bool for_graph) {
  learned_ = false;
  resumed_ = false;
  // Ended before a graph step while kernels are still first used: the next launch resumes
  // learning.
  const bool resume = for_graph && learning(now_ns) && resumes_ < p_.max_learning_resumes;
  if (resume) {
    ++resumes_;
    resume_ = true;
  }
  return resume;
}

}  // namespace parcagpu
