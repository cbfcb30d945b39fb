// PC sampling turned on and off on one context: Enable and configure (the process's one
// sampling factor), Get Data and Disable with what they hand back published (PcPublisher), and
// at the first failed PC Sampling API call, PC sampling off for the process: every context
// disabled, kernel activity let go, said once. The episode steps (PcEpisodeSteps) and graph
// registration (PcGraphRegistration) call it under PcEpisodes' mutex, with the launch gate held
// exclusively.
#pragma once

#include <cstdint>

#include "pc/pc_forward.h"

namespace parcagpu {

class PcContextSwitch {
 public:
  PcContextSwitch(const CuptiApi &cupti, const Config &config, KernelActivityControl *activity,
                  PcLaunchState &state, PcMetadata &meta, PcPublisher &publisher,
                  PcContexts &contexts, PcStats &stats);

  // Enables and configures PC sampling on c; false if it failed (then PC sampling is off).
  // `kernel_activity`: held on first (an episode: CUPTI would refuse it once PC sampling is
  // enabled, P12), or left as it is (a graph registration, which holds it off).
  bool enable(PcContext &c, bool kernel_activity = true);
  // After c's Disable: its flags and the process's any_enabled set; true if another context is
  // still enabled.
  bool note_disabled(PcContext &c);
  // What Disable handed back published; a failed Disable turns PC sampling off (fail).
  void publish_disabled(PcContext &c, const PcResult &disabled);
  // PC sampling disabled on c outside an episode's course (a graph registration), its GPU kept.
  void disable_quietly(PcContext &c);
  // Get Data on c, published; a failure turns PC sampling off.
  void drain(PcContext &c);
  // A PC Sampling API call failed: PC sampling off for the process, said once.
  void fail(const PcResult &failed);

 private:
  bool configure(PcContext &c);

  const CuptiApi &cupti_;
  const Config &config_;
  KernelActivityControl *const activity_;
  PcLaunchState &state_;
  PcMetadata &meta_;
  PcPublisher &publisher_;
  PcContexts &contexts_;
  PcStats &stats_;
  // The sampling factor of every GPU of the process: the first device's in force (configure()).
  uint32_t process_factor_ = 0;
};

}  // namespace parcagpu
