#include "agent_notes.h"

#include <asm/ptrace.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <map>
#include <regex>
#include <sstream>

#include "parcagpu/abi.h"

namespace parcagpu::agent {
namespace {

constexpr uint32_t kNtStapsdt = 3;

struct Segment {
  uint64_t vaddr, memsz, offset;
};

// Virtual address to file offset through the PT_LOAD segment that holds it (unchanged if none
// does, as the agent leaves it).
uint64_t to_file_offset(const std::vector<Segment> &segments, uint64_t addr) {
  for (const Segment &s : segments)
    if (addr >= s.vaddr && addr < s.vaddr + s.memsz) return addr - s.vaddr + s.offset;
  return addr;
}

// desc = pc, base, semaphore (8 bytes each), then provider\0 name\0 args\0.
bool parse_note(const char *desc, size_t size, uint64_t stapsdt_base,
                const std::vector<Segment> &segments, SdtNote *out) {
  if (size < 24) return false;
  uint64_t pc, base, sem;
  std::memcpy(&pc, desc, 8);
  std::memcpy(&base, desc + 8, 8);
  std::memcpy(&sem, desc + 16, 8);
  // Prelink adjustment: where .stapsdt.base is now versus where the note says it was.
  if (stapsdt_base != 0 && base != 0) {
    pc += stapsdt_base - base;
    if (sem != 0) sem += stapsdt_base - base;
  }
  const char *p = desc + 24, *end = desc + size;
  std::string fields[3];
  for (std::string &f : fields) {
    const char *z = static_cast<const char *>(std::memchr(p, 0, end - p));
    if (!z) return false;
    f.assign(p, z);
    p = z + 1;
  }
  out->provider = fields[0];
  out->name = fields[1];
  out->args = fields[2];
  out->pc = pc;
  out->file_offset = to_file_offset(segments, pc);
  out->semaphore = sem;
  out->semaphore_offset = sem ? to_file_offset(segments, sem) : 0;
  return true;
}

// The agent's x86-64 register names (every width it knows) -> offset in struct pt_regs.
bool register_offset(const std::string &name, uint16_t *off) {
  static const std::map<std::string, size_t> regs = [] {
    std::map<std::string, size_t> m;
    auto add = [&m](std::initializer_list<const char *> names, size_t o) {
      for (const char *n : names) m[n] = o;
    };
    add({"rax", "eax", "ax", "al"}, offsetof(pt_regs, rax));
    add({"rbx", "ebx", "bx", "bl"}, offsetof(pt_regs, rbx));
    add({"rcx", "ecx", "cx", "cl"}, offsetof(pt_regs, rcx));
    add({"rdx", "edx", "dx", "dl"}, offsetof(pt_regs, rdx));
    add({"rsi", "esi", "si", "sil"}, offsetof(pt_regs, rsi));
    add({"rdi", "edi", "di", "dil"}, offsetof(pt_regs, rdi));
    add({"rbp", "ebp", "bp", "bpl"}, offsetof(pt_regs, rbp));
    add({"rsp", "esp", "sp", "spl"}, offsetof(pt_regs, rsp));
    add({"rip", "eip", "ip"}, offsetof(pt_regs, rip));
    const size_t rn[] = {offsetof(pt_regs, r8),  offsetof(pt_regs, r9),  offsetof(pt_regs, r10),
                         offsetof(pt_regs, r11), offsetof(pt_regs, r12), offsetof(pt_regs, r13),
                         offsetof(pt_regs, r14), offsetof(pt_regs, r15)};
    for (int i = 0; i < 8; i++) {
      const std::string r = "r" + std::to_string(8 + i);
      for (const char *suffix : {"", "d", "w", "b"}) m[r + suffix] = rn[i];
    }
    return m;
  }();
  auto it = regs.find(name);
  if (it == regs.end()) return false;
  *off = static_cast<uint16_t>(it->second);
  return true;
}

bool parse_one(const std::string &text, ac_arg_spec *a, std::string *error) {
  // The agent's patterns, tried in its order.
  static const std::regex deref_off(
      R"(^\s*(-?\d+)(f?)\s*@\s*(-?\d+)\s*\(\s*%([a-z0-9]+)\s*\)\s*$)");
  static const std::regex deref(R"(^\s*(-?\d+)(f?)\s*@\s*\(\s*%([a-z0-9]+)\s*\)\s*$)");
  static const std::regex constant(R"(^\s*(-?\d+)(f?)\s*@\s*\$(-?\d+)\s*$)");
  static const std::regex bare_constant(R"(^\s*(-?\d+)(f?)\s*@\s*(-?\d+)\s*$)");
  static const std::regex reg(R"(^\s*(-?\d+)(f?)\s*@\s*%?([a-z0-9]+)\s*$)");
  std::smatch m;
  std::string reg_name;
  *a = {};
  if (std::regex_match(text, m, deref_off)) {
    a->type = AC_ARG_REG_DEREF;
    a->val_off = static_cast<uint64_t>(std::stoll(m[3]));
    reg_name = m[4];
  } else if (std::regex_match(text, m, deref)) {
    a->type = AC_ARG_REG_DEREF;
    reg_name = m[3];
  } else if (std::regex_match(text, m, constant) || std::regex_match(text, m, bare_constant)) {
    a->type = AC_ARG_CONST;
    a->val_off = static_cast<uint64_t>(std::stoll(m[3]));
  } else if (std::regex_match(text, m, reg)) {
    a->type = AC_ARG_REG;
    reg_name = m[3];
  } else {
    *error = "unrecognized argument format: " + text;
    return false;
  }
  if (!reg_name.empty() && !register_offset(reg_name, &a->reg_off)) {
    *error = "unknown register: " + reg_name;
    return false;
  }
  if (m[2] == "f") {
    *error = "floating-point argument: " + text;  // none of ours; not read as an integer
    return false;
  }
  long size = std::stol(m[1]);
  a->is_signed = size < 0;
  if (size < 0) size = -size;
  if (size != 1 && size != 2 && size != 4 && size != 8) {
    *error = "argument size " + std::to_string(size) + ": " + text;
    return false;
  }
  a->bitshift = static_cast<uint8_t>(64 - 8 * size);
  return true;
}

}  // namespace

// The probes' names in the library's notes, by enum ac_probe.
constexpr const char *kProbeNames[] = {"cuda_correlation", "activity_batch",  "kernel_executed",
                                       "cubin_loaded",     "pc_sample_batch", "stall_reason_map",
                                       "error",            "gpu_config"};
static_assert(sizeof(kProbeNames) / sizeof(kProbeNames[0]) == AC_PROBE_MAX);

const char *probe_name(ac_probe p) {
  return static_cast<unsigned>(p) < AC_PROBE_MAX ? kProbeNames[p] : "?";
}

bool read_sdt_notes(const std::string &path, std::vector<SdtNote> *notes, std::string *error) {
  notes->clear();
  if (elf_version(EV_CURRENT) == EV_NONE) {
    *error = "libelf initialisation failed";
    return false;
  }
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *error = "cannot open " + path + ": " + std::strerror(errno);
    return false;
  }
  Elf *elf = elf_begin(fd, ELF_C_READ, nullptr);
  bool ok = elf && elf_kind(elf) == ELF_K_ELF && gelf_getclass(elf) == ELFCLASS64;
  if (!ok) *error = path + " is not a 64-bit ELF file";
  std::vector<Segment> segments;
  size_t nphdr = 0;
  if (ok && elf_getphdrnum(elf, &nphdr) == 0) {
    for (size_t i = 0; i < nphdr; i++) {
      GElf_Phdr ph;
      if (gelf_getphdr(elf, static_cast<int>(i), &ph) && ph.p_type == PT_LOAD)
        segments.push_back({ph.p_vaddr, ph.p_memsz, ph.p_offset});
    }
  }
  size_t shstrndx = 0;
  if (ok && elf_getshdrstrndx(elf, &shstrndx) != 0) {
    ok = false;
    *error = path + ": cannot read the section headers";
  }
  uint64_t stapsdt_base = 0;
  Elf_Data *note_data = nullptr;
  for (Elf_Scn *scn = nullptr; ok && (scn = elf_nextscn(elf, scn)) != nullptr;) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh)) continue;
    const char *name = elf_strptr(elf, shstrndx, sh.sh_name);
    if (!name) continue;
    if (std::strcmp(name, ".stapsdt.base") == 0) stapsdt_base = sh.sh_addr;
    if (std::strcmp(name, ".note.stapsdt") == 0 && sh.sh_type == SHT_NOTE)
      note_data = elf_getdata(scn, nullptr);
  }
  if (ok && note_data) {
    GElf_Nhdr nh;
    size_t off = 0, name_off = 0, desc_off = 0;
    const char *buf = static_cast<const char *>(note_data->d_buf);
    while ((off = gelf_getnote(note_data, off, &nh, &name_off, &desc_off)) > 0) {
      if (nh.n_type != kNtStapsdt) continue;
      SdtNote n;
      if (parse_note(buf + desc_off, nh.n_descsz, stapsdt_base, segments, &n))
        notes->push_back(std::move(n));
    }
  }
  if (elf) elf_end(elf);
  close(fd);
  return ok;
}

