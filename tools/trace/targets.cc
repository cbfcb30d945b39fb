#include "targets.h"

#include <dirent.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <cerrno>
#include <cinttypes>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "parcagpu/abi.h"
#include "privileges.h"
#include "sdt_note_reader.h"

namespace parcagpu::trace {
namespace {

std::string dev_string(dev_t d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%02x:%02x", major(d), minor(d));
  return buf;
}

bool handled(const std::string &probe) {
  for (const char *h : handled_probes())
    if (probe == h) return true;
  return false;
}

std::vector<uint32_t> all_pids() {
  std::vector<uint32_t> pids;
  DIR *d = opendir("/proc");
  if (!d) return pids;
  while (dirent *e = readdir(d)) {
    char *end = nullptr;
    const unsigned long p = std::strtoul(e->d_name, &end, 10);
    if (end != e->d_name && *end == 0 && p > 0 && p <= UINT32_MAX) pids.push_back(static_cast<uint32_t>(p));
  }
  closedir(d);
  return pids;
}

// Calls visit(pid, mapping) for each mapping in /proc/PID/maps of process `pid` (0: of every
// process) until it returns true; returns whether it did.
template <typename Visit>
bool any_mapping(int pid, Visit &&visit) {
  std::vector<uint32_t> pids;
  if (pid > 0)
    pids.push_back(static_cast<uint32_t>(pid));
  else
    pids = all_pids();
  for (uint32_t p : pids) {
    std::string text;
    if (!read_file("/proc/" + std::to_string(p) + "/maps", &text)) continue;
    for (const MapEntry &m : parse_proc_maps(text))
      if (visit(p, m)) return true;
  }
  return false;
}

}  // namespace

bool parcagpu_probes(const std::string &path, std::vector<std::string> *probes, std::string *error,
                     bool verbose) {
  std::vector<SdtNote> notes;
  probes->clear();
  if (!read_sdt_notes(path, &notes, error)) return false;
  for (const SdtNote &n : notes) {
    if (n.provider != PARCAGPU_PROVIDER) continue;
    if (verbose)
      std::fprintf(stderr, "parcagpu-trace: note %s:%s pc=0x%" PRIx64 " semaphore=0x%" PRIx64 " args=%s\n",
                   n.provider.c_str(), n.name.c_str(), n.pc, n.semaphore, n.args.c_str());
    bool dup = false;
    for (const std::string &p : *probes) dup |= p == n.name;
    if (!dup) probes->push_back(n.name);
  }
  if (verbose && !probes->empty()) {
    for (const std::string &p : *probes)
      if (!handled(p)) std::fprintf(stderr, "parcagpu-trace: probe %s not handled, not attached\n", p.c_str());
    for (const char *h : handled_probes()) {
      bool present = false;
      for (const std::string &p : *probes) present |= p == h;
      if (!present)
        std::fprintf(stderr, "parcagpu-trace: probe %s not in %s (an older library?), not attached\n",
                     h, path.c_str());
    }
  }
  return true;
}

bool Targets::attach(Library lib, std::string *error, int *err) {
  if (before_attach && !before_attach(lib, error)) {
    *err = EINVAL;
    return false;
  }
  const int n = bpf_.attach(lib.path, opt_.pid, lib.probes, error, err);
  if (n < 0) {
    if (std::string hint = privilege_hint(Step::AttachUprobe, *err); !hint.empty()) *error += "; " + hint;
    return false;
  }
  attached_ += n;
  if (on_attached) on_attached(lib);
  if (lib.pid)
    std::fprintf(stderr, "parcagpu-trace: attached %d probes to %s (found in process %u)\n", n,
                 lib.shown.c_str(), lib.pid);
  else
    std::fprintf(stderr, "parcagpu-trace: attached %d probes to %s\n", n, lib.shown.c_str());
  std::fflush(stderr);
  libs_.push_back(std::move(lib));
  return true;
}

bool Targets::consider(uint32_t pid, const std::string &mapped, bool report_errors) {
  const std::string path = live_path(mapped);
  // The process's own view of its file (containers); the plain path once it has gone.
  std::string open_path = "/proc/" + std::to_string(pid) + "/root" + path;
  struct stat st {};
  if (stat(open_path.c_str(), &st) != 0) {
    open_path = path;
    if (stat(open_path.c_str(), &st) != 0) return false;
  }
  if (!checked_.insert({st.st_dev, st.st_ino}).second) return false;
  Library lib;
  std::string error;
  if (!parcagpu_probes(open_path, &lib.probes, &error, opt_.verbose) || lib.probes.empty()) return false;
  lib.path = open_path;
  lib.shown = path;
  lib.dev = st.st_dev;
  lib.ino = st.st_ino;
  lib.pid = pid;
  int err = 0;
  if (!attach(std::move(lib), &error, &err)) {
    if (report_errors) std::fprintf(stderr, "parcagpu-trace: %s\n", error.c_str());
    return false;
  }
  return true;
}

std::string cgroup_v2_path(const std::string &dir) {
  char real[PATH_MAX];
  if (!realpath(dir.c_str(), real)) return "";
  std::ifstream f("/proc/self/mountinfo");
  std::string line, best;
  while (std::getline(f, line)) {
    // id parent maj:min root mount-point options ... - fstype source super-options
    std::istringstream in(line);
    std::string id, parent, dev, root, mount;
    in >> id >> parent >> dev >> root >> mount;
    const size_t dash = line.find(" - ");
    if (dash == std::string::npos || line.compare(dash + 3, 8, "cgroup2 ") != 0) continue;
    const std::string r(real);
    if (r.compare(0, mount.size(), mount) == 0 && (r.size() == mount.size() || r[mount.size()] == '/') &&
        mount.size() > best.size())
      best = mount;
  }
  if (best.empty()) return "";
  const std::string rel = std::string(real).substr(best.size());
  return rel.empty() ? "/" : rel;
}

bool Targets::in_cgroup(uint32_t pid) const {
  if (cgroup_rel_.empty() || cgroup_rel_ == "/") return true;
  std::string text;
  if (!read_file("/proc/" + std::to_string(pid) + "/cgroup", &text)) return false;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, 3, "0::") != 0) continue;
    const std::string path = line.substr(3);
    return path.compare(0, cgroup_rel_.size(), cgroup_rel_) == 0 &&
           (path.size() == cgroup_rel_.size() || path[cgroup_rel_.size()] == '/');
  }
  return false;
}

