#include "symbolizer.h"

#include <cxxabi.h>
#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace parcagpu::trace {

// ---- ELF files ----

// A read-only mapping of a whole file.
class MappedFile {
 public:
  static std::unique_ptr<MappedFile> open(const std::string &path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return nullptr;
    struct stat st {};
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < static_cast<off_t>(sizeof(Elf64_Ehdr))) {
      ::close(fd);
      return nullptr;
    }
    void *p = mmap(nullptr, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);
    if (p == MAP_FAILED) return nullptr;
    auto f = std::unique_ptr<MappedFile>(new MappedFile);
    f->data_ = static_cast<const uint8_t *>(p);
    f->size_ = static_cast<size_t>(st.st_size);
    return f;
  }
  ~MappedFile() {
    if (data_) munmap(const_cast<uint8_t *>(data_), size_);
  }
  const uint8_t *data() const { return data_; }
  size_t size() const { return size_; }
  bool has(uint64_t off, uint64_t n) const { return off <= size_ && n <= size_ - off; }

 private:
  MappedFile() = default;
  const uint8_t *data_ = nullptr;
  size_t size_ = 0;
};

class ElfImage {
 public:
  struct Sym {
    uint64_t addr;
    uint64_t size;
    const char *name;  // in a mapped string table
  };

  // Loads `path` (as opened; `debug_root` prefixes the separate debug file lookup).
  static std::unique_ptr<ElfImage> load(const std::string &path, const std::string &debug_root) {
    auto img = std::unique_ptr<ElfImage>(new ElfImage);
    img->file_ = MappedFile::open(path);
    if (!img->file_ || !img->parse_headers()) return nullptr;
    bool have_symtab = img->read_symbols(*img->file_, SHT_SYMTAB);
    img->read_symbols(*img->file_, SHT_DYNSYM);
    if (!have_symtab && img->build_id_.size() > 2) {
      // A local separate debug file (e.g. from a -dbgsym package): its .symtab has the locals.
      const std::string rel = "/usr/lib/debug/.build-id/" + img->build_id_.substr(0, 2) + "/" +
                              img->build_id_.substr(2) + ".debug";
      for (const std::string &p : {debug_root + rel, rel}) {
        auto dbg = MappedFile::open(p);
        if (dbg && img->read_symbols(*dbg, SHT_SYMTAB)) {
          img->debug_ = std::move(dbg);
          break;
        }
      }
    }
    std::sort(img->syms_.begin(), img->syms_.end(), [](const Sym &a, const Sym &b) {
      return a.addr != b.addr ? a.addr < b.addr : a.size > b.size;
    });
    img->syms_.erase(std::unique(img->syms_.begin(), img->syms_.end(),
                                 [](const Sym &a, const Sym &b) { return a.addr == b.addr; }),
                     img->syms_.end());
    img->fp_.assign(img->syms_.size(), 0);
    img->demangled_.resize(img->syms_.size());
    return img;
  }

  const std::string &build_id() const { return build_id_; }

  // File offset -> link-time virtual address (through the PT_LOAD segments).
  bool vaddr_of(uint64_t off, uint64_t *vaddr) const {
    for (const auto &ph : loads_) {
      if (off >= ph.p_offset && off < ph.p_offset + ph.p_filesz) {
        *vaddr = off - ph.p_offset + ph.p_vaddr;
        return true;
      }
    }
    return false;
  }
  bool offset_of(uint64_t vaddr, uint64_t *off) const {
    for (const auto &ph : loads_) {
      if (vaddr >= ph.p_vaddr && vaddr < ph.p_vaddr + ph.p_filesz) {
        *off = vaddr - ph.p_vaddr + ph.p_offset;
        return true;
      }
    }
    return false;
  }

  // Index of the function symbol covering vaddr, or -1.
  long find(uint64_t vaddr) const {
    auto it = std::upper_bound(syms_.begin(), syms_.end(), vaddr,
                               [](uint64_t v, const Sym &s) { return v < s.addr; });
    for (int steps = 0; it != syms_.begin() && steps < 4; ++steps) {
      --it;
      if (vaddr < it->addr + std::max<uint64_t>(it->size, 1)) return it - syms_.begin();
    }
    return -1;
  }
  const Sym &sym(long i) const { return syms_[i]; }

