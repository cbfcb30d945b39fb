// The pure parts of tools/trace/python.cc: the location-table line decoder (against tables CPython
// 3.11, 3.12 and 3.13 compiled, with the lines their co_lines() gave) and the merge of Python
// frames into native stacks.
#include <gtest/gtest.h>

#include <glob.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "python.h"
#include "test_frames.h"

namespace parcagpu::trace {
namespace {

struct Range {
  int start, end, line;  // byte offsets [start, end); line -1: none
};

/* The function, at line 2 of its file (generated with each version by
   print(list(sample.__code__.co_linetable)), list(sample.__code__.co_lines())):
def sample(a, b):
    x = a + b
    if x > 10:
        y = [i * 2
             for i in range(x)]
        return len(y)

    z = (a *
         b)
    try:
        return z // b
    except ZeroDivisionError:
        return -1
*/
// Python 3.11: co_linetable of sample() below, and its co_lines().
const uint8_t kTable311[] = {0x80, 0x00, 0xd8, 0x08, 0x09, 0x88, 0x41, 0x89, 0x05, 0x80, 0x41, 0xd8, 0x07, 0x08, 0x88, 0x32, 0x82, 0x76, 0x80, 0x76, 0xf0, 0x02, 0x01, 0x0d, 0x20, 0xf0, 0x00, 0x01, 0x0d, 0x20, 0xdd, 0x16, 0x1b, 0x98, 0x41, 0x91, 0x68, 0x94, 0x68, 0xf0, 0x03, 0x01, 0x0d, 0x20, 0xf1, 0x00, 0x01, 0x0d, 0x20, 0xf4, 0x00, 0x01, 0x0d, 0x20, 0x88, 0x01, 0xe5, 0x0f, 0x12, 0x90, 0x31, 0x89, 0x76, 0x8c, 0x76, 0x88, 0x0d, 0xe0, 0x09, 0x0a, 0xd8, 0x09, 0x0a, 0xf1, 0x03, 0x01, 0x0a, 0x0b, 0x80, 0x41, 0xf0, 0x04, 0x03, 0x05, 0x12, 0xd8, 0x0f, 0x10, 0x90, 0x41, 0x89, 0x76, 0x88, 0x0d, 0xf8, 0xdd, 0x0b, 0x1c, 0xf0, 0x00, 0x01, 0x05, 0x12, 0xf0, 0x00, 0x01, 0x05, 0x12, 0xf0, 0x00, 0x01, 0x05, 0x12, 0xd8, 0x0f, 0x11, 0x88, 0x72, 0x88, 0x72, 0xf0, 0x03, 0x01, 0x05, 0x12, 0xf8, 0xf8, 0xf8};
const Range kLines311[] = {{0, 2, 2}, {2, 4, 3}, {4, 6, 3}, {6, 10, 3}, {10, 12, 3}, {12, 14, 4}, {14, 16, 4}, {16, 22, 4}, {22, 24, 4}, {24, 26, 5}, {26, 28, 5}, {28, 40, 6}, {40, 42, 6}, {42, 46, 6}, {46, 56, 6}, {56, 58, 5}, {58, 62, 5}, {62, 72, 5}, {72, 74, 5}, {74, 86, 7}, {86, 88, 7}, {88, 92, 7}, {92, 102, 7}, {102, 104, 7}, {104, 106, 9}, {106, 108, 10}, {108, 112, 9}, {112, 114, 9}, {114, 116, 11}, {116, 118, 12}, {118, 120, 12}, {120, 124, 12}, {124, 126, 12}, {126, 128, -1}, {128, 140, 13}, {140, 142, 13}, {142, 144, 13}, {144, 146, 13}, {146, 148, 14}, {148, 150, 14}, {150, 152, 14}, {152, 154, 13}, {154, 156, -1}, {156, 158, -1}, {158, 160, -1}};
// Python 3.12: co_linetable of sample() below, and its co_lines().
const uint8_t kTable312[] = {0x80, 0x00, 0xd8, 0x08, 0x09, 0x88, 0x41, 0x89, 0x05, 0x80, 0x41, 0xd8, 0x07, 0x08, 0x88, 0x32, 0x82, 0x76, 0xe4, 0x16, 0x1b, 0x98, 0x41, 0x93, 0x68, 0xf6, 0x03, 0x01, 0x0d, 0x20, 0xd8, 0x11, 0x12, 0xf0, 0x03, 0x00, 0x0e, 0x0f, 0x90, 0x11, 0x8b, 0x55, 0xf0, 0x00, 0x01, 0x0d, 0x20, 0x88, 0x01, 0xf0, 0x00, 0x01, 0x0d, 0x20, 0xe4, 0x0f, 0x12, 0x90, 0x31, 0x8b, 0x76, 0x88, 0x0d, 0xe0, 0x09, 0x0a, 0xd8, 0x09, 0x0a, 0xf1, 0x03, 0x01, 0x0a, 0x0b, 0x80, 0x41, 0xf0, 0x04, 0x03, 0x05, 0x12, 0xd8, 0x0f, 0x10, 0x90, 0x41, 0x89, 0x76, 0x88, 0x0d, 0xf9, 0xf2, 0x0f, 0x01, 0x0d, 0x20, 0xf8, 0xf4, 0x10, 0x00, 0x0c, 0x1d, 0xf2, 0x00, 0x01, 0x05, 0x12, 0xd9, 0x0f, 0x11, 0xf0, 0x03, 0x01, 0x05, 0x12, 0xfa};
const Range kLines312[] = {{0, 2, 2}, {2, 12, 3}, {12, 22, 4}, {22, 42, 6}, {42, 56, 5}, {56, 58, 6}, {58, 76, 5}, {76, 98, 7}, {98, 100, 9}, {100, 102, 10}, {102, 108, 9}, {108, 110, 11}, {110, 120, 12}, {120, 124, -1}, {124, 130, 5}, {130, 132, -1}, {132, 148, 13}, {148, 152, 14}, {152, 154, 13}, {154, 160, -1}};
// Python 3.13: co_linetable of sample() below, and its co_lines().
const uint8_t kTable313[] = {0x80, 0x00, 0xd8, 0x08, 0x09, 0x89, 0x05, 0x80, 0x41, 0xd8, 0x07, 0x08, 0x88, 0x32, 0x83, 0x76, 0xe4, 0x16, 0x1b, 0x98, 0x41, 0x94, 0x68, 0xf3, 0x03, 0x01, 0x0d, 0x20, 0xd9, 0x16, 0x1e, 0x90, 0x11, 0xf0, 0x03, 0x00, 0x0e, 0x0f, 0x90, 0x11, 0x8c, 0x55, 0xd9, 0x16, 0x1e, 0xf0, 0x03, 0x00, 0x09, 0x0a, 0xf0, 0x00, 0x01, 0x0d, 0x20, 0xe4, 0x0f, 0x12, 0x90, 0x31, 0x8b, 0x76, 0x88, 0x0d, 0xe0, 0x09, 0x0a, 0xd8, 0x09, 0x0a, 0xf1, 0x03, 0x01, 0x0a, 0x0b, 0x80, 0x41, 0xf0, 0x04, 0x03, 0x05, 0x12, 0xd8, 0x0f, 0x10, 0x89, 0x76, 0x88, 0x0d, 0xf9, 0xf2, 0x0f, 0x01, 0x0d, 0x20, 0xf8, 0xf4, 0x10, 0x00, 0x0c, 0x1d, 0xf3, 0x00, 0x01, 0x05, 0x12, 0xd9, 0x0f, 0x11, 0xf0, 0x03, 0x01, 0x05, 0x12, 0xfa};
const Range kLines313[] = {{0, 2, 2}, {2, 10, 3}, {10, 22, 4}, {22, 44, 6}, {44, 52, 5}, {52, 58, 6}, {58, 72, 5}, {72, 76, 6}, {76, 80, 5}, {80, 102, 7}, {102, 104, 9}, {104, 106, 10}, {106, 112, 9}, {112, 114, 11}, {114, 122, 12}, {122, 126, -1}, {126, 132, 5}, {132, 134, -1}, {134, 152, 13}, {152, 156, 14}, {156, 158, 13}, {158, 164, -1}};

template <size_t NT, size_t NL>
void expect_lines(const uint8_t (&table)[NT], const Range (&lines)[NL]) {
  for (const Range &r : lines)
    for (int addr = r.start; addr < r.end; addr += 2)
      EXPECT_EQ(py_code_line(table, NT, 2, addr), r.line) << "offset " << addr;
  // Past the table's end: unknown.
  EXPECT_EQ(py_code_line(table, NT, 2, lines[NL - 1].end), 0);
}

TEST(PythonLines, Cpython311Table) { expect_lines(kTable311, kLines311); }
TEST(PythonLines, Cpython312Table) { expect_lines(kTable312, kLines312); }
TEST(PythonLines, Cpython313Table) { expect_lines(kTable313, kLines313); }

TEST(PythonLines, BeforeTheFirstInstructionIsTheFirstLine) {
  // 3.11's prev_instr points one code unit before the code when nothing ran yet.
  EXPECT_EQ(py_code_line(kTable311, sizeof kTable311, 2, -2), 2);
}

TEST(PythonLines, TruncatedAndGarbageTablesGiveZeroNotACrash) {
  // Cut inside a long-form entry (0xf0 = code 14, its varints missing).
  const uint8_t cut[] = {0x80, 0x00, 0xf0, 0x43};
  EXPECT_EQ(py_code_line(cut, sizeof cut, 5, 2), 0);
  // A continuation byte where an entry should start.
  const uint8_t bad[] = {0x05, 0x80};
  EXPECT_EQ(py_code_line(bad, sizeof bad, 5, 0), 0);
  EXPECT_EQ(py_code_line(nullptr, 0, 5, 0), 0);
  std::mt19937 rng(18);
  std::vector<uint8_t> junk(256);
  for (int round = 0; round < 2000; ++round) {
    for (uint8_t &b : junk) b = static_cast<uint8_t>(rng());
    const int line = py_code_line(junk.data(), junk.size(), 1, static_cast<int64_t>(rng() % 1024));
    (void)line;  // any value: only no crash and no read past the end (ASan builds)
  }
}

Frame native(const std::string &function, bool inlined = false) {
  Frame f;
  f.function = function;
  f.module = "python3.12";
  f.path = "/usr/bin/python3.12";
  f.inlined = inlined;
  return f;
}

using test_frames::names;

TEST(PythonFrame, NameIsBasenameLineFunction) {
  EXPECT_EQ(python_frame("Model.forward", "/src/pkg/model.py", 10).name(), "model.py:10 Model.forward");
  EXPECT_EQ(python_frame("Model.forward", "/src/pkg/model.py", 10).text(), "model.py:10 Model.forward");
  EXPECT_EQ(python_frame("f", "x.py", -1).name(), "x.py:? f");
  EXPECT_EQ(python_frame("?", "", 0).name(), "[python] ?");
}

// Innermost first, as stacks are: the launch, ctypes, the inner loop run, a C call back into
// Python (a second loop run), the outer loop run, main.
const std::vector<Frame> kNative = {native("cuLaunchKernel"),   native("ffi_call"),
                                    native("_PyEval_EvalFrameDefault"), native("PyObject_Call"),
                                    native("_PyEval_EvalFrameDefault"), native("Py_RunMain"),
                                    native("main")};

PyFrameGroups two_groups() {
  return {{python_frame("inner", "/a/t.py", 3), python_frame("middle", "/a/t.py", 7)},
          {python_frame("outer", "/a/t.py", 11), python_frame("<module>", "/a/t.py", 20)}};
}

// The names of merge_python_frames' stack and its mismatch flag (set either way).
using Merged = std::pair<std::vector<std::string>, bool>;
Merged merged(const std::vector<Frame> &native, const PyFrameGroups &groups) {
  bool was_true = true, was_false = false;
  const std::vector<std::string> out = names(merge_python_frames(native, groups, &was_true));
  EXPECT_EQ(names(merge_python_frames(native, groups, &was_false)), out);
  EXPECT_EQ(was_true, was_false);
  return {out, was_false};
}

TEST(PythonMerge, EachLoopRunReplacesItsInterpreterFrame) {
  EXPECT_EQ(merged(kNative, two_groups()), (Merged{{"cuLaunchKernel", "ffi_call", "t.py:3 inner",
                                                    "t.py:7 middle", "PyObject_Call", "t.py:11 outer",
                                                    "t.py:20 <module>", "Py_RunMain", "main"}, false}));
}

TEST(PythonMerge, NoPythonFramesLeavesTheNativeStack) {
  bool mismatch = false;
  EXPECT_EQ(names(merge_python_frames(kNative, {}, &mismatch)), names(kNative));
  EXPECT_TRUE(mismatch);  // interpreter frames without Python runs
}

TEST(PythonMerge, MoreRunsThanInterpreterFramesGoToTheOutermost) {
  // The native unwind ended after the first interpreter frame.
  const std::vector<Frame> cut(kNative.begin(), kNative.begin() + 4);
  EXPECT_EQ(merged(cut, two_groups()), (Merged{{"cuLaunchKernel", "ffi_call", "t.py:3 inner",
                                                "t.py:7 middle", "t.py:11 outer", "t.py:20 <module>",
                                                "PyObject_Call"}, true}));
}

TEST(PythonMerge, NoInterpreterFrameAppendsOutside) {
  const std::vector<Frame> cut(kNative.begin(), kNative.begin() + 2);
  EXPECT_EQ(merged(cut, two_groups()), (Merged{{"cuLaunchKernel", "ffi_call", "t.py:3 inner",
                                                "t.py:7 middle", "t.py:11 outer", "t.py:20 <module>"}, true}));
}

TEST(PythonMerge, FewerRunsPairFromTheInnermost) {
  // The Python chain was cut at PT_PY_FRAMES_MAX: the outer interpreter frame stays native.
  EXPECT_EQ(merged(kNative, {two_groups()[0]}), (Merged{{"cuLaunchKernel", "ffi_call", "t.py:3 inner",
                                                         "t.py:7 middle", "PyObject_Call",
                                                         "_PyEval_EvalFrameDefault", "Py_RunMain", "main"}, true}));
}

TEST(PythonMerge, ColdPartOfTheLoopIsARunButNotOtherNames) {
  std::vector<Frame> n = kNative;
  n[2] = native("_PyEval_EvalFrameDefault.cold");
  n[4] = native("_PyEval_EvalFrameDefaultX");  // not the loop
  EXPECT_EQ(merged(n, {two_groups()[0]}), (Merged{{"cuLaunchKernel", "ffi_call", "t.py:3 inner",
                                                   "t.py:7 middle", "PyObject_Call",
                                                   "_PyEval_EvalFrameDefaultX", "Py_RunMain", "main"}, false}));
}

TEST(PythonMerge, InlinedCopiesOfTheLoopAreNotRuns) {
  std::vector<Frame> n = kNative;
  n.insert(n.begin() + 2, native("_PyEval_EvalFrameDefault", /*inlined=*/true));
  bool mismatch = true;
  const auto out = merge_python_frames(n, two_groups(), &mismatch);
  EXPECT_FALSE(mismatch);
  EXPECT_EQ(out.size(), 10u);
}

}  // namespace
}  // namespace parcagpu::trace

