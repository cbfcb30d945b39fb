#include "symbolizer.h"

#include <cxxabi.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace parcagpu::trace {

// ---- names ----

std::string demangle(std::string_view name) {
  if (name.size() < 2 || name[0] != '_' || name[1] != 'Z') return std::string(name);
  std::string m(name);
  int status = 0;
  char *d = abi::__cxa_demangle(m.c_str(), nullptr, nullptr, &status);
  std::string out = status == 0 && d ? d : m;
  std::free(d);
  return out;
}

std::string short_function_name(std::string_view f) {
  static constexpr std::string_view kAnon = "(anonymous namespace)";
  static constexpr std::string_view kOperatorChars = "<>=!+-*/%^&|~,";
  std::string s;
  int depth = 0;  // <> () {} [] nesting
  auto ends_with_operator = [&s] {
    return s.size() >= 8 && s.compare(s.size() - 8, 8, "operator") == 0 &&
           (s.size() == 8 || s[s.size() - 9] == ':');
  };
  for (size_t i = 0; i < f.size(); ++i) {
    const char c = f[i];
    if (depth == 0 && c == '(' && f.substr(i, kAnon.size()) == kAnon) {
      s += kAnon;
      i += kAnon.size() - 1;
      continue;
    }
    if (depth == 0 && ends_with_operator()) {  // operator() / operator< / operator new ...
      if (f.substr(i, 2) == "()" || f.substr(i, 2) == "[]") {
        s += f.substr(i, 2);
        ++i;
        continue;
      }
      if (kOperatorChars.find(c) != std::string_view::npos) {
        while (i < f.size() && kOperatorChars.find(f[i]) != std::string_view::npos) s += f[i++];
        --i;
        continue;
      }
      if (c == ' ') {
        s += c;
        continue;
      }
    }
    if (c == '(' && depth == 0) break;  // the parameter list
    if (c == '<' || c == '(' || c == '{' || c == '[') {
      ++depth;
    } else if (c == '>' || c == ')' || c == '}' || c == ']') {
      if (depth > 0) --depth;
    } else if (c == ' ' && depth == 0) {
      s.clear();  // what came before was a return type
      continue;
    }
    s += c;
  }
  return s.empty() ? std::string(f) : s;
}

std::string Frame::name() const {
  if (python) return python_name();
  if (label) return function;
  if (!function.empty()) {
    std::string n = short_function_name(function);
    // "__libc_start_main@@GLIBC_2.34": the symbol version is not part of the function's name.
    if (const size_t at = n.find('@'); at != std::string::npos && at > 0) n.resize(at);
    return n;
  }
  char buf[48];
  std::snprintf(buf, sizeof buf, "+0x%" PRIx64, offset);
  return module + buf;
}

std::string Frame::text() const {
  if (python || label) return name();
  std::string t = name();
  if (line > 0 && !file.empty()) {
    const size_t slash = file.rfind('/');
    t += " (" + (slash == std::string::npos ? file : file.substr(slash + 1)) + ":" +
         std::to_string(line) + ")";
  } else if (!function.empty()) {
    // No line: the offset in the function is what tells two call sites in it apart.
    char buf[48];
    std::snprintf(buf, sizeof buf, "+0x%" PRIx64, offset);
    t += std::string(buf) + " (" + module + ")";
  }
  if (inlined) t += " [inlined]";
  return t;
}

// ---- one ELF file ----