  const std::string &demangled(long i) {
    std::string &d = demangled_[i];
    if (d.empty()) {
      int status = 0;
      char *s = abi::__cxa_demangle(syms_[i].name, nullptr, nullptr, &status);
      d = status == 0 && s ? s : syms_[i].name;
      std::free(s);
    }
    return d;
  }

  // The file's bytes [off, off + n), clipped to the file.
  size_t bytes(uint64_t off, uint8_t *out, size_t n) const {
    if (off >= file_->size()) return 0;
    n = std::min<uint64_t>(n, file_->size() - off);
    std::memcpy(out, file_->data() + off, n);
    return n;
  }

  CodeView::Tri keeps_frame_pointer(long i) {
    if (fp_[i] == 0) {
      fp_[i] = 2;  // unknown
      uint64_t off;
      uint8_t code[64];
      if (offset_of(syms_[i].addr, &off)) {
        size_t want = sizeof code;
        if (syms_[i].size) want = std::min<uint64_t>(want, syms_[i].size);
        const size_t n = bytes(off, code, want);
        if (n > 0) fp_[i] = sets_up_frame_pointer(code, n) ? 1 : 3;
      }
    }
    return fp_[i] == 1 ? CodeView::Tri::Yes
                       : fp_[i] == 3 ? CodeView::Tri::No : CodeView::Tri::Unknown;
  }

 private:
  ElfImage() = default;

  bool parse_headers() {
    const MappedFile &f = *file_;
    const auto *eh = reinterpret_cast<const Elf64_Ehdr *>(f.data());
    if (std::memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
        eh->e_ident[EI_DATA] != ELFDATA2LSB)
      return false;
    if (eh->e_phentsize == sizeof(Elf64_Phdr) &&
        f.has(eh->e_phoff, uint64_t(eh->e_phnum) * sizeof(Elf64_Phdr))) {
      const auto *ph = reinterpret_cast<const Elf64_Phdr *>(f.data() + eh->e_phoff);
      for (int i = 0; i < eh->e_phnum; ++i) {
        if (ph[i].p_type == PT_LOAD) loads_.push_back(ph[i]);
        if (ph[i].p_type == PT_NOTE && f.has(ph[i].p_offset, ph[i].p_filesz))
          read_build_id(f.data() + ph[i].p_offset, ph[i].p_filesz);
      }
    }
    return true;
  }