namespace parcagpu::trace {
namespace {

// The offsets in python.cc, checked against CPython's own headers where a development install
// has them (pyenv's ~/.pyenv/versions/3.1x.y/include/python3.1x, Debian's
// /usr/include/python3.1x): a program compiled with Py_BUILD_CORE prints offsetof() of each.
const char kOffsetsProgram[] = R"(
#define Py_BUILD_CORE 1
#include <Python.h>
#include <internal/pycore_runtime.h>
#include <internal/pycore_interp.h>
#include <internal/pycore_frame.h>
#include <internal/pycore_code.h>
#include <stddef.h>
#include <stdio.h>
#define P(name, expr) printf("%s %zu\n", name, (size_t)(expr))
int main(void) {
  P("runtime_interp_head", offsetof(_PyRuntimeState, interpreters.head));
  P("interp_threads_head", offsetof(PyInterpreterState, threads.head));
  P("tstate_next", offsetof(PyThreadState, next));
  P("tstate_native_thread_id", offsetof(PyThreadState, native_thread_id));
#if PY_VERSION_HEX >= 0x030d0000
  P("tstate_frame", offsetof(PyThreadState, current_frame));
  P("frame_code", offsetof(_PyInterpreterFrame, f_executable));
  P("frame_instr", offsetof(_PyInterpreterFrame, instr_ptr));
#else
  P("tstate_frame", offsetof(PyThreadState, cframe));
  P("cframe_current_frame", offsetof(_PyCFrame, current_frame));
  P("frame_code", offsetof(_PyInterpreterFrame, f_code));
  P("frame_instr", offsetof(_PyInterpreterFrame, prev_instr));
#endif
  P("frame_previous", offsetof(_PyInterpreterFrame, previous));
#if PY_VERSION_HEX >= 0x030c0000
  P("frame_entry", offsetof(_PyInterpreterFrame, owner));
  P("frame_owned_by_cstack", FRAME_OWNED_BY_CSTACK);
#else
  P("frame_entry", offsetof(_PyInterpreterFrame, is_entry));
#endif
#define CODE(field) P("code_" #field, offsetof(PyCodeObject, co_##field))
  CODE(filename); CODE(name); CODE(qualname); CODE(firstlineno); CODE(linetable);
  P("code_adaptive", offsetof(PyCodeObject, co_code_adaptive));
  P("ascii_size", sizeof(PyASCIIObject));
  P("compact_utf8", offsetof(PyCompactUnicodeObject, utf8));
  P("compact_size", sizeof(PyCompactUnicodeObject));
  P("bytes_size", offsetof(PyBytesObject, ob_base.ob_size));
  P("bytes_sval", offsetof(PyBytesObject, ob_sval));
  P("ascii_length", offsetof(PyASCIIObject, length));
  P("ascii_state", offsetof(PyASCIIObject, state));
  return 0;
}
)";

std::map<std::string, uint64_t> layout_fields(const PyLayout &l) {
  std::map<std::string, uint64_t> m = {
      {"runtime_interp_head", l.runtime_interp_head},
      {"interp_threads_head", l.bpf.interp_threads_head},
      {"tstate_next", l.bpf.tstate_next},
      {"tstate_native_thread_id", l.bpf.tstate_native_thread_id},
      {"tstate_frame", l.bpf.tstate_frame},
      {"frame_code", l.bpf.frame_code},
      {"frame_instr", l.bpf.frame_instr},
      {"frame_previous", l.bpf.frame_previous},
      {"frame_entry", l.bpf.frame_entry},
      {"code_filename", l.code_filename},
      {"code_name", l.code_name},
      {"code_qualname", l.code_qualname},
      {"code_firstlineno", l.code_firstlineno},
      {"code_linetable", l.code_linetable},
      {"code_adaptive", l.code_adaptive},
      {"ascii_size", l.ascii_size},
      {"compact_utf8", l.compact_utf8},
      {"compact_size", l.compact_size},
      // Fixed in python.cc's readers (PyBytesObject, PyASCIIObject).
      {"bytes_size", 16},
      {"bytes_sval", 32},
      {"ascii_length", 16},
      {"ascii_state", 32},
  };
  if (l.bpf.cframe_current_frame != PT_PY_NO_FIELD) m["cframe_current_frame"] = l.bpf.cframe_current_frame;
  if (l.owner_field) m["frame_owned_by_cstack"] = kPyFrameOwnedByCStack;
  return m;
}

TEST(PythonLayout, MatchesCpythonHeaders) {
  std::vector<std::string> includes;
  const char *home = std::getenv("HOME");
  for (const std::string &pattern : {std::string(home ? home : "/root") + "/.pyenv/versions/3.1*/include/python3.1*",
                                    std::string("/usr/include/python3.1*")}) {
    glob_t g{};
    if (glob(pattern.c_str(), 0, nullptr, &g) == 0)
      for (size_t i = 0; i < g.gl_pathc; ++i)
        if (access((std::string(g.gl_pathv[i]) + "/internal/pycore_frame.h").c_str(), R_OK) == 0)
          includes.push_back(g.gl_pathv[i]);
    globfree(&g);
  }
  char dir[] = "/tmp/parcagpu-pylayout-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string src = std::string(dir) + "/offsets.c", exe = std::string(dir) + "/offsets";
  FILE *f = std::fopen(src.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs(kOffsetsProgram, f);
  std::fclose(f);
  int checked = 0;
  for (const std::string &inc : includes) {
    const std::string ver = inc.substr(inc.rfind("python") + 6);  // "3.12"
    const int minor = std::atoi(ver.c_str() + 2);
    if (minor < 11) continue;
    SCOPED_TRACE(inc);
    const std::string cc = "cc -w -I'" + inc + "' -I'" + inc + "/internal' -o '" + exe + "' '" + src + "' 2>/dev/null";
    if (std::system(cc.c_str()) != 0) {
      ADD_FAILURE() << "could not compile against " << inc;
      continue;
    }
    const PyLayout *l = py_layout(3, minor);
    ASSERT_NE(l, nullptr) << "no layout for 3." << minor;
    std::map<std::string, uint64_t> got;
    FILE *p = popen(("'" + exe + "'").c_str(), "r");
    ASSERT_NE(p, nullptr);
    char name[64];
    unsigned long long v = 0;
    while (std::fscanf(p, "%63s %llu", name, &v) == 2) got[name] = v;
    pclose(p);
    EXPECT_EQ(got, layout_fields(*l));
    ++checked;
  }
  std::remove(src.c_str());
  std::remove(exe.c_str());
  rmdir(dir);
  if (checked == 0) GTEST_SKIP() << "no CPython 3.11+ headers with internal/ here";
}

}  // namespace
}  // namespace parcagpu::trace

