// The pure parts of tools/trace/autograd.cc: the torch version, the node's name from its vtable symbol,
// the layout table, and the stack put together.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "autograd.h"
#include "python.h"
#include "test_frames.h"

namespace parcagpu::trace {
namespace {

Frame native(const std::string &function) {
  Frame f;
  f.function = function;
  f.module = "libtorch_cpu.so";
  return f;
}

using test_frames::names;

TEST(Autograd, TorchVersion) {
  int major = 0, minor = 0;
  std::string v;
  ASSERT_TRUE(parse_torch_version("__version__ = '2.11.0+cu130'\ndebug = False\n", &major, &minor, &v));
  EXPECT_EQ(major, 2);
  EXPECT_EQ(minor, 11);
  EXPECT_EQ(v, "2.11.0+cu130");
  ASSERT_TRUE(parse_torch_version("__version__ = \"2.9.1\"", &major, &minor, &v));
  EXPECT_EQ(minor, 9);
  EXPECT_FALSE(parse_torch_version("version = 'x'", &major, &minor, &v));
  EXPECT_FALSE(is_libtorch_cpu("/x/torch/lib/libtorch_cuda.so"));
  EXPECT_TRUE(is_libtorch_cpu("/x/torch/lib/libtorch_cpu.so"));
  EXPECT_TRUE(is_libtorch_cpu("/x/torch/lib/libtorch_cpu.so (deleted)"));
}

TEST(Autograd, LayoutTable) {
  const AutogradLayout *l = autograd_layout(2, 11);
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->node_seq_offset, 24u);
  // What g++ makes of engine.h's declaration (the fake library's symbol is the same).
  EXPECT_STREQ(l->eval_symbol,
               "_ZN5torch8autograd6Engine17evaluate_functionERSt10shared_ptrINS0_9GraphTaskEEPNS0_4NodeERNS0_"
               "11InputBufferERKS2_INS0_10ReadyQueueEE");
  EXPECT_EQ(autograd_layout(9, 9), nullptr);
}

TEST(Autograd, NodeName) {
  EXPECT_EQ(node_class_from_vtable("vtable for torch::autograd::generated::MmBackward0"), "MmBackward0");
  EXPECT_EQ(node_class_from_vtable("vtable for torch::autograd::PyNode"), "PyNode");
  EXPECT_EQ(node_class_from_vtable("vtable for torch::autograd::CppNode<ns::Fn>"), "CppNode<ns::Fn>");
  EXPECT_EQ(node_class_from_vtable("typeinfo for x"), "");
  EXPECT_EQ(demangle("_ZTVN5torch8autograd9generated11MmBackward0E"),
            "vtable for torch::autograd::generated::MmBackward0");
}

TEST(Autograd, Stack) {
  const std::vector<Frame> backward = {
      native("launch"), native("torch::autograd::generated::MmBackward0::apply(...)"),
      native("void torch::autograd::Engine::evaluate_function(std::shared_ptr<GraphTask>&, Node*)"),
      native("torch::autograd::Engine::thread_main"), native("start_thread")};
  const std::vector<Frame> forward = {python_frame("forward", "/m/model.py", 41),
                                      python_frame("<module>", "/m/train.py", 7)};
  EXPECT_EQ(names(autograd_stack(backward, "MmBackward0", forward)),
            (std::vector<std::string>{"launch", "torch::autograd::generated::MmBackward0::apply",
                                      "torch::autograd::Engine::evaluate_function", "[backward] MmBackward0",
                                      "model.py:41 forward", "train.py:7 <module>"}));
  // Not linked: everything kept, the node's frame after evaluate_function.
  EXPECT_EQ(names(autograd_stack(backward, "MmBackward0", {}, false)),
            (std::vector<std::string>{"launch", "torch::autograd::generated::MmBackward0::apply",
                                      "torch::autograd::Engine::evaluate_function", "[backward] MmBackward0",
                                      "torch::autograd::Engine::thread_main", "start_thread"}));
  // No evaluate_function among the frames (an unwind cut short): all of them, then the node.
  const std::vector<Frame> shallow = {native("launch")};
  EXPECT_EQ(names(autograd_stack(shallow, "X", forward)),
            (std::vector<std::string>{"launch", "[backward] X", "model.py:41 forward", "train.py:7 <module>"}));
  // A walk cut before the thread's start ends its native frames with "[stack cut short]"
  // (tracer.cc): it stays where the cut is, or goes with the frames dropped beyond
  // evaluate_function.
  Frame cut;
  cut.function = "[stack cut short]";
  cut.label = true;
  std::vector<Frame> cut_inside = {native("launch"), cut};  // cut before evaluate_function
  EXPECT_EQ(names(autograd_stack(cut_inside, "X", forward)),
            (std::vector<std::string>{"launch", "[stack cut short]", "[backward] X", "model.py:41 forward",
                                      "train.py:7 <module>"}));
  std::vector<Frame> cut_beyond = backward;  // cut after evaluate_function
  cut_beyond.push_back(cut);
  EXPECT_EQ(names(autograd_stack(cut_beyond, "MmBackward0", forward)).back(), "train.py:7 <module>");
  EXPECT_EQ(names(autograd_stack(cut_beyond, "MmBackward0", {}, false)).back(), "[stack cut short]");
  const Frame label = autograd_stack(shallow, "X", {})[1];
  EXPECT_EQ(label.text(), "[backward] X");
}

}  // namespace
}  // namespace parcagpu::trace