namespace {

char *g_debuginfo_path = nullptr;  // libdwfl's default: ":.debug:/usr/lib/debug"
const Dwfl_Callbacks kCallbacks = {
    dwfl_build_id_find_elf, dwfl_standard_find_debuginfo, dwfl_offline_section_address,
    &g_debuginfo_path};

// The namespaces and classes around a function's definition: "ns::(anonymous namespace)::C::".
std::string die_scope_prefix(Dwarf_Die *die) {
  Dwarf_Die origin, *d = die;
  Dwarf_Attribute attr;
  // An inlined instance points to its abstract definition, a member's definition to its
  // declaration inside the class: the one whose parents are the scopes.
  for (int i = 0; i < 4; ++i) {
    Dwarf_Attribute *a = dwarf_attr(d, DW_AT_abstract_origin, &attr);
    if (!a) a = dwarf_attr(d, DW_AT_specification, &attr);
    if (!a || !dwarf_formref_die(a, &origin)) break;
    d = &origin;
  }
  Dwarf_Die *scopes = nullptr;
  const int n = dwarf_getscopes_die(d, &scopes);
  std::string prefix;
  for (int i = n - 1; i >= 1; --i) {  // outermost first; [0] is the function itself
    const int tag = dwarf_tag(&scopes[i]);
    if (tag != DW_TAG_namespace && tag != DW_TAG_class_type && tag != DW_TAG_structure_type &&
        tag != DW_TAG_union_type)
      continue;
    const char *name = dwarf_diename(&scopes[i]);
    // Nameless: an anonymous namespace, or a lambda's closure type (what holds its operator()).
    prefix += name ? name : tag == DW_TAG_namespace ? "(anonymous namespace)" : "{lambda}";
    prefix += "::";
  }
  std::free(scopes);
  return prefix;
}

// A DIE's name: the linkage name demangled (qualified), else DW_AT_name with the namespaces
// and classes around it (static functions have no linkage name); both followed through
// DW_AT_abstract_origin / DW_AT_specification.
std::string die_function_name(Dwarf_Die *die) {
  Dwarf_Attribute attr;
  const char *linkage = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_linkage_name, &attr));
  if (!linkage) linkage = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &attr));
  if (linkage) return demangle(linkage);
  const char *name = dwarf_diename(die);
  return name ? die_scope_prefix(die) + name : "";
}

bool is_function_scope(Dwarf_Die *die) {
  const int tag = dwarf_tag(die);
  return tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine || tag == DW_TAG_entry_point;
}

