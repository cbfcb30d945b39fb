#include "tracer.h"

#include "parcagpu/abi.h"
#include "parcagpu/cbid_table.h"

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstddef>
#include <cstring>
#include <ctime>
#include <iterator>

#include <unistd.h>

#include "parcagpu_version.h"
#include "pprof.h"

namespace parcagpu::trace {
namespace {

std::string_view str(const char *s, size_t max) { return {s, strnlen(s, max)}; }

Json frame_json(const Frame &f) {
  Json j;
  j["name"] = f.name();
  j["function"] = f.function;
  j["module"] = f.module;
  if (!f.file.empty()) j["file"] = f.file;
  if (f.line) j["line"] = f.line;
  if (f.inlined) j["inlined"] = true;
  return j;
}

// Writes `text` to the file of option `flag` ("-": stdout). A failure says which option and file
// and why, once: a full disk shows only when the buffered data is written, at fflush / fclose.
bool write_file(const char *flag, const std::string &path, const std::string &text) {
  const bool to_stdout = path == "-";
  FILE *f = to_stdout ? stdout : std::fopen(path.c_str(), "we");
  int err = f ? 0 : errno;
  if (f) {
    if (std::fwrite(text.data(), 1, text.size(), f) != text.size()) err = errno ? errno : EIO;
    errno = 0;
    if ((to_stdout ? std::fflush(f) : std::fclose(f)) != 0 && !err) err = errno ? errno : EIO;
  }
  if (!err) return true;
  std::fprintf(stderr, "parcagpu-trace: %s %s: cannot write it: %s\n", flag,
               to_stdout ? "- (stdout)" : path.c_str(), std::strerror(err));
  return false;
}

}  // namespace

Tracer::Tracer(const Options &o)
    : opt_(o),
      report_out_(o.stdout_is_a_file() ? stderr : stdout),
      resolver_(symbolizer_, stacks_),
      joiner_(Joiner::Limits{o.max_pending, static_cast<uint64_t>(o.max_age_s * 1e9), 1 << 16}, this),
      captures_(stacks_, joiner_.names()) {
  resolver_.before_symbolize = [this] { drain_mapping_records(); };
  // Kernel names the library handed over as stand-ins: whole where an extension (--pc) read the
  // cubin that has them.
  joiner_.names().set_whole_names([this](std::string_view name) -> const std::string * {
    for (const auto &v : extensions_)
      if (const std::string *whole = v->whole_name(name)) return whole;
    return nullptr;
  });
  add_memory_profile();
}

int Tracer::handle(void *ctx, void *data, size_t size) {
  static_cast<Tracer *>(ctx)->on_event(data, size);
  return 0;
}

void Tracer::use_mapping_records(MmapTracker *m, MmapTracker::Hooks hooks) {
  mmaps_ = m;
  MmapTracker::Hooks h = std::move(hooks);
  auto gone = h.gone;
  auto mapping = h.mapping;
  // A python* / libpython3* file mapped: CPython is looked for there and then, long before the
  // process can load the traced library and launch (doing it at the library's mapping or at the
  // first event would be too late: the mock and lazy CUDA programs load it at their first launch).
  // Every Python process of the machine is registered this way; only those that launch are
  // counted (python_processes).
  h.mapping = [this, mapping](uint32_t pid, const MapEntry &m) {
    const std::string path = live_path(m.path);
    const size_t slash = path.rfind('/');
    const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
    if (base.compare(0, 6, "python") == 0 || base.compare(0, 10, "libpython3") == 0) check_python(pid, {m});
    if (is_libtorch_cpu(path)) check_torch(pid, {m});
    if (mapping) mapping(pid, m);
  };
  // A Python process that execs another program: its old interpreter's addresses mean
  // nothing now (the new program's mappings, which come next, are checked again).
  auto exec = h.exec;
  h.exec = [this, exec](uint32_t pid) {
    if (python_.knows(pid)) {
      if (opt_.verbose) std::fprintf(stderr, "parcagpu-trace: pid %u exec'd: no longer Python\n", pid);
      if (python_map) python_map(pid, nullptr);
      python_.forget(pid);
    }
    if (exec) exec(pid);
  };
  h.gone = [this, gone](uint32_t pid) {
    forget_process(pid);
    if (gone) gone(pid);
  };
  hooks_ = std::move(h);
}

void Tracer::drain_mapping_records() {
  if (mmaps_ && mmaps_->is_open()) mmaps_->drain(&symbolizer_, hooks_);
}

void Tracer::check_python(uint32_t pid, const std::vector<MapEntry> &maps) {
  if (!opt_.python || !python_map || python_.knows(pid)) return;
  pt_py_proc p{};
  std::string version;
  const PyLayout *layout = nullptr;
  if (!detect_python(pid, maps, &p, &version, &layout)) {
    if (opt_.verbose && !version.empty())
      std::fprintf(stderr, "parcagpu-trace: pid %u runs Python %s: no Python frames (3.11-3.13 are read)\n", pid,
                   version.c_str());
    return;
  }
  if (!python_map(pid, &p)) {
    if (!python_map_full_++)
      std::fprintf(stderr, "parcagpu-trace: warning: pid %u (Python %s) and later Python processes not registered "
                   "(BPF map py_procs full?): their launches show native frames only\n", pid, version.c_str());
    return;
  }
  python_.add_process(pid, layout);
  if (opt_.verbose)
    std::fprintf(stderr, "parcagpu-trace: pid %u runs Python %s (interpreters.head at 0x%" PRIx64 ")\n", pid,
                 version.c_str(), static_cast<uint64_t>(p.interp_head));
}

void Tracer::check_torch(uint32_t pid, const std::vector<MapEntry> &maps) {
  if (!opt_.autograd || !autograd_attach || !python_.knows(pid)) return;
  for (const MapEntry &m : maps) {
    if (m.path.empty() || !is_libtorch_cpu(m.path)) continue;
    const std::string path = live_path(m.path);
    if (!torch_files_.insert(path + "|" + m.dev + "|" + std::to_string(m.inode)).second) continue;
    // The file as this tool sees it (a container's through /proc/PID/root).
    std::string root = "/proc/" + std::to_string(pid) + "/root";
    if (access((root + path).c_str(), R_OK) != 0) root.clear();
    int major = 0, minor = 0;
    std::string version;
    const bool have_version = torch_version_of(root, path, &major, &minor, &version);
    const AutogradLayout *l = have_version ? autograd_layout(major, minor) : nullptr;
    if (!l) {
      ++meta_.autograd_layout_unknown;
      std::fprintf(stderr, "parcagpu-trace: %s: torch %s: autograd layout not known: its backward launches "
                   "show native stacks\n", path.c_str(), have_version ? version.c_str() : "version unreadable");
      continue;
    }
    std::string error;
    if (!autograd_attach(root + path, *l, &error)) {
      ++meta_.autograd_layout_unknown;
      std::fprintf(stderr, "parcagpu-trace: %s: torch %s: autograd probes not attached (%s): its backward "
                   "launches show native stacks\n", path.c_str(), version.c_str(), error.c_str());
      continue;
    }
    ++meta_.autograd_libraries;
    if (opt_.verbose)
      std::fprintf(stderr, "parcagpu-trace: %s: torch %s: autograd probes attached\n", path.c_str(), version.c_str());
  }
}

void Tracer::forget_process(uint32_t pid) {
  autograd_names_.forget(pid);
  if (python_.knows(pid) && python_map) python_map(pid, nullptr);
  python_.forget(pid);
  resolver_.forget(pid);
  unwinder_.forget(pid);
  captures_.forget(pid);
  joiner_.forget_process(pid);
  nvtx_.forget_process(pid);
  process_start_.erase(pid);
  processes_.forget(pid);
  seen_pids_.erase(pid);
}

void Tracer::on_library(const std::string &path, const std::string &shown, uint32_t pid) {
  resolver_.add_library_path(path);
  if (shown != path) resolver_.add_library_path(shown);
  if (opt_.json_lines) print_line(Json{{"type", "library"}, {"path", shown}, {"found_in_pid", pid}});
}

template <typename T>
const T *Tracer::as(const void *data, size_t size) {
  if (size >= sizeof(T)) return static_cast<const T *>(data);
  ++malformed_;
  return nullptr;
}

template <typename E>
void Tracer::take(const void *data, size_t size, void (Tracer::*on)(const E &)) {
  if (const E *e = as<E>(data, size)) (this->*on)(*e);
}

void Tracer::print_line(const Json &j) const {
  const std::string line = json_line(j);
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fputc('\n', stdout);
}

template <typename E>
bool Tracer::stack_of(const pt_header &h, const void *data, size_t size, uint32_t *stack) {
  *stack = StackTable::kNone;
  if (!(h.flags & PT_F_STACK)) return true;
  const E *se = as<E>(data, size);
  if (!se) return false;
  *stack = resolve_stack(h, se->stacks, size - offsetof(E, stacks));
  return true;
}

namespace {
// The outermost native frame of a DWARF-unwound stack that ended before the thread's first frame,
// and what it adds to the stack's cache key (the raw addresses of a cut and of a whole walk can be
// equal).
constexpr const char *kStackCutFrame = "[stack cut short]";
constexpr char kCutKey[] = "\0cut";
}  // namespace

Tracer::StackEdit Tracer::python_edit(const pt_header &h, const pt_py_stack *py, std::string *py_key) {
  // The Python chain is part of the stack's key; its frames go in on a cache miss only.
  StackEdit edit;
  if (py && py->count > 0 && python_.knows(h.pid)) {
    const uint32_t n = std::min<uint32_t>(py->count, PT_PY_FRAMES_MAX);
    ++meta_.python_stacks;
    for (uint32_t i = 0; i < n; ++i) {
      const uint64_t rec[2] = {py->code[i], py->instr[i]};
      py_key->append(reinterpret_cast<const char *>(rec), sizeof rec);
      *py_key += static_cast<char>(py->entry[i]);
    }
    const pt_py_stack *chain = py;
    const uint32_t pid = h.pid;
    edit = [this, chain, pid](std::vector<Frame> *frames) {
      bool mismatch = false;
      *frames = merge_python_frames(*frames, python_.groups(pid, *chain, &meta_), &mismatch);
      if (mismatch) ++meta_.python_merge_mismatches;
    };
  }
  // A launch in an autograd Node (tools/trace/autograd.h): linked, the chain is the forward call's, put
  // outside the native frames up to evaluate_function and the Node's frame; not linked, the
  // Node's frame goes in after evaluate_function and the rest stays as it is.
  if (py && (h.flags & PT_F_AUTOGRAD) && opt_.autograd) {
    const uint64_t vtable = py->node_vtable;
    const bool linked = py->node_linked != 0;
    std::string key(1, linked ? 'A' : 'a');
    key.append(reinterpret_cast<const char *>(&vtable), sizeof vtable);
    py_key->insert(0, key);
    const pt_py_stack *chain = py;
    const uint32_t pid = h.pid;
    auto merge = std::move(edit);
    edit = [this, chain, pid, vtable, linked, merge](std::vector<Frame> *frames) {
      const std::string node = autograd_names_.name(pid, vtable, symbolizer_.maps(pid));
      std::vector<Frame> forward;
      if (linked && chain->count > 0 && python_.knows(pid))
        for (const auto &g : python_.groups(pid, *chain, &meta_)) forward.insert(forward.end(), g.begin(), g.end());
      if (!linked && merge) merge(frames);
      *frames = autograd_stack(*frames, node, forward, linked);
    };
  }
  return edit;
}

bool Tracer::resolve_copied_stack(const pt_header &h, const pt_stack_copy &copy, std::string py_key,
                                  const StackEdit &edit, uint32_t *id) {
  drain_mapping_records();  // the modules mapped before the launch
  const CopiedStack cs{reinterpret_cast<const uint64_t *>(copy.regs), reinterpret_cast<const uint8_t *>(&copy + 1), static_cast<size_t>(copy.bytes)};
  const UnwindResult u = unwinder_.unwind(h.pid, h.tid, symbolizer_.maps(h.pid), cs, PT_STACK_MAX);
  if (u.ended_outside_code) ++meta_.dwarf_stacks_ended_outside_code;
  if (u.pcs.size() <= 1) {
    ++meta_.dwarf_stacks_failed;
    return false;
  }
  ++meta_.dwarf_stacks;
  if (u.whole) {
    *id = resolver_.resolve(h.pid, u.pcs.data(), u.pcs.size(), py_key, edit);
    return true;
  }
  // The unwind ended before the thread's start: the native frames end with one that says so
  // (a flame graph shows cut stacks as such, not as towers of their own), before the Python or
  // autograd edit. So it is the root of a native stack, stands between the native frames and
  // Python frames put outside them, and goes with the native frames an autograd stack drops
  // beyond evaluate_function.
  ++meta_.dwarf_stacks_cut;
  py_key.append(kCutKey, sizeof kCutKey - 1);
  auto mark_then_edit = [edit](std::vector<Frame> *frames) {
    Frame cut;
    cut.function = kStackCutFrame;
    cut.label = true;
    frames->push_back(std::move(cut));  // innermost first: the outermost native frame
    if (edit) edit(frames);
  };
  *id = resolver_.resolve(h.pid, u.pcs.data(), u.pcs.size(), py_key, mark_then_edit);
  return true;
}

uint32_t Tracer::resolve_stack(const pt_header &h, const pt_stacks &stacks, size_t avail) {
  const pt_stack &s = stacks.stack;
  const pt_py_stack *py = (h.flags & PT_F_PY_STACK) ? &stacks.py : nullptr;
  const pt_stack_copy *copy = (h.flags & PT_F_STACK_COPY) ? &stacks.copy : nullptr;
  avail -= offsetof(pt_stacks, copy);
  std::string py_key;
  const StackEdit edit = python_edit(h, py, &py_key);
  uint32_t id;
  if (copy && avail >= sizeof *copy && copy->bytes > 0 &&
      static_cast<size_t>(copy->bytes) <= std::min<size_t>(copy->size, avail - sizeof *copy) &&
      resolve_copied_stack(h, *copy, py_key, edit, &id))
    return id;
  if (s.bytes <= 0) return StackTable::kNone;
  const size_t n = std::min<size_t>(static_cast<size_t>(s.bytes) / 8, PT_STACK_MAX);
  return resolver_.resolve(h.pid, reinterpret_cast<const uint64_t *>(s.ips), n, py_key, edit);
}

void Tracer::on_process(uint32_t pid) {
  last_pid_ = pid;
  have_pid_ = true;
  auto [start, first_sight] = process_start_.try_emplace(pid, 0);
  if (first_sight) start->second = process_start_monotonic_ns(pid);
  last_process_start_ns_ = start->second;
  if (seen_pids_.insert(pid).second) {
    // A process already running at attach: its maps now, while it surely lives.
    drain_mapping_records();
    symbolizer_.note_process(pid);
    processes_.id(pid);  // its comm and rank now, while it surely lives
    check_python(pid, symbolizer_.maps(pid));
    check_torch(pid, symbolizer_.maps(pid));
    if (python_.knows(pid)) ++meta_.python_processes;
  }
}

bool Tracer::on_correlation(const pt_correlation_event &e, const void *data, size_t size) {
  const pt_header &h = e.h;
  uint32_t stack;
  if (!stack_of<pt_correlation_stack_event>(h, data, size, &stack)) return false;
  // The thread's NVTX records came before this launch (the library fires them first): its open
  // ranges now are those around the launch.
  if (nvtx_.threads() > 0) stack = nvtx_.launch_stack(h.pid, h.tid, stack, &stacks_);
  joiner_.on_correlation(h.pid, e.correlation_id, e.signed_cbid, stack, h.ts_ns);
  if (opt_.verbose) {
    char py[48] = "";
    if (h.flags & PT_F_PY_STACK) {
      const auto *se = reinterpret_cast<const pt_correlation_stack_event *>(data);
      std::snprintf(py, sizeof py, " python_frames=%u status=%u", se->stacks.py.count,
                    se->stacks.py.status);
    }
    std::fprintf(stderr, "[%u/%u] cuda_correlation corr=%u cbid=%d (%s) name=%s stack=%u%s\n", h.pid,
                 h.tid, e.correlation_id, e.signed_cbid, api_name(e.signed_cbid), e.name, stack, py);
  }
  return true;
}

void Tracer::on_library_error(const pt_error_event &e) {
  const pt_header &h = e.h;
  joiner_.on_error(h.pid);
  std::fprintf(stderr, "parcagpu-trace: pid %u: library error %d [%s]: %s%s\n", h.pid, e.code,
               e.component, e.message, (h.flags & PT_F_MSG_FAULT) ? " (strings unreadable)" : "");
  if (opt_.json_lines)
    print_line(Json{{"type", "error"}, {"pid", h.pid}, {"code", e.code},
                    {"component", str(e.component, sizeof e.component)},
                    {"message", str(e.message, sizeof e.message)}});
}

// The library's activity buffers are said on stderr as they come (the kernels come as kernel
// events).
void Tracer::on_batch(const pt_batch_event &e) {
  joiner_.on_other(e.h.pid);
  std::fprintf(stderr, "[%u/%u] activity_batch records=0x%" PRIx64 " count=%u kernels=%u other_kinds=%u unreadable=%u\n",
               e.h.pid, e.h.tid, static_cast<uint64_t>(e.records), e.count, e.kernels, e.other_kinds,
               e.unreadable);
}

void Tracer::on_gpu_config(const pt_gpu_config_event &e) {
  joiner_.on_gpu_config(e.h.pid);
  if (opt_.verbose)
    std::fprintf(stderr, "[%u/%u] gpu_config device=%u sampling_factor=%u clock_khz=%u sm_count=%u\n",
                 e.h.pid, e.h.tid, e.device_id, e.sampling_factor, e.clock_khz, e.sm_count);
}

void Tracer::on_clone(const pt_clone_event &e) {
  joiner_.on_other(e.h.pid);
  captures_.on_clone(e.h.pid, e.original_node_id, e.cloned_node_id, e.exec_graph_id);
  if (opt_.verbose)
    std::fprintf(stderr, "[%u/%u] graph_node_clone original=%" PRIu64 " cloned=%" PRIu64 " exec_graph=%u\n",
                 e.h.pid, e.h.tid, static_cast<uint64_t>(e.original_node_id),
                 static_cast<uint64_t>(e.cloned_node_id), e.exec_graph_id);
}

void Tracer::on_event(const void *data, size_t size) {
  const auto *h = as<pt_header>(data, size);
  if (!h) return;
  if (!have_pid_ || h->pid != last_pid_) on_process(h->pid);
  switch (h->type) {
    case PT_EV_CORRELATION:
      if (const auto *e = as<pt_correlation_event>(data, size))
        if (!on_correlation(*e, data, size)) return;
      break;
    case PT_EV_KERNEL:
    case PT_EV_KERNEL_EXECUTED:
    case PT_EV_MEMORY: take(data, size, &Tracer::on_kernel); break;
    case PT_EV_ACTIVITY_BATCH: take(data, size, &Tracer::on_batch); break;
    case PT_EV_ERROR: take(data, size, &Tracer::on_library_error); break;
    case PT_EV_GPU_CONFIG: take(data, size, &Tracer::on_gpu_config); break;
    case PT_EV_GRAPH_CAPTURE:
      if (const auto *e = as<pt_capture_event>(data, size)) on_capture(*e, data, size);
      break;
    case PT_EV_GRAPH_NODE_CLONE: take(data, size, &Tracer::on_clone); break;
    case PT_EV_CUBIN_LOADED:
    case PT_EV_CUBIN_UNLOADED:
    case PT_EV_STALL_REASON_MAP:
    case PT_EV_PC_SAMPLE_BATCH: take(data, size, &Tracer::on_meta); break;
    case PT_EV_NVTX: take(data, size, &Tracer::on_nvtx); break;
    case PT_EV_NVTX_RESOURCE_NAME: take(data, size, &Tracer::on_nvtx_resource); break;
    case PT_EV_NVTX_THREAD_EXIT: take(data, size, &Tracer::on_nvtx_thread_exit); break;
    default:
      bool claimed = false;
      for (const auto &v : extensions_) claimed |= v->wants(h->type);
      if (!claimed) ++malformed_;
  }
  for (const auto &v : extensions_)
    if (v->wants(h->type)) v->on_event(*h, data, size);
}

void Tracer::on_capture(const pt_capture_event &e, const void *data, size_t size) {
  joiner_.on_other(e.h.pid);
  uint32_t stack;
  if (!stack_of<pt_capture_stack_event>(e.h, data, size, &stack)) return;
  if (opt_.verbose)
    std::fprintf(stderr, "[%u/%u] graph_capture_launch corr=%u cbid=%d (%s) graph=%u node=%" PRIu64 " name=%s stack=%u\n",
                 e.h.pid, e.h.tid, e.correlation_id, e.signed_cbid, api_name(e.signed_cbid), e.graph_id,
                 static_cast<uint64_t>(e.graph_node_id), e.name, stack);
  captures_.on_capture(e.h.pid, e.correlation_id, e.signed_cbid, str(e.name, sizeof e.name), e.graph_id,
                       e.graph_node_id, stack);
}

void Tracer::on_kernel(const pt_kernel_event &e) {
  KernelRecord k;
  k.pid = e.h.pid;
  k.correlation_id = e.correlation_id;
  k.device_id = e.device_id;
  k.stream_id = e.stream_id;
  k.graph_id = e.graph_id;
  k.graph_node_id = e.graph_node_id;
  k.start = e.start;
  k.end = e.end;
  k.seen_ns = e.h.ts_ns;
  k.name = str(e.name, sizeof e.name);
  if (e.h.type == PT_EV_MEMORY) on_memory_record(e, &k);
  if (e.h.type == PT_EV_KERNEL_EXECUTED) {  // verbose only: not a kernel source
    std::fprintf(stderr, "[%u/%u] kernel_executed corr=%u graph=%u node=%" PRIu64 " name=%s\n", e.h.pid,
                 e.h.tid, e.correlation_id, e.graph_id, static_cast<uint64_t>(e.graph_node_id), e.name);
    joiner_.on_other(e.h.pid);
    return;
  }
  k.context_id = e.context_id;
  k.process_start_ns = e.h.pid == last_pid_ ? last_process_start_ns_ : 0;
  joiner_.judge(&k);  // impossible times: a kernel without GPU time, here and in every table
  // A graph kernel's capture site, whatever becomes of its launch: the tag carries its stack.
  uint32_t tag = 0;
  if (k.graph_id != 0) {
    const uint32_t name = joiner_.names().id(k.name);
    if (const CaptureSites::Site *site = captures_.on_graph_kernel(k.pid, k.graph_node_id, name, k.gpu_ns()))
      tag = site->stack_id + 1;
  }
  devices_.on_record(k.pid, k.device_id);
  const Joiner::Match m = joiner_.on_kernel(k, tag);
  if (opt_.verbose)
    std::fprintf(stderr, "[%u/%u] kernel corr=%u dev=%u stream=%u graph=%u node=%" PRIu64 " %s%s%s name=%s\n",
                 e.h.pid, e.h.tid, e.correlation_id, e.device_id, e.stream_id, e.graph_id,
                 static_cast<uint64_t>(e.graph_node_id), m.matched ? "matched" : "waiting",
                 k.impossible != Impossible::kNone ? " impossible=" : "", impossible_name(k.impossible), e.name);
}

void Tracer::add_memory_profile() {
  auto memory = std::make_unique<MemoryProfile>([this](uint32_t stack) {
    std::vector<std::string> out;
    if (const char *p = StackTable::pseudo_name(stack))
      out.push_back(p);
    else
      for (const Frame &f : stacks_.frames(stack)) out.push_back(f.text());
    return out;
  });
  memory_ = memory.get();
  add_extension(std::move(memory));
}

// A copy or fill (memory_batch) goes the kernels' way, under the frame that says what it is.
void Tracer::on_memory_record(const pt_kernel_event &e, KernelRecord *k) {
  ++meta_.memory_records;
  k->name = memory_frame_name(e.kind, e.copy_kind);
  k->bytes = e.bytes;
  k->memory = true;
  k->sync_copy = (e.mem_flags & PARCAGPU_MREC_FLAG_ASYNC) == 0;
  k->cpu_blocked_ns = e.cpu_blocked_ns;
  // CUpti_ActivityMemoryKind 1: pageable host memory, which an "Async" copy may wait on.
  k->pageable_host = e.src_kind == 1 || e.dst_kind == 1;
}

// Whether a copy's call waits for it (docs/probe-abi.md): a synchronous API (cbid_table.h,
// HostSync::Blocking), or host memory that is pageable.
static bool copy_call_waits(const Launch &l, const KernelRecord &k) {
  return is_host_blocking_launch(l.signed_cbid) || k.pageable_host;
}

void Tracer::on_match(const Launch &l, const KernelRecord &k, uint32_t name_id, uint32_t tag) {
  // Graph kernels go under their capture stack with --capture-sites (when they have one).
  const uint32_t stack = opt_.capture_sites && tag > StackTable::kFirstReal ? tag - 1 : l.stack_id;
  if (k.memory)
    memory_->add(stack, joiner_.names().raw(name_id).c_str(),
                 {k.bytes, k.gpu_ns(), copy_call_waits(l, k), k.cpu_blocked_ns});
  const Origin origin{processes_.id(k.pid), k.device_id};
  profile_.add(stack, name_id, k.gpu_ns(), origin);
  devices_.on_match(k.device_id, name_id, k.gpu_ns());
  if (opt_.interval_s > 0) interval_profile_.add(stack, name_id, k.gpu_ns(), origin);
  if (opt_.kernels) {
    std::string site;
    if (const char *p = StackTable::pseudo_name(stack))
      site = p;
    else if (!stacks_.frames(stack).empty())
      site = stacks_.frames(stack).front().text();
    table_.row(k, l, joiner_.names().display(name_id), site);
  }
  if (opt_.json_lines) {
    emit_stack(stack);
    Json j;
    j["type"] = k.memory ? "memory" : "kernel";
    if (k.memory) {
      j["bytes"] = k.bytes;
      j["sync"] = k.sync_copy;
      j["waits"] = copy_call_waits(l, k);
      j["cpu_blocked_ns"] = k.cpu_blocked_ns;
    }
    j["pid"] = k.pid;
    const ProcessInfo &process = processes_.info(origin.process);
    j["comm"] = process.comm;
    j["rank"] = process.rank ? Json(*process.rank) : Json(nullptr);
    j["correlation_id"] = k.correlation_id;
    j["cbid"] = l.signed_cbid;
    j["api"] = api_name(l.signed_cbid);
    j["kernel"] = joiner_.names().raw(name_id);
    j["demangled"] = joiner_.names().demangled(name_id);
    j["start"] = k.start;
    j["end"] = k.end;
    j["gpu_ns"] = k.gpu_ns();
    if (k.impossible != Impossible::kNone) j["impossible"] = impossible_name(k.impossible);
    j["device"] = k.device_id;
    j["stream"] = k.stream_id;
    j["graph_id"] = k.graph_id;
    j["graph_node_id"] = k.graph_node_id;
    j["stack_id"] = stack;
    print_line(j);
  }
}

void Tracer::emit_stack(uint32_t id) {
  if (!emitted_stacks_.insert(id).second) return;
  Json j;
  j["type"] = "stack";
  j["id"] = id;
  Json frames = Json::array();
  if (const char *p = StackTable::pseudo_name(id))
    frames.push_back(Json{{"name", p}});
  else
    for (const Frame &f : stacks_.frames(id)) frames.push_back(frame_json(f));
  j["frames"] = std::move(frames);
  print_line(j);
}

void Tracer::on_meta(const pt_meta_event &e) {
  joiner_.on_other(e.h.pid);
  const char *what = "";
  switch (e.h.type) {
    case PT_EV_CUBIN_LOADED: ++meta_.cubin_loaded; what = "cubin_loaded"; break;
    case PT_EV_CUBIN_UNLOADED: ++meta_.cubin_unloaded; what = "cubin_unloaded"; break;
    case PT_EV_STALL_REASON_MAP: ++meta_.stall_reason_maps; what = "stall_reason_map"; break;
    case PT_EV_PC_SAMPLE_BATCH: ++meta_.pc_sample_batches; what = "pc_sample_batch"; break;
  }
  if (opt_.verbose)
    std::fprintf(stderr, "[%u/%u] %s crc=0x%" PRIx64 " ptr=0x%" PRIx64 " size/count=%" PRIu64 "%s\n",
                 e.h.pid, e.h.tid, what, static_cast<uint64_t>(e.crc), static_cast<uint64_t>(e.ptr),
                 static_cast<uint64_t>(e.size), (e.h.flags & PT_F_BLOB_FAULT) ? " (blob unreadable)" : "");
}

// An NVTX record, keyed by the firing thread (the kernel's tid, as cuda_correlation's): the
// library fires a thread's records on that thread, before its launches.
void Tracer::on_nvtx(const pt_nvtx_event &e) {
  joiner_.on_other(e.h.pid);
  const std::string_view message = str(e.message, sizeof e.message);
  nvtx_.on_record(e.h.pid, e.h.tid, e.kind, e.range_id, message);
  if (opt_.verbose)
    std::fprintf(stderr, "[%u/%u] nvtx kind=%u record_tid=%u range=%" PRIu64 " corr=%u domain=%u [%u/%u] %.*s\n",
                 e.h.pid, e.h.tid, e.kind, e.record_tid, static_cast<uint64_t>(e.range_id), e.correlation_id,
                 e.domain_id, e.batch_index, e.batch_count, static_cast<int>(message.size()), message.data());
}

void Tracer::on_nvtx_resource(const pt_nvtx_resource_event &e) {
  joiner_.on_other(e.h.pid);
  ++meta_.nvtx_resource_names;
  if (opt_.verbose)
    std::fprintf(stderr, "[%u/%u] nvtx_resource_name kind=%u id=%" PRIu64 " name=%.*s\n", e.h.pid, e.h.tid, e.kind,
                 static_cast<uint64_t>(e.id), static_cast<int>(strnlen(e.name, sizeof e.name)), e.name);
}

void Tracer::on_nvtx_thread_exit(const pt_header &h) {
  joiner_.on_other(h.pid);
  nvtx_.thread_exit(h.pid, h.tid);
}

void Tracer::warn_of_losses(const BpfLosses &b) {
  // Each row: the count so far, the JSON key the summary counts it under, what it means.
  char max_pending[128];
  std::snprintf(max_pending, sizeof max_pending,
                "the joiner held --max-pending %zu launches and kernels: the oldest waiting ones are "
                "forgotten as orphans", joiner_.max_entries());
  const struct {
    uint64_t count;
    const char *what, *key, *hint;
  } kinds[] = {
      {b.ringbuf_drops, "ring buffer full: launches, kernel records or stacks dropped", "ringbuf_drops",
       "; a larger --ringbuf-mb holds more"},
      {b.meta_ringbuf_drops, "metadata ring buffer full: error, cubin, stall-reason or gpu_config events dropped",
       "meta_ringbuf_drops", ""},
      {b.error_drops, "library error firings lost: the error probe fired, its event found no room", "errors_lost",
       ""},
      {joiner_.forgotten_at_max_pending(), max_pending, "forgotten_at_max_pending",
       "; a larger --max-pending holds more"},
  };
  for (size_t i = 0; i < std::size(kinds); ++i) {
    if (kinds[i].count == 0 || (losses_said_ & (1u << i))) continue;
    losses_said_ |= 1u << i;
    std::fprintf(stderr, "parcagpu-trace: warning: %s (counted as %s%s)\n", kinds[i].what, kinds[i].key,
                 kinds[i].hint);
  }
}

void Tracer::begin_output() {
  if (opt_.kernels && !opt_.json && !opt_.json_lines) table_.header();
}

void Tracer::print_interval(double seconds) {
  const std::vector<StackSummary> rows = summarize_stacks(interval_profile_, stacks_, joiner_.names(), opt_.top);
  if (opt_.json_lines) {
    Json j;
    j["type"] = "interval";
    j["seconds"] = seconds;
    j["gpu_ns"] = interval_profile_.total_ns();
    j["kernels"] = interval_profile_.total_kernels();
    Json stacks = Json::array();
    for (const StackSummary &r : rows) {
      emit_stack(r.stack_id);
      Json ks = Json::array();
      for (const StackKernelSummary &k : r.by_kernel)
        ks.push_back({{"kernel", k.kernel}, {"gpu_ns", k.gpu_ns}, {"kernels", k.kernels}});
      stacks.push_back({{"stack_id", r.stack_id}, {"gpu_ns", r.gpu_ns}, {"kernels", r.kernels}, {"by_kernel", ks}});
    }
    j["gpu_time_by_stack"] = std::move(stacks);
    print_line(j);
  } else if (!opt_.json) {
    char title[96];
    std::snprintf(title, sizeof title, "\nGPU time by launch stack, last %.1f s", seconds);
    print_stack_table(report_out_, title, rows, interval_profile_.total_ns(), interval_profile_.total_kernels(),
                      interval_profile_.stacks());
  }
  std::fflush(report_out_);
  interval_profile_.clear();
}

namespace {
// The summary's counters that the BPF programs count themselves, each with its slot of the stats
// map, copied into the summary as they are.
struct BpfCounter {
  counter_count Counters::*field;
  int slot;
};
constexpr BpfCounter kBpfCounters[] = {
    {&Counters::ringbuf_drops, PT_STAT_RINGBUF_DROPS},
    {&Counters::meta_ringbuf_drops, PT_STAT_META_RINGBUF_DROPS},
    {&Counters::error_firings, PT_STAT_FIRE_ERROR},
    {&Counters::read_errors, PT_STAT_READ_ERRORS},
    {&Counters::kernel_executed_events, PT_STAT_FIRE_KERNEL_EXECUTED},
    {&Counters::activity_batches, PT_STAT_FIRE_ACTIVITY_BATCH},
    {&Counters::memory_batches, PT_STAT_FIRE_MEMORY_BATCH},
    {&Counters::batch_records_over_cap, PT_STAT_BATCH_OVER_CAP},
    {&Counters::records_other_kind, PT_STAT_RECORDS_OTHER_KIND},
    {&Counters::pc_sample_records, PT_STAT_PC_SAMPLE_RECORDS},
    {&Counters::stacks_dropped, PT_STAT_STACKS_DROPPED},
    {&Counters::stack_errors, PT_STAT_STACK_ERRORS},
    {&Counters::stack_copy_bytes, PT_STAT_STACK_COPY_BYTES},
    {&Counters::stack_copy_errors, PT_STAT_STACK_COPY_ERRORS},
    {&Counters::stack_copies_to_stack_end, PT_STAT_STACK_COPY_SHORT},
    {&Counters::python_no_thread, PT_STAT_PY_NO_THREAD},
    {&Counters::python_read_errors, PT_STAT_PY_READ_ERRORS},
    {&Counters::python_truncated, PT_STAT_PY_TRUNCATED},
    {&Counters::autograd_forward_stacks, PT_STAT_AUTOGRAD_FORWARD_STACKS},
    {&Counters::autograd_linked, PT_STAT_AUTOGRAD_LINKED},
    {&Counters::autograd_forward_missing, PT_STAT_AUTOGRAD_FORWARD_MISSING},
    {&Counters::autograd_read_errors, PT_STAT_AUTOGRAD_READ_ERRORS},
    {&Counters::nvtx_batches, PT_STAT_FIRE_NVTX_EVENT_BATCH},
    {&Counters::nvtx_records_over_cap, PT_STAT_NVTX_OVER_CAP},
    {&Counters::nvtx_read_errors, PT_STAT_READ_ERR_NVTX},
    {&Counters::nvtx_message_faults, PT_STAT_NVTX_MESSAGE_FAULTS},
};
}  // namespace

Summary Tracer::summarize(const uint64_t st[PT_STAT_MAX], double duration,
                          const std::vector<std::string> &libraries) const {
  Summary sum;
  add_counters(&sum, meta_);
  joiner_.add_to(&sum);
  nvtx_.add_to(&sum);
  captures_.fill(&sum, opt_.capture_sites);
  for (const BpfCounter &c : kBpfCounters) sum.*c.field = st[c.slot];
  // Firings minus what arrived: an error the user never saw (its event found no room).
  sum.errors_lost = sum.error_firings > sum.errors ? sum.error_firings - sum.errors : 0;
  sum.stacks_cut_at_non_code = resolver_.cut_at_non_code();
  sum.distinct_stacks = stacks_.size() - StackTable::kFirstReal;
  sum.stack_table_overflows = stacks_.overflowed();
  sum.gpu_ns_matched = profile_.total_ns();
  sum.gpu_time_by_stack = summarize_stacks(profile_, stacks_, joiner_.names(), opt_.top);
  sum.stacks_total = profile_.stacks();
  sum.gpu_time_by_device = devices_.summarize(joiner_.names(), opt_.top);
  sum.gpu_time_by_process = summarize_processes(profile_, processes_, joiner_.names(), opt_.top);
  sum.libraries = libraries;
  sum.duration_s = duration;
  sum.events_per_s = duration > 0 ? static_cast<double>(sum.events) / duration : 0;
  if (malformed_) std::fprintf(stderr, "parcagpu-trace: %" PRIu64 " malformed ring-buffer events\n", malformed_);
  if (opt_.verbose) {
    std::fprintf(stderr, "parcagpu-trace: read errors: args %" PRIu64 ", record pointers %" PRIu64
                 ", records %" PRIu64 ", strings %" PRIu64 ", stall blob %" PRIu64 "\n",
                 st[PT_STAT_READ_ERR_ARG], st[PT_STAT_READ_ERR_RECORD_PTR], st[PT_STAT_READ_ERR_RECORD],
                 st[PT_STAT_READ_ERR_STRING], st[PT_STAT_READ_ERR_BLOB]);
    std::fprintf(stderr, "parcagpu-trace: ELF files opened for symbols %" PRIu64 ", stacks cached %zu\n",
                 symbolizer_.files_loaded(), resolver_.cached());
    if (mmaps_ && mmaps_->is_open())
      std::fprintf(stderr, "parcagpu-trace: mapping records %" PRIu64 ", lost %" PRIu64 "\n", mmaps_->records(),
                   mmaps_->lost());
  }
  return sum;
}

bool Tracer::report(const Summary &s) const {
  auto json = [&](bool json_lines) {
    Json j;
    if (json_lines) j["type"] = "summary";
    j["version"] = PARCAGPU_VERSION;
    j.update(summary_json(s));
    for (const auto &v : extensions_) v->add_json(j);
    return j;
  };
  if (opt_.json || opt_.json_lines) {
    print_line(json(opt_.json_lines));
  } else {
    print_summary(report_out_, s, opt_.verbose);
    for (const auto &v : extensions_) v->print(report_out_);
  }
  bool ok = true;
  errno = 0;
  if (std::fflush(report_out_) != 0 || std::ferror(report_out_)) {  // stdout on a full disk, say
    std::fprintf(stderr, "parcagpu-trace: the report on %s: cannot write it: %s\n",
                 report_out_ == stdout ? "stdout" : "stderr", std::strerror(errno ? errno : EIO));
    ok = false;
  }
  if (!opt_.json_path.empty()) ok &= write_file("--json", opt_.json_path, json_line(json(false)) + "\n");
  if (!opt_.folded_path.empty() || !opt_.svg_path.empty()) {
    const std::vector<FoldedStack> folded = folded_stacks(profile_, stacks_, joiner_.names());
    if (!opt_.folded_path.empty()) ok &= write_file("--folded", opt_.folded_path, folded_text(folded));
    if (!opt_.svg_path.empty()) {
      FlameGraphOptions fo;
      if (opt_.capture_sites) fo.title = "GPU time by launch stack (graph kernels by capture stack)";
      char sub[256];
      std::snprintf(sub, sizeof sub, "%s of GPU time in %" PRIu64 " kernels, %zu stack%s; parcagpu-trace %s",
                    human_ns(s.gpu_ns_matched).c_str(), s.kernels_matched,
                    static_cast<size_t>(s.stacks_total), s.stacks_total == 1 ? "" : "s", PARCAGPU_VERSION);
      fo.subtitle = sub;
      ok &= write_file("--svg", opt_.svg_path, flamegraph_svg(folded, fo));
    }
  }
  if (!opt_.pprof_path.empty()) {
    timespec now{};
    clock_gettime(CLOCK_REALTIME, &now);
    PprofInfo info;
    info.duration_nanos = static_cast<int64_t>(s.duration_s * 1e9);
    info.time_nanos = static_cast<int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec - info.duration_nanos;
    std::vector<PprofPcSample> pc_samples;
    bool with_pc = false;
    for (const auto &v : extensions_) {
      with_pc |= v->has_pprof_samples();
      v->add_pprof(&pc_samples);
    }
    if (with_pc) info.pc_samples = &pc_samples;
    std::string gz;
    if (!gzip_compress(pprof_profile(profile_, stacks_, joiner_.names(), processes_, info), &gz)) {
      std::fprintf(stderr, "parcagpu-trace: --pprof %s: zlib could not compress the profile\n", opt_.pprof_path.c_str());
      ok = false;
    } else {
      ok &= write_file("--pprof", opt_.pprof_path, gz);
    }
  }
  return ok;
}

}  // namespace parcagpu::trace
