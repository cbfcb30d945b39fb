#include "pprof.h"

#include <zlib.h>

#include <map>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "profile.pb.h"

namespace parcagpu::trace {
namespace {

namespace pb = perftools::profiles;

// Interns strings, functions, mappings and locations into one Profile.
class Builder {
 public:
  explicit Builder(pb::Profile *p) : p_(p) { str(""); }

  int64_t str(const std::string &s) {
    auto [it, fresh] = strings_.try_emplace(s, static_cast<int64_t>(strings_.size()));
    if (fresh) p_->add_string_table(s);
    return it->second;
  }

  uint64_t function(const std::string &name, const std::string &system_name, const std::string &file) {
    auto [it, fresh] = functions_.try_emplace(std::make_tuple(name, system_name, file), functions_.size() + 1);
    if (fresh) {
      pb::Function *f = p_->add_function();
      f->set_id(it->second);
      f->set_name(str(name));
      f->set_system_name(str(system_name));
      f->set_filename(str(file));
    }
    return it->second;
  }

  // Per module file (or pseudo module such as "[vdso]"): pprof groups and filters by it.
  // `has_inlines`: the location holds inlined calls (the holder frame itself is not inlined).
  uint64_t mapping(const Frame &f, bool has_inlines) {
    const std::string &file = f.path.empty() ? f.module : f.path;
    if (file.empty()) return 0;
    auto [it, fresh] = mappings_.try_emplace(file, mappings_.size() + 1);
    if (fresh) {
      pb::Mapping *m = p_->add_mapping();
      m->set_id(it->second);
      m->set_filename(str(file));
    }
    pb::Mapping *m = p_->mutable_mapping(static_cast<int>(it->second - 1));
    if (!f.function.empty()) m->set_has_functions(true);
    if (!f.file.empty()) m->set_has_filenames(true);
    if (f.line > 0) m->set_has_line_numbers(true);
    if (has_inlines) m->set_has_inline_frames(true);
    return it->second;
  }

  // One location per physical frame: `frames` holds its inlined calls innermost first and the
  // function that holds the code last. Equal frame groups share a location.
  uint64_t location(const Frame *frames, size_t n) {
    std::string key;
    // text(): two call sites in one function are two locations, with a line or without.
    for (size_t i = 0; i < n; ++i) key += frames[i].text() + '\x1f' + frames[i].path + '\x1e';
    auto [it, fresh] = locations_.try_emplace(key, locations_.size() + 1);
    if (!fresh) return it->second;
    pb::Location *l = p_->add_location();
    l->set_id(it->second);
    l->set_mapping_id(mapping(frames[n - 1], n > 1));
    for (size_t i = 0; i < n; ++i) {
      const Frame &f = frames[i];
      pb::Line *line = l->add_line();
      line->set_function_id(function(f.name(), f.function.empty() ? f.name() : f.function, f.file));
      line->set_line(f.line);
    }
    return it->second;
  }

  // A PC of a kernel: its source line, or the offset where the cubin has no line for it.
  uint64_t pc_location(const PprofPcSample &x) {
    Frame f;
    f.function = x.kernel;
    f.module = x.module;
    f.file = x.file;
    f.line = x.line;
    f.offset = x.pc_offset;
    return location(&f, 1);
  }

  uint64_t pseudo_location(const char *name) {
    Frame f;
    f.function = name;
    return location(&f, 1);
  }

 private:
  pb::Profile *p_;
  std::unordered_map<std::string, int64_t> strings_;
  std::map<std::tuple<std::string, std::string, std::string>, uint64_t> functions_;
  std::unordered_map<std::string, uint64_t> mappings_, locations_;
};

// One profile being written: its header, then the kernels' samples, then the PC samples.
class ProfileWriter {
 public:
  ProfileWriter(const StackTable &stacks, const ProcessTable &processes, const PprofInfo &info)
      : b_(&p_), stacks_(stacks), processes_(processes), info_(info) {
    add_header();
    kernel_key_ = b_.str("kernel"), pid_key_ = b_.str("pid"), comm_key_ = b_.str("comm");
    rank_key_ = b_.str("rank"), local_rank_key_ = b_.str("local_rank");
    device_key_ = b_.str("device"), stall_key_ = b_.str("stall_reason");
  }

  // One sample per (stack, kernel, process, device): `pprof -tagfocus=rank=1`, `-tagshow=comm`,
  // Parca's and Pyroscope's label filters tell the ranks of one job apart.
  void add_kernels(const GpuProfile &gp, const NameTable &names) {
    for (const GpuProfile::Cell &c : gp.cells()) {
      pb::Sample *s = p_.add_sample();
      for (uint64_t id : locations(c.stack_id)) s->add_location_id(id);
      s->add_value(static_cast<int64_t>(c.kernels));
      s->add_value(static_cast<int64_t>(c.gpu_ns));
      if (info_.pc_samples) s->add_value(0), s->add_value(0);
      str_label(s, kernel_key_, names.demangled(c.kernel));
      num_label(s, device_key_, c.origin.device);
      if (c.origin.process >= processes_.size()) continue;  // no process known: no process labels
      process_labels(s, processes_.info(c.origin.process));
    }
  }