  void read_build_id(const uint8_t *p, uint64_t n) {
    while (build_id_.empty() && n >= sizeof(Elf64_Nhdr)) {
      Elf64_Nhdr nh;
      std::memcpy(&nh, p, sizeof nh);
      const uint64_t name_sz = (nh.n_namesz + 3) & ~3u, desc_sz = (nh.n_descsz + 3) & ~3u;
      const uint64_t total = sizeof nh + name_sz + desc_sz;
      if (total > n) return;
      if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
          std::memcmp(p + sizeof nh, "GNU", 4) == 0) {
        char hex[3];
        for (uint32_t i = 0; i < nh.n_descsz; ++i) {
          std::snprintf(hex, sizeof hex, "%02x", p[sizeof nh + name_sz + i]);
          build_id_ += hex;
        }
      }
      p += total;
      n -= total;
    }
  }

  // Adds the function symbols of f's section of type `type`. True when it had any.
  bool read_symbols(const MappedFile &f, uint32_t type) {
    const auto *eh = reinterpret_cast<const Elf64_Ehdr *>(f.data());
    if (std::memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
        eh->e_shentsize != sizeof(Elf64_Shdr) ||
        !f.has(eh->e_shoff, uint64_t(eh->e_shnum) * sizeof(Elf64_Shdr)))
      return false;
    const auto *sh = reinterpret_cast<const Elf64_Shdr *>(f.data() + eh->e_shoff);
    bool any = false;
    for (int i = 0; i < eh->e_shnum; ++i) {
      if (sh[i].sh_type != type || sh[i].sh_entsize != sizeof(Elf64_Sym)) continue;
      if (sh[i].sh_link >= eh->e_shnum) continue;
      const Elf64_Shdr &str = sh[sh[i].sh_link];
      if (str.sh_type != SHT_STRTAB || !f.has(sh[i].sh_offset, sh[i].sh_size) ||
          !f.has(str.sh_offset, str.sh_size) || str.sh_size == 0)
        continue;
      const auto *syms = reinterpret_cast<const Elf64_Sym *>(f.data() + sh[i].sh_offset);
      const char *names = reinterpret_cast<const char *>(f.data() + str.sh_offset);
      if (names[str.sh_size - 1] != 0) continue;
      const size_t count = sh[i].sh_size / sizeof(Elf64_Sym);
      for (size_t j = 0; j < count; ++j) {
        const Elf64_Sym &s = syms[j];
        const unsigned t = ELF64_ST_TYPE(s.st_info);
        if ((t != STT_FUNC && t != STT_GNU_IFUNC) || s.st_shndx == SHN_UNDEF || s.st_value == 0 ||
            s.st_name >= str.sh_size || names[s.st_name] == 0)
          continue;
        syms_.push_back({s.st_value, s.st_size, names + s.st_name});
        any = true;
      }
    }
    return any;
  }

  std::unique_ptr<MappedFile> file_, debug_;
  std::vector<Elf64_Phdr> loads_;
  std::string build_id_;
  std::vector<Sym> syms_;
  std::vector<uint8_t> fp_;  // per symbol: 0 not checked, 1 yes, 2 unknown, 3 no
  std::vector<std::string> demangled_;
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

namespace {

bool read_file(const std::string &path, std::string *out) {
  std::ifstream f(path);
  if (!f) return false;
  std::ostringstream ss;
  ss << f.rdbuf();
  *out = ss.str();
  return true;
}

std::string basename_of(const std::string &path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool file_backed(const MapEntry &m) { return !m.path.empty() && m.path[0] == '/' && m.inode != 0; }

// "/x/y (deleted)" -> "/x/y"
std::string live_path(const std::string &p) {
  static const std::string kDeleted = " (deleted)";
  if (p.size() > kDeleted.size() && p.compare(p.size() - kDeleted.size(), kDeleted.size(), kDeleted) == 0)
    return p.substr(0, p.size() - kDeleted.size());
  return p;
}

}  // namespace

std::string Frame::text() const {
  char off[32];
  std::snprintf(off, sizeof off, "0x%" PRIx64, offset);
  std::string t = scanned ? "?" : "";
  if (!function.empty())
    t += function + "+" + off + " (" + module + ")";
  else
    t += module + "+" + off;
  return t;
}

// ---- Symbolizer ----

Symbolizer::Symbolizer() = default;
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
  copy.reread_this_event = false;
  procs_[child] = std::move(copy);
}

void Symbolizer::on_exit(uint32_t pid, uint64_t now_ns) {
  auto it = procs_.find(pid);
  if (it != procs_.end()) it->second.exited_at = now_ns ? now_ns : 1;
}

void Symbolizer::prune(uint64_t now_ns, uint64_t keep_ns) {
  for (auto it = procs_.begin(); it != procs_.end();) {
    if (it->second.exited_at && now_ns - it->second.exited_at > keep_ns)
      it = procs_.erase(it);
    else
      ++it;
  }
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
  if (!m && may_reread && !p.fixed && !p.reread_this_event) {
    // Loaded since the snapshot (dlopen): read the maps again, once per stack.
    p.reread_this_event = true;
    std::string text;
    if (read_file("/proc/" + std::to_string(pid) + "/maps", &text)) {
      p.maps = parse_proc_maps(text);
      m = lookup();
    }
  }
  return m;
}

