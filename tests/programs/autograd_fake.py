"""An eager "training step" in the shape of PyTorch's, on the fake libtorch_cpu.so
(tests/autograd_fake) and the mock CUDA driver, for tests/integration/test_trace_autograd.py:
each forward op (its own line, marked `# node: NAME`) creates an autograd Node of that class and
launches its forward kernel; run_backward() then runs the Nodes in reverse on an engine thread
with no Python frames, each launching its backward kernel (bwd_mm, bwd_relu, bwd_softmax).

    autograd_fake.py TORCH_LIB LIBCUDA STEPS [--wait]   (the library: CUDA_INJECTION64_PATH)

With --wait it reads a line from stdin before its first step (the test sends it once
parcagpu-trace has attached its autograd probes to TORCH_LIB) and stays alive after its steps
until its stdin closes (the tool reads the code objects from the live process).
"""
import ctypes
import sys
import time

torch_lib = ctypes.CDLL(sys.argv[1])
cuda = ctypes.CDLL(sys.argv[2])
steps = int(sys.argv[3])
wait = "--wait" in sys.argv
cuda.mock_cuda_function.restype = ctypes.c_void_p
cuda.mock_cuda_function.argtypes = [ctypes.c_char_p]
cuda.mock_cuda_device_synchronize.restype = ctypes.c_int
torch_lib.fake_torch_init.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
torch_lib.fake_torch_init(ctypes.cast(cuda.mock_cuda_launch, ctypes.c_void_p),
                          ctypes.cast(cuda.mock_cuda_function, ctypes.c_void_p))
assert torch_lib.node_seq_offset() == 24, torch_lib.node_seq_offset()


def linear(x):
    return torch_lib.forward_op(0)  # node: MmBackward0


def activation(x):
    return torch_lib.forward_op(1)  # node: ReluBackward0


def head(x):
    return torch_lib.forward_op(2)  # node: SoftmaxBackward0


def forward(x):
    failed = linear(x)
    failed += activation(x)
    failed += head(x)
    return failed


def step():
    failed = forward(None)
    failed += torch_lib.run_backward()
    return failed


if wait:
    sys.stdin.readline()
failed = 0
start = time.perf_counter()
for _ in range(steps):
    failed += step()
elapsed = time.perf_counter() - start
cuda.mock_cuda_device_synchronize()
print("autograd_fake: %d steps, %d failed, %.1f us a step" % (steps, failed, 1e6 * elapsed / max(steps, 1)),
      flush=True)
if wait:
    sys.stdin.read()
sys.exit(1 if failed else 0)