AgentChoice choose_agent_probes(const std::vector<SdtNote> &notes) {
  AgentChoice c;
  // Per name, the last note wins: the agent walks the notes in order and overwrites.
  std::map<std::string, const SdtNote *> last;
  for (const SdtNote &n : notes)
    if (n.provider == PARCAGPU_PROVIDER) last[n.name] = &n;
  auto get = [&last](ac_probe p) -> const SdtNote * {
    auto it = last.find(probe_name(p));
    return it == last.end() ? nullptr : it->second;
  };
  for (const auto &kv : last) {
    bool known = false;
    for (int p = 0; p < AC_PROBE_MAX; p++)
      known |= kv.first == probe_name(static_cast<ac_probe>(p));
    if (!known || kv.first == "kernel_executed") c.ignored.push_back(kv.first);
  }
  const SdtNote *corr = get(AC_PROBE_CUDA_CORRELATION);
  const SdtNote *batch = get(AC_PROBE_ACTIVITY_BATCH);
  const SdtNote *kernel = get(AC_PROBE_KERNEL_EXECUTED);
  if (!corr) {
    c.error = "no parcagpu:cuda_correlation probe: the agent does not attach";
    return c;
  }
  c.attach.push_back({AC_PROBE_CUDA_CORRELATION, *corr});
  if (batch) {
    c.attach.push_back({AC_PROBE_ACTIVITY_BATCH, *batch});
    if (kernel) {
      c.has_kernel_fallback = true;
      c.kernel_fallback = {AC_PROBE_KERNEL_EXECUTED, *kernel};
    }
  } else if (kernel) {
    c.attach.push_back({AC_PROBE_KERNEL_EXECUTED, *kernel});
    c.ignored.erase(std::remove(c.ignored.begin(), c.ignored.end(), "kernel_executed"),
                    c.ignored.end());
  } else {
    c.error =
        "neither parcagpu:activity_batch nor parcagpu:kernel_executed: the agent does not attach";
    c.attach.clear();
    return c;
  }
  for (ac_probe p : {AC_PROBE_CUBIN_LOADED, AC_PROBE_PC_SAMPLE_BATCH, AC_PROBE_STALL_REASON_MAP,
                     AC_PROBE_ERROR, AC_PROBE_GPU_CONFIG})
    if (const SdtNote *n = get(p)) c.attach.push_back({p, *n});
  return c;
}

bool parse_arg_specs(const std::string &args, ac_probe_spec *spec, std::string *error) {
  *spec = {};
  std::istringstream in(args);
  std::vector<std::string> parts;
  for (std::string s; in >> s;) parts.push_back(s);
  if (parts.size() > AC_MAX_ARGS) {
    *error = "too many arguments: " + std::to_string(parts.size());
    return false;
  }
  for (size_t i = 0; i < parts.size(); i++) {
    if (!parse_one(parts[i], &spec->args[i], error)) {
      *spec = {};
      return false;
    }
  }
  spec->nargs = static_cast<uint32_t>(parts.size());
  return true;
}

}  // namespace parcagpu::agent