ElfImage *Symbolizer::image(uint32_t pid, const MapEntry &m) {
  if (!file_backed(m)) return nullptr;
  const std::string path = live_path(m.path);
  const std::string key = path + "|" + m.dev + "|" + std::to_string(m.inode);
  auto it = images_.find(key);
  if (it != images_.end()) return it->second.get();
  // Through the process's root first: its own view of the file system (containers).
  const std::string root = "/proc/" + std::to_string(pid) + "/root";
  std::unique_ptr<ElfImage> img = ElfImage::load(root + path, root);
  if (!img) img = ElfImage::load(path, "");
  if (img) ++files_loaded_;
  ElfImage *raw = img.get();
  images_.emplace(key, std::move(img));  // a failure is cached too
  return raw;
}

// The code of one process, as the unwinder sees it.
class Symbolizer::View : public CodeView {
 public:
  View(Symbolizer &s, uint32_t pid) : s_(s), pid_(pid) {}
  bool executable(uint64_t addr) override {
    const MapEntry *m = s_.find_map(pid_, addr, false);
    return m && m->exec;
  }
  size_t code_before(uint64_t addr, uint8_t *out, size_t n) override {
    const MapEntry *m = s_.find_map(pid_, addr, false);
    if (!m || !m->exec || addr <= m->start) return 0;
    ElfImage *img = s_.image(pid_, *m);
    if (!img) return 0;
    n = std::min<uint64_t>(n, addr - m->start);
    const uint64_t off = addr - m->start + m->offset;
    if (off < n) return 0;
    return img->bytes(off - n, out, n) == n ? n : 0;
  }
  bool starts_function(uint64_t addr) override {
    const MapEntry *m = s_.find_map(pid_, addr, false);
    if (!m || !m->exec) return false;
    ElfImage *img = s_.image(pid_, *m);
    uint64_t vaddr;
    if (!img || !img->vaddr_of(addr - m->start + m->offset, &vaddr)) return false;
    const long i = img->find(vaddr);
    return i >= 0 && img->sym(i).addr == vaddr;
  }
  Tri keeps_frame_pointer(uint64_t addr) override {
    const MapEntry *m = s_.find_map(pid_, addr, false);
    if (!m || !m->exec) return Tri::Unknown;
    ElfImage *img = s_.image(pid_, *m);
    uint64_t vaddr;
    if (!img || !img->vaddr_of(addr - m->start + m->offset, &vaddr)) return Tri::Unknown;
    const long i = img->find(vaddr);
    return i < 0 ? Tri::Unknown : img->keeps_frame_pointer(i);
  }

 private:
  Symbolizer &s_;
  uint32_t pid_;
};

}  // namespace parcagpu::trace

namespace parcagpu::trace {

Frame Symbolizer::symbolize(uint32_t pid, uint64_t addr, bool is_return) {
  Frame f;
  const MapEntry *m = find_map(pid, addr, true);
  if (!m) {
    f.module = "[unmapped]";
    f.offset = addr;
    return f;
  }
  if (!file_backed(*m)) {
    f.module = m->path.empty() ? "[anon]" : m->path;
    f.offset = addr - m->start;
    return f;
  }
  f.path = live_path(m->path);
  f.module = basename_of(f.path);
  const uint64_t off = addr - m->start + m->offset;
  f.offset = off;
  ElfImage *img = image(pid, *m);
  uint64_t vaddr;
  if (!img || !img->vaddr_of(is_return && off > 0 ? off - 1 : off, &vaddr)) return f;
  if (is_return) ++vaddr;
  f.offset = vaddr;
  const long i = img->find(is_return ? vaddr - 1 : vaddr);
  if (i < 0) return f;
  f.function = img->demangled(i);
  f.offset = vaddr - img->sym(i).addr;
  return f;
}

std::vector<Frame> Symbolizer::symbolize_stack(uint32_t pid, const RawUserStack &s) {
  Process &p = process(pid);
  p.reread_this_event = false;
  // The walk's frames must be in the snapshot; a miss reads the maps again (once).
  find_map(pid, s.ip, true);
  for (uint64_t a : s.fp_frames) find_map(pid, a, true);
  View view(*this, pid);
  std::vector<Frame> out;
  for (const UnwoundFrame &u : unwind(s, view)) {
    Frame f = symbolize(pid, u.addr, u.is_return);
    f.scanned = u.scanned;
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace parcagpu::trace