  // The PC samples: the process of each by its pid (the latest process of that pid).
  void add_pc_samples(const std::vector<PprofPcSample> &samples) {
    std::unordered_map<uint32_t, const ProcessInfo *> by_pid;
    for (size_t i = 0; i < processes_.size(); ++i)
      by_pid[processes_.info(static_cast<uint32_t>(i)).pid] =
          &processes_.info(static_cast<uint32_t>(i));
    for (const PprofPcSample &x : samples) {
      pb::Sample *s = p_.add_sample();
      s->add_location_id(b_.pc_location(x));
      s->add_value(0);
      s->add_value(0);
      s->add_value(static_cast<int64_t>(x.samples));
      s->add_value(static_cast<int64_t>(x.gpu_ns));
      str_label(s, stall_key_, x.stall);
      str_label(s, kernel_key_, x.kernel);
      if (x.device >= 0) num_label(s, device_key_, x.device);
      if (auto it = by_pid.find(x.pid); it != by_pid.end()) {
        process_labels(s, *it->second);
      } else {
        num_label(s, pid_key_, x.pid);
      }
    }
  }

  std::string serialized() const { return p_.SerializeAsString(); }

 private:
  void add_sample_type(const char *type, const char *unit) {
    pb::ValueType *t = p_.add_sample_type();
    t->set_type(b_.str(type));
    t->set_unit(b_.str(unit));
  }

  // The count first and the time last, as pprof's convention has it; the time is the default.
  void add_header() {
    add_sample_type("kernels", "count");
    add_sample_type("gpu", "nanoseconds");
    if (info_.pc_samples) {
      add_sample_type("pc_samples", "count");
      add_sample_type("pc_gpu", "nanoseconds");
    }
    p_.mutable_period_type()->set_type(b_.str("gpu"));
    p_.mutable_period_type()->set_unit(b_.str("nanoseconds"));
    p_.set_period(1);  // every kernel is counted: nothing is sampled
    p_.set_default_sample_type(b_.str("gpu"));
    p_.set_time_nanos(info_.time_nanos);
    p_.set_duration_nanos(info_.duration_nanos);
    p_.add_comment(b_.str("GPU time by CUDA launch stack: parcagpu-trace"));
  }

  void str_label(pb::Sample *s, int64_t key, const std::string &v) {
    pb::Label *l = s->add_label();
    l->set_key(key);
    l->set_str(b_.str(v));
  }

  void num_label(pb::Sample *s, int64_t key, int64_t v) {
    pb::Label *l = s->add_label();
    l->set_key(key);
    l->set_num(v);
  }

  void process_labels(pb::Sample *s, const ProcessInfo &info) {
    num_label(s, pid_key_, info.pid);
    if (!info.comm.empty()) str_label(s, comm_key_, info.comm);
    if (info.rank) num_label(s, rank_key_, *info.rank);
    if (info.local_rank) num_label(s, local_rank_key_, *info.local_rank);
  }

  // The stack's locations, leaf first: one per physical frame, its inlined calls in it.
  const std::vector<uint64_t> &locations(uint32_t stack_id) {
    auto [it, fresh] = locations_of_.try_emplace(stack_id);
    if (!fresh) return it->second;
    if (const char *pseudo = StackTable::pseudo_name(stack_id)) {
      it->second.push_back(b_.pseudo_location(pseudo));
    } else {
      const std::vector<Frame> &fs = stacks_.frames(stack_id);  // innermost first
      size_t start = 0;
      for (size_t i = 0; i < fs.size(); ++i) {
        if (fs[i].inlined && i + 1 < fs.size()) continue;  // inlined into the next frame
        it->second.push_back(b_.location(&fs[start], i - start + 1));
        start = i + 1;
      }
    }
    return it->second;
  }

  pb::Profile p_;
  Builder b_;
  const StackTable &stacks_;
  const ProcessTable &processes_;
  const PprofInfo &info_;
  int64_t kernel_key_, pid_key_, comm_key_, rank_key_, local_rank_key_, device_key_, stall_key_;
  std::unordered_map<uint32_t, std::vector<uint64_t>> locations_of_;  // stack id -> leaf first
};

}  // namespace

std::string pprof_profile(const GpuProfile &gp, const StackTable &stacks, const NameTable &names,
                          const ProcessTable &processes, const PprofInfo &info) {
  ProfileWriter w(stacks, processes, info);
  w.add_kernels(gp, names);
  if (info.pc_samples) w.add_pc_samples(*info.pc_samples);
  return w.serialized();
}

bool gzip_compress(const std::string &data, std::string *out) {
  z_stream z{};
  // windowBits 15 + 16: a gzip header and trailer rather than zlib's.
  if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) return false;
  out->resize(deflateBound(&z, data.size()) + 32);
  z.next_in = reinterpret_cast<Bytef *>(const_cast<char *>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef *>(out->data());
  z.avail_out = static_cast<uInt>(out->size());
  const int rc = deflate(&z, Z_FINISH);
  out->resize(z.total_out);
  deflateEnd(&z);
  return rc == Z_STREAM_END;
}

}  // namespace parcagpu::trace