namespace parcagpu::trace {
namespace {

// Code objects as CPython 3.12 lays them out, built in this process's memory and read back
// through process_vm_readv on our own pid: the reader, not CPython, is under test here.
struct FakeObjects {
  alignas(8) uint8_t code[256] = {};
  alignas(8) uint8_t filename[128] = {};
  alignas(8) uint8_t qualname[128] = {};
  alignas(8) uint8_t linetable[32 + sizeof kTable312] = {};

  static void put64(uint8_t *obj, size_t off, uint64_t v) { std::memcpy(obj + off, &v, 8); }
  static void ascii(uint8_t *obj, const char *s) {
    put64(obj, 16, std::strlen(s));
    const uint32_t state = (1u << 2) | (1u << 5) | (1u << 6);  // kind 1, compact, ascii
    std::memcpy(obj + 32, &state, 4);
    std::memcpy(obj + 40, s, std::strlen(s));  // sizeof(PyASCIIObject) in 3.12
  }
  FakeObjects() {
    const PyLayout &l = *py_layout(3, 12);
    ascii(filename, "/srv/app/train.py");
    // "stép": not ASCII, 2-byte kind: code units after PyCompactUnicodeObject.
    const uint16_t step[] = {'s', 't', 0xe9, 'p'};
    put64(qualname, 16, 4);
    const uint32_t state = (2u << 2) | (1u << 5);
    std::memcpy(qualname + 32, &state, 4);
    std::memcpy(qualname + l.compact_size, step, sizeof step);
    put64(linetable, 16, sizeof kTable312);
    std::memcpy(linetable + 32, kTable312, sizeof kTable312);
    put64(code, l.code_filename, reinterpret_cast<uint64_t>(filename));
    put64(code, l.code_qualname, reinterpret_cast<uint64_t>(qualname));
    put64(code, l.code_linetable, reinterpret_cast<uint64_t>(linetable));
    const int32_t first = 2;
    std::memcpy(code + l.code_firstlineno, &first, 4);
  }
  uint64_t addr() const { return reinterpret_cast<uint64_t>(code); }
  uint64_t instr(int offset) const { return addr() + py_layout(3, 12)->code_adaptive + offset; }
};

TEST(PythonFrames, ReadsCodeObjectsAndSplitsRunsAtShims) {
  FakeObjects o;
  PythonFrames pf;
  const uint32_t pid = static_cast<uint32_t>(getpid());
  pf.add_process(pid, py_layout(3, 12));
  pt_py_stack s{};
  // Innermost first: our frame at offset 12 (line 4), the first loop's shim, an unreadable code
  // object, our frame at offset 100 (line 10), the second loop's shim.
  const uint64_t codes[] = {o.addr(), 0, 0x10, o.addr(), 0};
  const uint64_t instrs[] = {o.instr(12), 0, 0, o.instr(100), 0};
  const uint8_t entries[] = {0, kPyFrameOwnedByCStack, 0, 0, kPyFrameOwnedByCStack};
  s.count = 5;
  for (int i = 0; i < 5; ++i) {
    s.code[i] = codes[i];
    s.instr[i] = instrs[i];
    s.entry[i] = entries[i];
  }
  Counters c;
  const PyFrameGroups g = pf.groups(pid, s, &c);
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(names(g[0]), (std::vector<std::string>{"train.py:4 st\xc3\xa9p"}));
  EXPECT_EQ(names(g[1]), (std::vector<std::string>{"[python] ?", "train.py:10 st\xc3\xa9p"}));
  EXPECT_EQ(g[0][0].file, "/srv/app/train.py");
  EXPECT_EQ(c.python_frames, 3u);
  EXPECT_EQ(c.python_frame_read_errors, 1u);
  // A process the reader does not know: nothing, no reads.
  EXPECT_TRUE(pf.groups(pid + 1, s, &c).empty());
}

}  // namespace
}  // namespace parcagpu::trace

