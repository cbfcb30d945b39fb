// PyTorch autograd in launch stacks: a kernel launched while autograd's engine runs a Node (the
// backward, on an engine thread with no Python frames) is put under the Python frames of the
// forward call that created that Node, with a frame naming the Node between them:
//   train.py:41 forward;[backward] MmBackward0;<native frames of the backward>;[gpu] kernel
// found from the running process, nothing changed in it (no anomaly mode, no profiler).
//
// BPF (parcagpu_trace.bpf.c, autograd_*): a uretprobe on at::sequence_number::get_and_increment
// (the number of every new Node) keeps the numbering thread's Python frames by (pid, number); a
// uprobe and a uretprobe on torch::autograd::Engine::evaluate_function keep, per thread, the
// Node being run (its vtable pointer and sequence_nr_); a launch on such a thread takes the kept
// forward frames in place of its own (PT_F_AUTOGRAD). This file is the userland half: which
// libtorch_cpu.so files to attach to and with which layout (the table below, by the torch
// version of torch/version.py beside the library), the Node's name from its vtable pointer, and
// the stack put together.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "symbolizer.h"

namespace parcagpu::trace {

// What is attached to a libtorch_cpu.so of one torch major.minor. CHECK ON THE DEVICE: these
// rows are from PyTorch's source (aten/src/ATen/SequenceNumber.h, torch/csrc/autograd/engine.h,
// function.h) and the mangling g++ gives the same declarations; scripts/autograd-layout-check.py,
// run under a real torch, prints the symbols the library exports and the offset of sequence_nr_
// found in a live Node. A version not in the table: nothing attached, counted
// (autograd_layout_unknown), its backward launches keep their native stacks.
struct AutogradLayout {
  int major, minor;
  const char *seq_symbol;   // uint64_t at::sequence_number::get_and_increment()
  const char *eval_symbol;  // void Engine::evaluate_function(shared_ptr<GraphTask>&, Node*,
                            //   InputBuffer&, const shared_ptr<ReadyQueue>&): Node* = arg 3
  uint32_t node_seq_offset; // Node::sequence_nr_ (vptr 8 + enable_shared_from_this's weak_ptr 16)
};
const AutogradLayout *autograd_layout(int major, int minor);

// A file named libtorch_cpu.so*?
bool is_libtorch_cpu(const std::string &path);
// "__version__ = '2.11.0+cu130'" (torch/version.py) -> 2, 11; false when not found.
bool parse_torch_version(const std::string &version_py, int *major, int *minor, std::string *version);
// torch/version.py of the torch whose lib/ holds `lib_path` (read through `root`, "" or
// "/proc/PID/root"); false when it cannot be read or parsed.
bool torch_version_of(const std::string &root, const std::string &lib_path, int *major, int *minor,
                      std::string *version);

// "vtable for torch::autograd::generated::MmBackward0" -> "MmBackward0" (the class without its
// namespaces); "" when it is not a vtable's name.
std::string node_class_from_vtable(const std::string &demangled);

// Node names by vtable pointer, per process: the symbol (a _ZTV...) that covers the address in
// the executable-mapped files of the process (`maps`), ELF symbol tables read once per file.
class AutogradNames {
 public:
  std::string name(uint32_t pid, uint64_t vtable, const std::vector<MapEntry> &maps);
  void forget(uint32_t pid) { names_.erase(pid); }

 private:
  struct File {
    struct Seg {
      uint64_t vaddr, offset, filesz, memsz;
    };
    std::vector<Seg> loads;
    std::map<uint64_t, std::pair<uint64_t, std::string>> vtables;  // start -> size, mangled name
  };
  const File *file(uint32_t pid, const MapEntry &m);
  std::map<std::string, std::optional<File>> files_;
  std::map<uint32_t, std::map<uint64_t, std::string>> names_;
};

// The stack of a launch in an autograd Node, innermost first: the native frames from the launch
// out to Engine::evaluate_function (all of them when it is not among them), the Node's frame
// "[backward] NAME", then the forward call's Python frames (`forward`, innermost first; none
// when they were not found).
// With `linked` false (the forward frames were not found): all of `native`, the Node's frame after
// evaluate_function's (or outermost).
std::vector<Frame> autograd_stack(const std::vector<Frame> &native, const std::string &node,
                                  const std::vector<Frame> &forward, bool linked = true);

}  // namespace parcagpu::trace