void Targets::on_mapping(uint32_t pid, const MapEntry &m) {
  if (!discovering() || m.path.empty() || m.path[0] != '/' || m.inode == 0) return;
  if (opt_.pid > 0 && pid != static_cast<uint32_t>(opt_.pid)) return;
  if (!in_cgroup(pid)) return;
  if (!seen_maps_.insert({m.dev, m.inode}).second) return;  // this file was looked at
  consider(pid, m.path, true);
}

void Targets::scan_processes() {
  any_mapping(opt_.pid, [this](uint32_t pid, const MapEntry &m) {
    if (m.exec) on_mapping(pid, m);
    return false;
  });
}

void Targets::rescan(uint64_t now_ns) {
  if (!discovering() || now_ns - last_scan_ns_ < 2'000'000'000ull) return;
  last_scan_ns_ = now_ns;
  scan_processes();
}

bool Targets::start(std::string *error, int *err) {
  if (!opt_.cgroup.empty()) {
    cgroup_rel_ = cgroup_v2_path(opt_.cgroup);
    if (cgroup_rel_.empty()) {
      *err = EINVAL;
      *error = opt_.cgroup + " is not a directory of a cgroup v2 file system";
      return false;
    }
  }
  if (!discovering()) return start_with_lib(error, err);
  scan_processes();
  if (libs_.empty()) {
    if (opt_.pid > 0)
      std::fprintf(stderr, "parcagpu-trace: warning: process %d has not loaded a library with "
                   "parcagpu probes (yet); waiting for it to load one\n", opt_.pid);
    else if (!opt_.cgroup.empty())
      std::fprintf(stderr, "parcagpu-trace: warning: no process in %s has loaded a library with "
                   "parcagpu probes; waiting for one\n", opt_.cgroup.c_str());
    else
      std::fprintf(stderr, "parcagpu-trace: warning: no running process has loaded a library "
                   "with parcagpu probes; waiting for one (-l LIB names a file)\n");
    std::fflush(stderr);
  }
  return true;
}

bool Targets::start_with_lib(std::string *error, int *err) {
  char real[PATH_MAX];
  if (!realpath(opt_.lib.c_str(), real)) {
    *err = errno;
    *error = "cannot open " + opt_.lib + ": " + std::strerror(*err);
    return false;
  }
  Library lib;
  lib.path = real;
  lib.shown = opt_.lib;
  if (!parcagpu_probes(lib.path, &lib.probes, error, opt_.verbose)) {
    *err = ENOENT;
    return false;
  }
  if (lib.probes.empty()) {
    *err = ENOENT;
    *error = lib.path + " has no USDT probes of provider '" PARCAGPU_PROVIDER "'";
    return false;
  }
  struct stat st {};
  stat(lib.path.c_str(), &st);
  lib.dev = st.st_dev;
  lib.ino = st.st_ino;
  // Does any process map it now? (Uprobes cover later ones; say so when none does yet.)
  const std::string dev = dev_string(st.st_dev);
  const bool mapped = any_mapping(opt_.pid, [&](uint32_t, const MapEntry &m) {
    return m.inode == st.st_ino && m.dev == dev;
  });
  const std::string shown = lib.path;
  if (!attach(std::move(lib), error, err)) return false;
  if (!mapped) {
    if (opt_.pid > 0)
      std::fprintf(stderr, "parcagpu-trace: warning: process %d has not loaded %s (yet)\n", opt_.pid,
                   shown.c_str());
    else
      std::fprintf(stderr, "parcagpu-trace: warning: no running process has loaded %s; processes "
                   "that load this file later are traced (a copy elsewhere is another file: "
                   "leave out -l to find every copy)\n", shown.c_str());
    std::fflush(stderr);
  }
  return true;
}

}  // namespace parcagpu::trace