std::string basename_of(const std::string &path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

class DwarfImage {
 public:
  // `open_path`: where to read the file (through /proc/PID/root); `path`: its name in frames.
  static std::unique_ptr<DwarfImage> open(const std::string &open_path, const std::string &path) {
    const int fd = ::open(open_path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return nullptr;
    auto img = std::unique_ptr<DwarfImage>(new DwarfImage);
    img->path_ = path;
    img->module_ = basename_of(path);
    img->dwfl_ = dwfl_begin(&kCallbacks);
    if (!img->dwfl_) {
      ::close(fd);
      return nullptr;
    }
    dwfl_report_begin(img->dwfl_);
    // Placed at its link-time addresses (base 0 + p_vaddr): module addresses are file addresses.
    img->mod_ = dwfl_report_elf(img->dwfl_, img->module_.c_str(), open_path.c_str(), fd, 0, true);
    dwfl_report_end(img->dwfl_, nullptr, nullptr);
    if (!img->mod_) {
      ::close(fd);  // consumed only on success
      return nullptr;
    }
    GElf_Addr bias = 0;
    Elf *elf = dwfl_module_getelf(img->mod_, &bias);
    size_t phnum = 0;
    if (!elf || elf_getphdrnum(elf, &phnum) != 0) return nullptr;
    for (size_t i = 0; i < phnum; ++i) {
      GElf_Phdr ph;
      if (gelf_getphdr(elf, static_cast<int>(i), &ph) && ph.p_type == PT_LOAD) img->loads_.push_back(ph);
    }
    return img;
  }

  ~DwarfImage() {
    if (dwfl_) dwfl_end(dwfl_);
  }

  // File offset -> file (link-time) address, through the PT_LOAD segments.
  bool file_address(uint64_t off, uint64_t *addr) const {
    for (const GElf_Phdr &ph : loads_) {
      if (off >= ph.p_offset && off < ph.p_offset + ph.p_filesz) {
        *addr = off - ph.p_offset + ph.p_vaddr;
        return true;
      }
    }
    return false;
  }

  // The frames of the code at file address `addr`, innermost first.
  const std::vector<Frame> &frames(uint64_t addr) {
    auto it = cache_.find(addr);
    if (it != cache_.end()) return it->second;
    if (cache_.size() >= kMaxCached) cache_.clear();
    return cache_.emplace(addr, lookup(addr)).first->second;
  }

 private:
  static constexpr size_t kMaxCached = 1 << 16;
  DwarfImage() = default;

  Frame base_frame() const {
    Frame f;
    f.module = module_;
    f.path = path_;
    return f;
  }

  // The frames of the functions whose scopes hold `pc` in `cu`, innermost first: the inlined
  // instances, each at *loc_file:*loc_line (then set to its call site), up to the first function
  // that is not inlined.
  void add_scope_frames(Dwarf_Die *cu, Dwarf_Addr pc, std::string *loc_file, int *loc_line,
                        std::vector<Frame> *out) {
    Dwarf_Die *scopes = nullptr;
    int n = dwarf_getscopes(cu, pc, &scopes);
    if (n <= 0) return;
    // dwarf_getscopes follows an inlined function to where it is defined; the nesting of the
    // inlined instances at this address comes from the innermost scope's own parents.
    Dwarf_Die innermost = scopes[0];
    std::free(scopes);
    scopes = nullptr;
    n = dwarf_getscopes_die(&innermost, &scopes);
    Dwarf_Files *files = nullptr;
    if (dwarf_getsrcfiles(cu, &files, nullptr) != 0) files = nullptr;
    for (int i = 0; i < n; ++i) {
      Dwarf_Die *die = &scopes[i];
      if (!is_function_scope(die)) continue;
      Frame f = base_frame();
      f.function = die_function_name(die);
      f.file = *loc_file;
      f.line = *loc_line;
      f.inlined = dwarf_tag(die) == DW_TAG_inlined_subroutine;
      out->push_back(std::move(f));
      if (!out->back().inlined) break;
      // The caller's location is the call site of this inlined instance.
      Dwarf_Attribute attr;
      Dwarf_Word v = 0;
      loc_file->clear();
      *loc_line = 0;
      if (files && dwarf_formudata(dwarf_attr(die, DW_AT_call_file, &attr), &v) == 0) {
        const char *file = dwarf_filesrc(files, v, nullptr, nullptr);
        if (file) *loc_file = file;
      }
      if (dwarf_formudata(dwarf_attr(die, DW_AT_call_line, &attr), &v) == 0) *loc_line = static_cast<int>(v);
    }
    std::free(scopes);
  }

  std::vector<Frame> lookup(uint64_t addr) {
    std::vector<Frame> out;
    GElf_Off sym_off = 0;
    GElf_Sym sym;
    const char *sym_name = dwfl_module_addrinfo(mod_, addr, &sym_off, &sym, nullptr, nullptr, nullptr);
    std::string loc_file;
    int loc_line = 0;
    if (Dwfl_Line *l = dwfl_module_getsrc(mod_, addr)) {
      const char *file = dwfl_lineinfo(l, nullptr, &loc_line, nullptr, nullptr, nullptr);
      if (file) loc_file = file;
    }
    Dwarf_Addr bias = 0;
    if (Dwarf_Die *cu = dwfl_module_addrdie(mod_, addr, &bias))
      add_scope_frames(cu, addr - bias, &loc_file, &loc_line, &out);
    if (out.empty() || out.back().inlined) {  // no DWARF function for the outermost code
      Frame f = base_frame();
      f.file = loc_file;
      f.line = loc_line;
      out.push_back(std::move(f));
    }
    Frame &outer = out.back();
    if (sym_name) {
      outer.function = demangle(sym_name);  // the ELF symbol: always qualified
      outer.offset = sym_off;
    } else if (outer.function.empty()) {
      outer.offset = addr;
    }
    return out;
  }

  Dwfl *dwfl_ = nullptr;
  Dwfl_Module *mod_ = nullptr;
  std::string path_, module_;
  std::vector<GElf_Phdr> loads_;
  std::unordered_map<uint64_t, std::vector<Frame>> cache_;
};

// ---- /proc/PID/maps ----

std::vector<MapEntry> parse_proc_maps(std::string_view text) {
  std::vector<MapEntry> out;
  std::istringstream in{std::string(text)};
  std::string line;
  while (std::getline(in, line)) {
    MapEntry m;
    char perms[8] = {}, dev[32] = {};
    unsigned long long start, end, offset, inode;
    int path_at = -1;
    if (std::sscanf(line.c_str(), "%llx-%llx %7s %llx %31s %llu %n", &start, &end, perms, &offset,
                    dev, &inode, &path_at) < 6)
      continue;
    m.start = start;
    m.end = end;
    m.offset = offset;
    m.exec = perms[2] == 'x';
    m.dev = dev;
    m.inode = inode;
    if (path_at > 0 && static_cast<size_t>(path_at) < line.size()) m.path = line.substr(path_at);
    out.push_back(std::move(m));
  }
  std::sort(out.begin(), out.end(), [](const MapEntry &a, const MapEntry &b) { return a.start < b.start; });
  return out;
}

std::string live_path(const std::string &p) {
  static const std::string kDeleted = " (deleted)";
  if (p.size() > kDeleted.size() && p.compare(p.size() - kDeleted.size(), kDeleted.size(), kDeleted) == 0)
    return p.substr(0, p.size() - kDeleted.size());
  return p;
}

bool read_file(const std::string &path, std::string *out) {
  std::ifstream f(path);
  if (!f) return false;
  std::ostringstream ss;
  ss << f.rdbuf();
  *out = ss.str();
  return true;
}

namespace {

bool file_backed(const MapEntry &m) { return !m.path.empty() && m.path[0] == '/' && m.inode != 0; }

}  // namespace

// ---- Symbolizer ----

Symbolizer::Symbolizer() {
  // No network lookups from inside the event loop (libdwfl asks debuginfod when this is set).
  unsetenv("DEBUGINFOD_URLS");
}
Symbolizer::~Symbolizer() = default;

void Symbolizer::set_maps(uint32_t pid, std::vector<MapEntry> maps) {
  std::sort(maps.begin(), maps.end(), [](const MapEntry &a, const MapEntry &b) { return a.start < b.start; });
  Process &p = procs_[pid];
  p.maps = std::move(maps);
  p.fixed = true;
}

Symbolizer::Process &Symbolizer::process(uint32_t pid) {
  Process &p = procs_[pid];
  if (p.complete || p.fixed || p.proc_tried) return p;
  p.proc_tried = true;
  std::string text;
  if (read_file("/proc/" + std::to_string(pid) + "/maps", &text)) {
    p.maps = parse_proc_maps(text);  // a superset of what was reported for it so far
    p.complete = true;
  }
  return p;
}

void Symbolizer::on_exec(uint32_t pid) {
  Process &p = procs_[pid];
  p = Process{};
  p.complete = true;
}

void Symbolizer::on_mmap(uint32_t pid, MapEntry m) {
  if (m.end <= m.start) return;
  std::vector<MapEntry> &maps = procs_[pid].maps;
  // A new mapping replaces whatever it overlaps (unmapped before, or mapped over).
  maps.erase(std::remove_if(maps.begin(), maps.end(),
                            [&](const MapEntry &e) { return e.start < m.end && m.start < e.end; }),
             maps.end());
  auto at = std::upper_bound(maps.begin(), maps.end(), m.start,
                             [](uint64_t a, const MapEntry &e) { return a < e.start; });
  maps.insert(at, std::move(m));
}

void Symbolizer::on_fork(uint32_t parent, uint32_t child) {
  auto it = procs_.find(parent);
  if (it == procs_.end()) {
    procs_.erase(child);  // unknown parent: the child is read from /proc when needed
    return;
  }
  Process copy = it->second;
  copy.exited_at = 0;
  copy.reread_this_stack = false;
  procs_[child] = std::move(copy);
}

void Symbolizer::on_exit(uint32_t pid, uint64_t now_ns) {
  auto it = procs_.find(pid);
  if (it != procs_.end()) it->second.exited_at = now_ns ? now_ns : 1;
}

std::vector<uint32_t> Symbolizer::prune(uint64_t now_ns, uint64_t keep_ns) {
  std::vector<uint32_t> gone;
  for (auto it = procs_.begin(); it != procs_.end();) {
    if (it->second.exited_at && now_ns - it->second.exited_at > keep_ns) {
      gone.push_back(it->first);
      it = procs_.erase(it);
    } else {
      ++it;
    }
  }
  return gone;
}

const MapEntry *Symbolizer::find_map(uint32_t pid, uint64_t addr, bool may_reread) {
  Process &p = process(pid);
  auto lookup = [&]() -> const MapEntry * {
    auto it = std::upper_bound(p.maps.begin(), p.maps.end(), addr,
                               [](uint64_t a, const MapEntry &m) { return a < m.start; });
    if (it == p.maps.begin()) return nullptr;
    --it;
    return addr < it->end ? &*it : nullptr;
  };
  const MapEntry *m = lookup();
  if (!m && may_reread && !p.fixed && !p.reread_this_stack) {
    // Loaded since the snapshot (dlopen): read the maps again, once per stack.
    p.reread_this_stack = true;
    std::string text;
    if (read_file("/proc/" + std::to_string(pid) + "/maps", &text)) {
      p.maps = parse_proc_maps(text);
      m = lookup();
    }
  }
  return m;
}

DwarfImage *Symbolizer::image(uint32_t pid, const MapEntry &m) {
  if (!file_backed(m)) return nullptr;
  const std::string path = live_path(m.path);
  const std::string key = path + "|" + m.dev + "|" + std::to_string(m.inode);
  auto it = images_.find(key);
  if (it != images_.end()) return it->second.get();
  // Through the process's root first: its own view of the file system (containers).
  std::unique_ptr<DwarfImage> img = DwarfImage::open("/proc/" + std::to_string(pid) + "/root" + path, path);
  if (!img) img = DwarfImage::open(path, path);
  if (img) ++files_loaded_;
  DwarfImage *raw = img.get();
  images_.emplace(key, std::move(img));  // a failure is cached too
  return raw;
}

std::vector<Frame> Symbolizer::symbolize(uint32_t pid, uint64_t addr, bool is_return) {
  const MapEntry *m = find_map(pid, addr, true);
  Frame f;
  if (!m) {
    f.module = "[unmapped]";
    f.offset = addr;
    return {f};
  }
  if (!file_backed(*m)) {
    f.module = m->path.empty() ? "[anon]" : m->path;
    f.offset = addr - m->start;
    return {f};
  }
  f.path = live_path(m->path);
  f.module = f.path.substr(f.path.rfind('/') + 1);
  const uint64_t off = addr - m->start + m->offset;
  f.offset = off;
  DwarfImage *img = image(pid, *m);
  uint64_t faddr;
  // A return address points after the call: the call itself is one byte before.
  if (!img || !img->file_address(is_return && off > 0 ? off - 1 : off, &faddr)) return {f};
  std::vector<Frame> frames = img->frames(faddr);
  if (is_return && frames.back().function.empty()) frames.back().offset = faddr + 1;
  if (is_return && !frames.back().function.empty()) ++frames.back().offset;
  return frames;
}

std::vector<Frame> Symbolizer::symbolize_stack(uint32_t pid, const uint64_t *ips, size_t n) {
  process(pid).reread_this_stack = false;
  std::vector<Frame> out;
  for (size_t i = 0; i < n; ++i) {
    if (ips[i] == 0) break;
    for (Frame &f : symbolize(pid, ips[i], i > 0)) out.push_back(std::move(f));
  }
  return out;
}

}  // namespace parcagpu::trace
