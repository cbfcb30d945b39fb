#include "autograd.h"
#include "elf_walk.h"

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <regex>

namespace parcagpu::trace {
namespace {

// CHECK ON THE DEVICE (scripts/autograd-layout-check.py). One row per torch major.minor.
// 2.11: checked against torch 2.11.0+cu130 (docs/measurements/2026-11-26g-autograd): both symbols
// exported, sequence_nr_ at 24, the vtable pointer 16 bytes into the _ZTV symbol. Not yet seen: a
// real backward's launches linked (tools/bench/torch_autograd_lines.py on a GPU).
constexpr AutogradLayout kLayouts[] = {
    {2, 11, "_ZN2at15sequence_number17get_and_incrementEv",
     "_ZN5torch8autograd6Engine17evaluate_functionERSt10shared_ptrINS0_9GraphTaskEEPNS0_4NodeERNS0_"
     "11InputBufferERKS2_INS0_10ReadyQueueEE",
     24},
};

std::string basename_of(const std::string &path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

const AutogradLayout *autograd_layout(int major, int minor) {
  for (const AutogradLayout &l : kLayouts)
    if (l.major == major && l.minor == minor) return &l;
  return nullptr;
}

bool is_libtorch_cpu(const std::string &path) {
  return basename_of(live_path(path)).compare(0, 15, "libtorch_cpu.so") == 0;
}

bool parse_torch_version(const std::string &text, int *major, int *minor, std::string *version) {
  static const std::regex re(R"(__version__\s*=\s*['"](\d+)\.(\d+)([^'"]*)['"])");
  std::smatch m;
  if (!std::regex_search(text, m, re)) return false;
  *major = std::stoi(m[1].str());
  *minor = std::stoi(m[2].str());
  if (version) *version = m[1].str() + "." + m[2].str() + m[3].str();
  return true;
}

bool torch_version_of(const std::string &root, const std::string &lib_path, int *major, int *minor,
                      std::string *version) {
  // .../torch/lib/libtorch_cpu.so -> .../torch/version.py
  const std::string lib = live_path(lib_path);
  const size_t slash = lib.rfind('/');
  if (slash == std::string::npos) return false;
  const std::string dir = lib.substr(0, slash);
  const size_t up = dir.rfind('/');
  if (up == std::string::npos) return false;
  std::string text;
  if (!read_file(root + dir.substr(0, up) + "/version.py", &text) &&
      !(root.empty() || !read_file(dir.substr(0, up) + "/version.py", &text)))
    return false;
  if (text.empty()) return false;
  return parse_torch_version(text, major, minor, version);
}

std::string node_class_from_vtable(const std::string &d) {
  constexpr const char kPrefix[] = "vtable for ";
  if (d.compare(0, sizeof kPrefix - 1, kPrefix) != 0) return "";
  const std::string cls = d.substr(sizeof kPrefix - 1);
  // The last "::" outside template arguments.
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i + 1 < cls.size(); ++i) {
    if (cls[i] == '<') ++depth;
    else if (cls[i] == '>') --depth;
    else if (depth == 0 && cls[i] == ':' && cls[i + 1] == ':') start = i + 2;
  }
  return cls.substr(start);
}

const AutogradNames::File *AutogradNames::file(uint32_t pid, const MapEntry &m) {
  const std::string key = live_path(m.path) + "|" + m.dev + "|" + std::to_string(m.inode);
  auto it = files_.find(key);
  if (it != files_.end()) return it->second ? &*it->second : nullptr;
  if (files_.size() >= 512) files_.clear();
  File f;
  bool ok = false;
  for (const std::string &path : {"/proc/" + std::to_string(pid) + "/root" + live_path(m.path), live_path(m.path)}) {
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    elf_version(EV_CURRENT);
    Elf *elf = elf_begin(fd, ELF_C_READ, nullptr);
    if (elf && elf_kind(elf) == ELF_K_ELF) {
      ok = true;
      for_each_load_segment(elf, [&](const GElf_Phdr &ph) {
        f.loads.push_back({ph.p_vaddr, ph.p_offset, ph.p_filesz, ph.p_memsz});
      });
      for_each_defined_symbol(elf, [&](const GElf_Sym &sym, const char *name) {
        if (sym.st_size && std::strncmp(name, "_ZTV", 4) == 0) f.vtables[sym.st_value] = {sym.st_size, name};
      });
    }
    if (elf) elf_end(elf);
    close(fd);
    if (ok) break;
  }
  it = files_.emplace(key, ok ? std::optional<File>(std::move(f)) : std::nullopt).first;
  return it->second ? &*it->second : nullptr;
}

std::string AutogradNames::name(uint32_t pid, uint64_t vtable, const std::vector<MapEntry> &maps) {
  auto &cache = names_[pid];
  if (auto it = cache.find(vtable); it != cache.end()) return it->second;
  std::string out;
  for (const MapEntry &m : maps) {
    if (!m.exec || m.path.empty() || m.path[0] != '/') continue;
    const File *f = file(pid, m);
    if (!f) continue;
    // The segment that holds this mapping's file offset places the file's addresses.
    const File::Seg *exec = nullptr;
    for (const File::Seg &s : f->loads)
      if (m.offset >= (s.offset & ~0xfffull) && m.offset < s.offset + s.filesz) exec = &s;
    if (!exec) continue;
    const uint64_t bias = m.start - m.offset - (exec->vaddr - exec->offset);
    const uint64_t v = vtable - bias;
    auto sym = f->vtables.upper_bound(v);
    if (sym == f->vtables.begin()) continue;
    --sym;
    if (v >= sym->first + sym->second.first) continue;
    out = node_class_from_vtable(demangle(sym->second.second));
    if (!out.empty()) break;
  }
  if (out.empty()) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "node@0x%" PRIx64, vtable);
    out = buf;
  }
  if (cache.size() < 4096) cache.emplace(vtable, out);
  return out;
}

std::vector<Frame> autograd_stack(const std::vector<Frame> &native, const std::string &node,
                                  const std::vector<Frame> &forward, bool linked) {
  std::vector<Frame> out;
  size_t end = native.size();
  for (size_t i = 0; i < native.size(); ++i)
    if (native[i].function.find("torch::autograd::Engine::evaluate_function") != std::string::npos) {
      end = i + 1;
      break;
    }
  out.assign(native.begin(), native.begin() + static_cast<std::ptrdiff_t>(end));
  Frame f;
  f.function = "[backward] " + node;
  f.module = "[backward]";
  f.label = true;
  out.push_back(f);
  out.insert(out.end(), forward.begin(), forward.end());
  if (!linked) out.insert(out.end(), native.begin() + static_cast<std::ptrdiff_t>(end), native.end());
  return out;
}

}  // namespace parcagpu::trace