namespace parcagpu::trace {
namespace {

// _Py_DebugOffsets words as 3.13 fills them (the table's values where it has them).
std::vector<uint64_t> debug_words_313() {
  const PyLayout &t = *py_layout(3, 13);
  std::vector<uint64_t> d(kPyDebugOffsetsWords, 0);
  std::memcpy(d.data(), "xdebugpy", 8);
  d[1] = 0x030d00f0;  // 3.13.0 final
  d[2] = 0;           // not free-threaded
  d[5] = t.runtime_interp_head;
  d[9] = t.bpf.interp_threads_head;
  d[21] = t.bpf.tstate_next;
  d[23] = t.bpf.tstate_frame;
  d[25] = t.bpf.tstate_native_thread_id;
  d[29] = t.bpf.frame_previous;
  d[30] = t.bpf.frame_code;
  d[31] = t.bpf.frame_instr;
  d[33] = t.bpf.frame_entry;
  d[35] = t.code_filename;
  d[36] = t.code_name;
  d[37] = t.code_qualname;
  d[38] = t.code_linetable;
  d[39] = t.code_firstlineno;
  d[43] = t.code_adaptive;
  return d;
}

TEST(PythonLayout, DebugOffsetsOf313) {
  const PyLayout &t = *py_layout(3, 13);
  std::vector<uint64_t> d = debug_words_313();
  const PyLayout *l = py_layout_from_debug_offsets(d, 13);
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(layout_fields(*l), layout_fields(t));
  EXPECT_EQ(py_layout_from_debug_offsets(d, 13), l);  // the same layout kept once
  d[9] += 8;  // a 3.13.x whose interpreter state grew: its own offsets are used
  const PyLayout *moved = py_layout_from_debug_offsets(d, 13);
  ASSERT_NE(moved, nullptr);
  EXPECT_EQ(moved->bpf.interp_threads_head, t.bpf.interp_threads_head + 8);
  d = debug_words_313();
  d[2] = 1;  // free-threaded
  EXPECT_EQ(py_layout_from_debug_offsets(d, 13), nullptr);
  d = debug_words_313();
  d[0] ^= 1;  // no cookie
  EXPECT_EQ(py_layout_from_debug_offsets(d, 13), nullptr);
  EXPECT_EQ(py_layout_from_debug_offsets(debug_words_313(), 12), nullptr);
  EXPECT_EQ(py_layout_from_debug_offsets({}, 13), nullptr);
}

}  // namespace
}  // namespace parcagpu::trace
