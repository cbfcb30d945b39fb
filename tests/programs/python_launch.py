"""Launches k_add on the mock CUDA driver from a known chain of Python functions, through ctypes
(tests/integration/test_trace_python.py): <module> -> outer -> middle -> inner -> the mock
driver's mock_cuda_launch. Each call site carries a `# call:` marker that the test reads to know
the line every Python frame must show.

    python_launch.py LIBCUDA [LAUNCHES [--wait] [--threads]]   (the library: CUDA_INJECTION64_PATH)

With --threads the launches are made twice, from the main thread and from a second Python
thread (outer as its target), while a third Python thread sits idle: the tool must find each
launching thread's state among several.

With --wait it reads a line from stdin before its first launch (the test sends it once
parcagpu-trace has said it knows this process runs Python: launches before that carry no Python
frames) and stays alive after its launches until its stdin closes (the tool reads the code
objects of a launch's Python frames from the live process: the test stops it first).
"""
import ctypes
import sys
import threading

DRIVER = 1  # MOCK_CUDA_DOMAIN_DRIVER
CBID_cuLaunchKernel = 307


def inner(cuda, f):
    return cuda.mock_cuda_launch(DRIVER, CBID_cuLaunchKernel, f, None)  # call: inner


def middle(cuda, f):
    r = inner(cuda, f)  # call: middle
    return r


def outer(cuda, f, launches):
    failed = 0
    for _ in range(launches):
        failed += middle(cuda, f) != 0  # call: outer
    return failed


cuda = ctypes.CDLL(sys.argv[1])
cuda.mock_cuda_function.restype = ctypes.c_void_p
cuda.mock_cuda_function.argtypes = [ctypes.c_char_p]
cuda.mock_cuda_launch.restype = ctypes.c_int
cuda.mock_cuda_launch.argtypes = [ctypes.c_uint32, ctypes.c_uint32, ctypes.c_void_p, ctypes.c_void_p]
cuda.mock_cuda_device_synchronize.restype = ctypes.c_int
launches = int(sys.argv[2]) if len(sys.argv) > 2 else 100
k_add = cuda.mock_cuda_function(b"k_add")
wait = "--wait" in sys.argv
if wait:
    sys.stdin.readline()
idle = threading.Event()
threads = "--threads" in sys.argv
if threads:
    threading.Thread(target=idle.wait).start()
failed = outer(cuda, k_add, launches)  # call: <module>
if threads:
    results = []
    worker = threading.Thread(target=lambda: results.append(outer(cuda, k_add, launches)))
    worker.start()
    worker.join()
    failed += results[0] if results else 1
    launches *= 2
    idle.set()
cuda.mock_cuda_device_synchronize()
print("python_launch: %d launches, %d failed" % (launches, failed), flush=True)
if wait:
    sys.stdin.read()
sys.exit(1 if failed else 0)
