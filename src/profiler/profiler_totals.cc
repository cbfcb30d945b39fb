// The debug lines of each part's totals (PARCAGPU_DEBUG), at exit and on request.
#include "profiler/profiler_totals.h"

#include <cstdio>
#include <initializer_list>
#include <string>

#include "activity/activity.h"
#include "base/log.h"
#include "launch/launch_callbacks.h"
#include "nvtx/nvtx_collector.h"
#include "pc/pc_stats.h"
#include "trackers/blocked_copies.h"
#include "trackers/correlation_tracker.h"
#include "trackers/cubin_registry.h"
#include "trackers/graph_completion.h"
#include "trackers/graph_tracker.h"

namespace parcagpu {
namespace {

// One debug line of a part's totals, "what: name=value ...", values as integers unless a
// number of decimals is given (milliseconds).
struct Total {
  const char *name;
  double value;
  int decimals = 0;
};

void log_totals(const char *what, std::initializer_list<Total> totals, const char *tail = "") {
  std::string line = what;
  line += ":";
  char buf[96];
  for (const Total &t : totals) {
    snprintf(buf, sizeof buf, " %s=%.*f", t.name, t.decimals, t.value);
    line += buf;
  }
  line += tail;
  debug_log("%s", line.c_str());
}

double u(uint64_t v) { return static_cast<double>(v); }

}  // namespace

// The totals of each part, one or two lines each (log_stats).
void log_launch_totals(const LaunchStats &l, const ActivityStats &a) {
  log_totals("launches", {{"announced eager", u(l.announced_eager.load())},
                          {"graph", u(l.announced_graph.load())},
                          {"rate-limited", u(l.rate_limited.load())},
                          {"picked while learning the launch rate", u(l.learning.load())},
                          {"captured", u(l.captured.load())},
                          {"consumer left during the call", u(l.left_unannounced.load())},
                          {"abandoned", u(l.abandoned.load())},
                          {"callback errors", u(l.callback_errors.load())}});
  log_totals("activity", {{"buffers", u(a.buffers.completed)},
                          {"refused", u(a.buffers.refused)},
                          {"kernel records", u(a.buffers.kernel_records)},
                          {"dropped", u(a.buffers.records_dropped)},
                          {"flushes", u(a.buffers.flushes)},
                          {"enables", u(a.enables)},
                          {"disables", u(a.disables)},
                          {"delivered", u(a.kernels.delivered)},
                          {"batches", u(a.kernels.batches)},
                          {"kernels after the last consumer left", u(a.kernels.unheard)},
                          {"graph kernels with a made-up end", u(a.graph_kernels.made_up_ends)},
                          {"launches waiting when it left", u(a.launches_unheard)},
                          {"copies and fills", u(a.memory.records)},
                          {"copies and fills delivered", u(a.memory.delivered)},
                          {"copy and fill batches", u(a.memory.batches)},
                          {"copies and fills after the last consumer left", u(a.memory.unheard)},
                          {"copies and fills with a CPU blocked time", u(a.memory.blocked)}});
}

void log_pc_totals(const PcStats &p, const CubinStats &cs) {
  log_totals("pc sampling",
             {{"episodes", u(p.episodes)},
              {"ended before a graph's first launch", u(p.ended_for_graphs)},
              {"graphs first launched while enabled", u(p.graphs_uploaded_enabled)},
              {"ended before a graph's instantiation", u(p.ended_for_instantiations)},
              {"graphs instantiated while enabled", u(p.graphs_instantiated_enabled)},
              {"graphs registered", u(p.graphs_registered)},
              {"graphs not registered", u(p.graphs_not_registered)},
              {"learning resumed after one", u(p.learning_resumes)},
              {"learning resumed at a module load", u(p.module_resumes)},
              {"put off for another process", u(p.put_off_for_other_process)},
              {"contexts off without their GPU's lock", u(p.contexts_without_lock)},
              {"enables", u(p.enables)},
              {"disables", u(p.disables)},
              {"enabled ms", p.enabled_ns / 1e6, 1},
              {"disable ms", p.disable_ns / 1e6, 1},
              {"longest disable ms", p.max_disable_ns / 1e6, 1},
              {"windows", u(p.windows)},
              {"window launches", u(p.window_launches)},
              {"window ms", p.window_ns / 1e6, 1}});
  log_totals("pc sampling",
             {{"drains", u(p.drains)},
              {"batches", u(p.batches)},
              {"records", u(p.records)},
              {"samples", u(p.samples)},
              {"pairs", u(p.pairs)},
              {"uncorrelated", u(p.uncorrelated)},
              {"gpu-only (not announced)", u(p.gpu_only)},
              {"unpublished", u(p.unpublished)},
              {"unfired (queue full)", u(p.unfired)},
              {"non-user samples", u(p.nonuser_samples)},
              {"dropped samples", u(p.dropped_samples)},
              {"gate timeouts", u(p.gate_timeouts)},
              {"factor", u(p.sampling_factor)}},
             p.failed ? " (failed)" : "");
  log_totals("cubins", {{"loaded", u(cs.loaded)},
                        {"unloaded", u(cs.unloaded)},
                        {"live", u(cs.live)},
                        {"copied", u(cs.copied)},
                        {"bytes held", u(cs.copied_bytes)},
                        {"no crc", u(cs.no_crc)}});
}

void log_blocked_copies_totals(const BlockedCopiesStats &b) {
  log_totals("blocked copies", {{"kept", u(b.kept)},
                                {"taken by their record", u(b.taken)},
                                {"dropped (table full)", u(b.dropped)},
                                {"expired", u(b.expired)},
                                {"live", u(b.live)}});
}

void log_nvtx_totals(const NvtxStats &n) {
  log_totals("nvtx", {{"events", u(n.events)},
                      {"batches", u(n.batches)},
                      {"names", u(n.names)},
                      {"lost after the consumer left", u(n.unheard)},
                      {"lost for want of memory", u(n.no_batch)},
                      {"messages cut", u(n.truncated)},
                      {"messages not read", u(n.unreadable)}});
}

void log_graph_totals(const GraphStats &g, const TrackerStats &t) {
  log_totals("graphs", {{"execs", u(g.execs)},
                        {"clones", u(g.clones)},
                        {"clones not fired live", u(g.clones_not_fired)},
                        {"clones not stored (cap)", u(g.clones_not_stored)},
                        {"wanted nodes forgotten (cap)", u(g.wanted_forgotten_at_cap)},
                        {"execs forgotten (cap)", u(g.execs_forgotten_at_cap)},
                        {"host-only launches", u(g.hostonly_launches)},
                        {"conditional records", u(g.conditional_records)},
                        {"ambiguous owner", u(g.conditional_ambiguous)},
                        {"no owner", u(g.conditional_orphans)},
                        {"of unannounced launches", u(g.conditional_unannounced)},
                        {"conditional execs forgotten with launches (cap)",
                         u(g.conditional_owners_forgotten)}});
  log_totals("tracker", {{"inserted", u(t.inserted)},
                         {"completed", u(t.completed)},
                         {"matched", u(t.kernels_matched)},
                         {"unmatched", u(t.kernels_unmatched)},
                         {"expired", u(t.expired)},
                         {"never seen", u(t.expired_unseen)},
                         {"refused", u(t.refused)},
                         {"retired at the cap", u(t.retired_at_cap)},
                         {"removed", u(t.removed)},
                         {"dropped unheard", u(t.dropped_unheard)},
                         {"live", u(t.live)}});
}

void log_completion_totals(const GraphCompletion::Stats &c, uint64_t grace_ns) {
  log_totals("graph completion", {{"watched", u(c.watched)},
                                  {"finished", u(c.finished)},
                                  {"timed out", u(c.timed_out)},
                                  {"failed", u(c.failed)},
                                  {"grace ms", static_cast<double>(grace_ns) / 1e6, 1}});
}

}  // namespace parcagpu
