#include "python.h"
#include "elf_walk.h"

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>

namespace parcagpu::trace {

namespace {

// Offsets computed from each version's internal headers (offsetof with Py_BUILD_CORE against
// ~/.pyenv/versions/3.1x.y/include; python_layout_test re-checks them where those headers are).
// These structs are part of the ABI within a minor version.
PyLayout make(int minor, uint32_t interp_head, uint16_t threads_head, uint16_t native_tid, uint16_t tstate_frame,
              uint16_t cframe_current, uint16_t f_code, uint16_t f_previous, uint16_t f_instr, uint16_t f_entry,
              uint32_t firstlineno, uint32_t adaptive, uint32_t ascii_size, uint32_t compact_size) {
  PyLayout l;
  l.major = 3;
  l.minor = minor;
  l.runtime_interp_head = interp_head;
  l.bpf.interp_threads_head = threads_head;
  l.bpf.tstate_next = 8;
  l.bpf.tstate_native_thread_id = native_tid;
  l.bpf.tstate_frame = tstate_frame;
  l.bpf.cframe_current_frame = cframe_current;
  l.bpf.frame_code = f_code;
  l.bpf.frame_previous = f_previous;
  l.bpf.frame_instr = f_instr;
  l.bpf.frame_entry = f_entry;
  l.owner_field = minor >= 12;
  l.code_filename = 112;
  l.code_name = 120;
  l.code_qualname = 128;
  l.code_firstlineno = firstlineno;
  l.code_linetable = 136;
  l.code_adaptive = adaptive;
  l.ascii_size = ascii_size;
  l.compact_utf8 = ascii_size + 8;  // after utf8_length
  l.compact_size = compact_size;     // 3.11 still has wstr_length after utf8
  return l;
}

const PyLayout kLayouts[] = {
    //   interp_head threads native frame cframe.cur f_code prev instr entry firstline adaptive ascii compact
    make(11, 40, 16, 160, 56, 8, 32, 48, 56, 68, 72, 184, 48, 72),
    make(12, 40, 72, 144, 56, 0, 0, 8, 56, 70, 68, 192, 40, 56),
    make(13, 632, 7344, 160, 72, PT_PY_NO_FIELD, 0, 8, 56, 70, 68, 200, 40, 56),
};

bool read_mem(uint32_t pid, uint64_t addr, void *dst, size_t n) {
  if (!addr || n == 0) return false;
  iovec local{dst, n}, remote{reinterpret_cast<void *>(addr), n};
  return process_vm_readv(static_cast<pid_t>(pid), &local, 1, &remote, 1, 0) == static_cast<ssize_t>(n);
}

template <typename T>
bool read_val(uint32_t pid, uint64_t addr, T *v) {
  return read_mem(pid, addr, v, sizeof *v);
}

void append_utf8(std::string *out, uint32_t c) {
  if (c < 0x80) {
    *out += static_cast<char>(c);
  } else if (c < 0x800) {
    *out += static_cast<char>(0xc0 | (c >> 6));
    *out += static_cast<char>(0x80 | (c & 0x3f));
  } else if (c < 0x10000) {
    *out += static_cast<char>(0xe0 | (c >> 12));
    *out += static_cast<char>(0x80 | ((c >> 6) & 0x3f));
    *out += static_cast<char>(0x80 | (c & 0x3f));
  } else {
    *out += static_cast<char>(0xf0 | (c >> 18));
    *out += static_cast<char>(0x80 | ((c >> 12) & 0x3f));
    *out += static_cast<char>(0x80 | ((c >> 6) & 0x3f));
    *out += static_cast<char>(0x80 | (c & 0x3f));
  }
}

// A str object (compact: every str the compiler makes) as UTF-8. PyASCIIObject: length at 16,
// state at 32 (kind bits 2-4, compact bit 5, ascii bit 6: the same in 3.11-3.13).
bool read_str(uint32_t pid, const PyLayout &l, uint64_t obj, std::string *out) {
  constexpr int64_t kMaxLen = 4096;
  int64_t length = 0;
  uint32_t state = 0;
  if (!read_val(pid, obj + 16, &length) || !read_val(pid, obj + 32, &state)) return false;
  if (length < 0 || length > kMaxLen) return false;
  const unsigned kind = (state >> 2) & 7, compact = (state >> 5) & 1, ascii = (state >> 6) & 1;
  if (!compact) return false;
  if (ascii) {
    out->assign(static_cast<size_t>(length), '\0');
    return length == 0 || read_mem(pid, obj + l.ascii_size, out->data(), out->size());
  }
  if (kind != 1 && kind != 2 && kind != 4) return false;
  std::vector<uint8_t> raw(static_cast<size_t>(length) * kind);
  if (!raw.empty() && !read_mem(pid, obj + l.compact_size, raw.data(), raw.size())) return false;
  out->clear();
  for (int64_t i = 0; i < length; ++i) {
    uint32_t c = 0;
    std::memcpy(&c, raw.data() + i * kind, kind);  // little-endian
    append_utf8(out, c);
  }
  return true;
}

// A bytes object's contents (PyBytesObject: ob_size at 16, ob_sval at 32).
bool read_bytes(uint32_t pid, uint64_t obj, std::vector<uint8_t> *out) {
  constexpr int64_t kMax = 1 << 20;
  int64_t size = 0;
  if (!read_val(pid, obj + 16, &size) || size < 0 || size > kMax) return false;
  out->resize(static_cast<size_t>(size));
  return size == 0 || read_mem(pid, obj + 32, out->data(), out->size());
}

// Location table entries (Objects/locations.md): a first byte with bit 7 set, code in bits
// 3-6, (code units - 1) in bits 0-2, then the code's varints / bytes (bit 7 clear).
struct LineReader {
  const uint8_t *p, *end;
  bool bad = false;
  uint32_t varint() {
    uint32_t v = 0;
    for (int shift = 0;; shift += 6) {
      if (p >= end || shift > 28) {
        bad = true;
        return 0;
      }
      const uint8_t b = *p++;
      v |= static_cast<uint32_t>(b & 63) << shift;
      if (!(b & 64)) return v;
    }
  }
  int32_t svarint() {
    const uint32_t v = varint();
    return (v & 1) ? -static_cast<int32_t>(v >> 1) : static_cast<int32_t>(v >> 1);
  }
};

bool starts_with(const std::string &s, const char *p) { return s.compare(0, std::strlen(p), p) == 0; }

std::string basename_of(const std::string &path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// The symbols of one ELF file: _PyRuntime's address and Py_Version's value (read from the
// file's data), and the executable PT_LOAD segments (to place the file's addresses).
struct PyElf {
  uint64_t runtime = 0;
  uint64_t version = 0;
  bool has_runtime = false, has_version = false;
  // 3.13+: the start of _PyRuntime as the file initializes it, _Py_DebugOffsets first.
  std::vector<uint64_t> debug;
  struct Seg {
    uint64_t vaddr, offset, filesz;
  };
  std::vector<Seg> loads;
};

constexpr size_t kDebugWords = kPyDebugOffsetsWords;

}  // namespace

const PyLayout *py_layout_from_debug_offsets(const std::vector<uint64_t> &d, int minor) {
  if (minor != 13 || d.size() < kDebugWords || std::memcmp(d.data(), "xdebugpy", 8) != 0) return nullptr;
  if (((d[1] >> 16) & 0xff) != 13 || d[2] != 0) return nullptr;
  PyLayout l = *py_layout(3, 13);
  auto field = [](uint64_t v, uint16_t *dst) {
    if (v >= PT_PY_NO_FIELD) return false;
    *dst = static_cast<uint16_t>(v);
    return true;
  };
  if (d[5] > 0xffff) return nullptr;
  l.runtime_interp_head = static_cast<uint32_t>(d[5]);
  if (!field(d[9], &l.bpf.interp_threads_head) || !field(d[21], &l.bpf.tstate_next) ||
      !field(d[23], &l.bpf.tstate_frame) || !field(d[25], &l.bpf.tstate_native_thread_id) ||
      !field(d[29], &l.bpf.frame_previous) || !field(d[30], &l.bpf.frame_code) ||
      !field(d[31], &l.bpf.frame_instr) || !field(d[33], &l.bpf.frame_entry))
    return nullptr;
  l.code_filename = static_cast<uint32_t>(d[35]);
  l.code_name = static_cast<uint32_t>(d[36]);
  l.code_qualname = static_cast<uint32_t>(d[37]);
  l.code_linetable = static_cast<uint32_t>(d[38]);
  l.code_firstlineno = static_cast<uint32_t>(d[39]);
  l.code_adaptive = static_cast<uint32_t>(d[43]);
  // Layouts are kept for the life of the tool (PythonFrames points at them); few distinct.
  static std::vector<std::unique_ptr<PyLayout>> kept;
  for (const auto &k : kept)
    if (std::memcmp(&k->bpf, &l.bpf, sizeof l.bpf) == 0 && k->runtime_interp_head == l.runtime_interp_head &&
        k->code_filename == l.code_filename && k->code_qualname == l.code_qualname &&
        k->code_linetable == l.code_linetable && k->code_firstlineno == l.code_firstlineno &&
        k->code_adaptive == l.code_adaptive)
      return k.get();
  if (kept.size() >= 64) return nullptr;
  kept.push_back(std::make_unique<PyLayout>(l));
  return kept.back().get();
}

namespace {

bool read_py_elf(const std::string &path, PyElf *out) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  elf_version(EV_CURRENT);
  Elf *elf = elf_begin(fd, ELF_C_READ, nullptr);
  bool ok = false;
  if (elf && elf_kind(elf) == ELF_K_ELF) {
    for_each_load_segment(elf, [&](const GElf_Phdr &ph) { out->loads.push_back({ph.p_vaddr, ph.p_offset, ph.p_filesz}); });
    uint64_t version_addr = 0;
    for_each_defined_symbol(elf, [&](const GElf_Sym &sym, const char *name) {
      if (!std::strcmp(name, "_PyRuntime")) {
        out->runtime = sym.st_value;
        out->has_runtime = true;
      } else if (!std::strcmp(name, "Py_Version")) {
        version_addr = sym.st_value;
        out->has_version = true;
      }
    });
    // Py_Version is const data: its value is in the file, at the segment's file offset.
    if (out->has_version) {
      out->has_version = false;
      for (const PyElf::Seg &s : out->loads)
        if (version_addr >= s.vaddr && version_addr + 8 <= s.vaddr + s.filesz) {
          out->has_version = pread(fd, &out->version, 8, static_cast<off_t>(s.offset + version_addr - s.vaddr)) == 8;
          break;
        }
    }
    // _PyRuntime is initialized data: its _Py_DebugOffsets (3.13+) are in the file too.
    if (out->has_runtime)
      for (const PyElf::Seg &s : out->loads)
        if (out->runtime >= s.vaddr && out->runtime + kDebugWords * 8 <= s.vaddr + s.filesz) {
          out->debug.resize(kDebugWords);
          if (pread(fd, out->debug.data(), kDebugWords * 8, static_cast<off_t>(s.offset + out->runtime - s.vaddr)) !=
              static_cast<ssize_t>(kDebugWords * 8))
            out->debug.clear();
          break;
        }
    ok = out->has_runtime && out->has_version;
  }
  if (elf) elf_end(elf);
  close(fd);
  return ok;
}

}  // namespace

const PyLayout *py_layout(int major, int minor) {
  for (const PyLayout &l : kLayouts)
    if (l.major == major && l.minor == minor) return &l;
  return nullptr;
}

int py_code_line(const uint8_t *table, size_t size, int firstlineno, int64_t addr) {
  if (addr < 0) return firstlineno;
  LineReader r{table, table + size};
  int line = firstlineno;
  int64_t start = 0;
  while (r.p < r.end) {
    const uint8_t first = *r.p++;
    if (!(first & 0x80)) return 0;  // not at an entry's first byte: malformed
    const int code = (first >> 3) & 15;
    const int64_t end = start + ((first & 7) + 1) * 2;  // code units are 2 bytes
    bool no_line = false;
    switch (code) {
      case 15: no_line = true; break;                     // no location
      case 14:                                            // long form
        line += r.svarint();
        r.varint(), r.varint(), r.varint();               // end line delta, columns
        break;
      case 13: line += r.svarint(); break;                // no column
      case 12: case 11: case 10:                          // one-line form: 2 column bytes
        line += code - 10;
        if (r.end - r.p < 2) return 0;
        r.p += 2;
        break;
      default:                                            // short form: same line, 1 byte
        if (r.end - r.p < 1) return 0;
        r.p += 1;
        break;
    }
    if (r.bad) return 0;
    if (addr >= start && addr < end) return no_line ? -1 : line;
    start = end;
  }
  return 0;
}

std::string Frame::python_name() const {
  if (file.empty()) return "[python] " + function;
  std::string n = basename_of(file);
  n += ':';
  n += line > 0 ? std::to_string(line) : "?";
  n += ' ';
  n += function;
  return n;
}

Frame python_frame(const std::string &qualname, const std::string &filename, int line) {
  Frame f;
  f.function = qualname;
  f.module = "[python]";
  f.file = filename;
  f.line = line;
  f.python = true;
  return f;
}

std::vector<Frame> merge_python_frames(const std::vector<Frame> &native, const PyFrameGroups &groups,
                                       bool *mismatch) {
  // Indexes of the interpreter loop's frames, innermost first. Optimized builds may split off
  // part of it ("_PyEval_EvalFrameDefault.cold"): a return address there is the same loop run.
  static const std::string kLoop = "_PyEval_EvalFrameDefault";
  std::vector<size_t> evals;
  for (size_t i = 0; i < native.size(); ++i) {
    const std::string &fn = native[i].function;
    if (!native[i].inlined && fn.compare(0, kLoop.size(), kLoop) == 0 &&
        (fn.size() == kLoop.size() || fn[kLoop.size()] == '.'))
      evals.push_back(i);
  }
  *mismatch = evals.size() != groups.size();
  std::vector<Frame> out;
  size_t next_group = 0;
  for (size_t i = 0; i < native.size(); ++i) {
    const auto e = std::find(evals.begin(), evals.end(), i);
    if (e == evals.end() || next_group >= groups.size()) {
      out.push_back(native[i]);
      continue;
    }
    // The outermost interpreter frame takes what groups are left over.
    const bool last = e + 1 == evals.end();
    do {
      for (const Frame &f : groups[next_group]) out.push_back(f);
      ++next_group;
    } while (last && next_group < groups.size());
  }
  for (; next_group < groups.size(); ++next_group)
    for (const Frame &f : groups[next_group]) out.push_back(f);
  return out;
}

bool detect_python(uint32_t pid, const std::vector<MapEntry> &maps, pt_py_proc *out, std::string *version,
                   const PyLayout **layout) {
  for (const MapEntry &m : maps) {
    if (m.path.empty()) continue;
    const std::string base = basename_of(live_path(m.path));
    if (!starts_with(base, "python") && !starts_with(base, "libpython3")) continue;
    // Every Python process of the machine comes here (at its exec): each file is read once.
    static std::map<std::string, std::optional<PyElf>> files;
    const std::string key = live_path(m.path) + "|" + m.dev + "|" + std::to_string(m.inode);
    auto it = files.find(key);
    if (it == files.end()) {
      if (files.size() >= 256) files.clear();
      PyElf e;
      const bool ok = read_py_elf("/proc/" + std::to_string(pid) + "/root" + live_path(m.path), &e) ||
                      read_py_elf(live_path(m.path), &e);
      // Not cached when unreadable (the process may be gone already): another may succeed.
      if (!ok && access(("/proc/" + std::to_string(pid)).c_str(), F_OK) != 0) continue;
      it = files.emplace(key, ok ? std::optional<PyElf>(std::move(e)) : std::nullopt).first;
    }
    if (!it->second) continue;
    const PyElf &e = *it->second;
    const int major = static_cast<int>((e.version >> 24) & 0xff), minor = static_cast<int>((e.version >> 16) & 0xff);
    const PyLayout *l = py_layout(major, minor);
    if (version) *version = std::to_string(major) + "." + std::to_string(minor);
    if (!l) return false;
    if (minor >= 13) {
      l = py_layout_from_debug_offsets(e.debug, minor);
      if (!l) return false;
      if (version) *version += " (_Py_DebugOffsets)";
    }
    // This mapping holds file offsets [m.offset, ...) at m.start; the segment that covers
    // m.offset places the file's link-time addresses.
    for (const PyElf::Seg &s : e.loads) {
      if (m.offset < (s.offset & ~0xfffull) || m.offset >= s.offset + s.filesz) continue;
      const uint64_t bias = m.start - m.offset - (s.vaddr - s.offset);
      *out = l->bpf;
      out->interp_head = bias + e.runtime + l->runtime_interp_head;
      // The process knows its threads by their ids in its own pid namespace (a container's,
      // or the root one): BPF asks for the id there, whatever namespace this tool is in.
      struct stat ns {};
      if (stat(("/proc/" + std::to_string(pid) + "/ns/pid").c_str(), &ns) == 0) {
        out->pidns_dev = ns.st_dev;
        out->pidns_ino = ns.st_ino;
      }
      if (layout) *layout = l;
      return true;
    }
  }
  return false;
}

const PythonFrames::Code &PythonFrames::code(uint32_t pid, Proc &p, uint64_t addr) {
  auto it = p.codes.find(addr);
  if (it != p.codes.end()) return it->second;
  if (p.codes.size() >= 1 << 16) p.codes.clear();  // bounded: a program that makes code at run time
  Code c;
  const PyLayout &l = *p.layout;
  uint64_t filename = 0, qualname = 0, linetable = 0;
  int32_t first = 0;
  c.ok = read_val(pid, addr + l.code_filename, &filename) && read_val(pid, addr + l.code_qualname, &qualname) &&
         read_val(pid, addr + l.code_linetable, &linetable) && read_val(pid, addr + l.code_firstlineno, &first) &&
         read_str(pid, l, filename, &c.filename) && read_str(pid, l, qualname, &c.qualname) &&
         read_bytes(pid, linetable, &c.linetable) && first >= 0;
  c.firstlineno = first;
  // A failed read is cached too: a bad pointer then costs one read, not one per event.
  return p.codes.emplace(addr, std::move(c)).first->second;
}

PyFrameGroups PythonFrames::groups(uint32_t pid, const pt_py_stack &s, Counters *c) {
  PyFrameGroups out;
  auto it = procs_.find(pid);
  if (it == procs_.end() || !it->second.layout) return out;
  Proc &p = it->second;
  const PyLayout &l = *p.layout;
  const uint32_t n = std::min<uint32_t>(s.count, PT_PY_FRAMES_MAX);
  std::vector<Frame> group;
  for (uint32_t i = 0; i < n; ++i) {
    const uint8_t entry = s.entry[i];
    if (l.owner_field && entry == kPyFrameOwnedByCStack) {  // the loop's shim: the group ends
      if (!group.empty()) out.push_back(std::move(group));
      group.clear();
      continue;
    }
    const Code &code = this->code(pid, p, s.code[i]);
    if (!code.ok) {
      ++c->python_frame_read_errors;
      group.push_back(python_frame("?", "", 0));  // shown as "[python] ?"
    } else {
      const int64_t offset = static_cast<int64_t>(s.instr[i] - (s.code[i] + l.code_adaptive));
      const int line = py_code_line(code.linetable.data(), code.linetable.size(), code.firstlineno, offset);
      group.push_back(python_frame(code.qualname, code.filename, line));
    }
    ++c->python_frames;
    if (!l.owner_field && entry) {  // 3.11: is_entry, the first frame of the loop's run
      out.push_back(std::move(group));
      group.clear();
    }
  }
  if (!group.empty()) out.push_back(std::move(group));
  return out;
}

}  // namespace parcagpu::trace
