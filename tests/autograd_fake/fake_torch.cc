// A fake libtorch_cpu.so for tests/integration/test_trace_autograd.py: the mechanism by which
// PyTorch's eager backward runs, reduced to what parcagpu-trace's autograd probes look at
// (tools/trace/autograd.h), with PyTorch's names, so that the symbols are those of the real library:
//   * at::sequence_number::get_and_increment() numbers each Node as it is created (forward);
//   * torch::autograd::Engine::evaluate_function(std::shared_ptr<GraphTask>&, Node*, InputBuffer&,
//     const std::shared_ptr<ReadyQueue>&) runs one Node (backward) on an engine thread that has
//     no Python frames;
//   * Node : std::enable_shared_from_this<Node>, its vtable pointer at 0 and sequence_nr_ at 24,
//     as in torch/csrc/autograd/function.h; node classes in torch::autograd::generated.
// Called from Python through ctypes (tests/programs/autograd_fake.py):
//   fake_torch_init(launch, function): the mock driver's mock_cuda_launch and mock_cuda_function
//   forward_op(kind): creates a Node of kind 0 MmBackward0, 1 ReluBackward0, 2 SoftmaxBackward0
//     and launches its forward kernel (fwd_mm, fwd_relu, fwd_softmax)
//   run_backward(): an engine thread runs evaluate_function on each Node created since the last
//     call, in reverse order; each Node's apply launches its backward kernel (bwd_mm, ...)
//   node_seq_offset(): where sequence_nr_ is (the test checks it is 24)
#include <cstddef>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

namespace at {
namespace sequence_number {
uint64_t get_and_increment();
}  // namespace sequence_number
}  // namespace at

namespace {
using LaunchFn = int (*)(uint32_t domain, uint32_t cbid, void *f, void *stream);
using FunctionFn = void *(*)(const char *name);
LaunchFn g_launch = nullptr;
FunctionFn g_function = nullptr;
constexpr uint32_t kDriver = 1;          // MOCK_CUDA_DOMAIN_DRIVER
constexpr uint32_t kCuLaunchKernel = 307;

__attribute__((noinline)) int launch(const char *kernel) {
  if (!g_launch || !g_function) return -1;
  return g_launch(kDriver, kCuLaunchKernel, g_function(kernel), nullptr);
}
}  // namespace

namespace torch {
namespace autograd {

struct GraphTask {};
struct InputBuffer {};
struct ReadyQueue {};

struct Node : std::enable_shared_from_this<Node> {
  Node() : sequence_nr_(at::sequence_number::get_and_increment()) {}
  virtual ~Node();
  virtual int apply() = 0;
  const uint64_t sequence_nr_;
  uint64_t topological_nr_ = 0;
};
Node::~Node() = default;

namespace generated {
struct MmBackward0 : Node {
  int apply() override;
};
struct ReluBackward0 : Node {
  int apply() override;
};
struct SoftmaxBackward0 : Node {
  int apply() override;
};
__attribute__((noinline)) int MmBackward0::apply() { return launch("bwd_mm"); }
__attribute__((noinline)) int ReluBackward0::apply() { return launch("bwd_relu"); }
__attribute__((noinline)) int SoftmaxBackward0::apply() { return launch("bwd_softmax"); }
}  // namespace generated

struct Engine {
  void evaluate_function(std::shared_ptr<GraphTask> &graph_task, Node *func, InputBuffer &inputs,
                         const std::shared_ptr<ReadyQueue> &cpu_ready_queue);
  int failed = 0;
};

__attribute__((noinline)) void Engine::evaluate_function(std::shared_ptr<GraphTask> &, Node *func, InputBuffer &,
                                                         const std::shared_ptr<ReadyQueue> &) {
  failed += func->apply() != 0;
}

}  // namespace autograd
}  // namespace torch

namespace {
namespace ta = torch::autograd;
std::vector<std::shared_ptr<ta::Node>> g_graph;  // the nodes of the forward since the last backward
}  // namespace

extern "C" {

void fake_torch_init(void *launch_fn, void *function_fn) {
  g_launch = reinterpret_cast<LaunchFn>(launch_fn);
  g_function = reinterpret_cast<FunctionFn>(function_fn);
}

int forward_op(int kind) {
  static const char *const kForward[] = {"fwd_mm", "fwd_relu", "fwd_softmax"};
  if (kind < 0 || kind > 2) return -1;
  std::shared_ptr<ta::Node> n;
  if (kind == 0) n = std::make_shared<ta::generated::MmBackward0>();
  if (kind == 1) n = std::make_shared<ta::generated::ReluBackward0>();
  if (kind == 2) n = std::make_shared<ta::generated::SoftmaxBackward0>();
  g_graph.push_back(n);
  return launch(kForward[kind]);
}

int run_backward() {
  std::vector<std::shared_ptr<ta::Node>> graph;
  graph.swap(g_graph);
  ta::Engine engine;
  std::thread worker([&] {
    auto task = std::make_shared<ta::GraphTask>();
    auto queue = std::make_shared<ta::ReadyQueue>();
    ta::InputBuffer inputs;
    for (auto it = graph.rbegin(); it != graph.rend(); ++it) engine.evaluate_function(task, it->get(), inputs, queue);
  });
  worker.join();
  return engine.failed;
}

long node_seq_offset() {
  ta::generated::MmBackward0 n;
  return reinterpret_cast<const char *>(&n.sequence_nr_) - reinterpret_cast<const char *>(&n);
}

}  // extern "C"
