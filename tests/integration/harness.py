"""Shared helpers of the integration tests: run the mock application under the library, with
real eBPF consumers (bpftrace, parcagpu-trace and the agent-faithful agent-consumer) attached to
the library's USDT probes.

Paths come from the environment that ctest sets (PARCAGPU_BUILD_DIR, PARCAGPU_SOURCE_DIR), so
the tests run against the build they belong to. PARCAGPU_TEST_LIB runs them against another
build of the library (for example an old one, to show a test red), with this build's mock
application and consumers.
"""
import atexit
import ctypes
import functools
import glob
import json
import os
import re
import shlex
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest

SOURCE = os.environ.get("PARCAGPU_SOURCE_DIR",
                        os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
BUILD = os.environ.get("PARCAGPU_BUILD_DIR", os.path.join(SOURCE, "build"))

# What this test process has to itself, so that ctest runs integration tests side by side (ctest
# -j) as if each had its own machine: consumers attach to a library *file* and see every process
# that maps it, PC sampling's locks are per directory, and the mock has one GPU per lock file. So
# each test process gets a directory (removed at exit) with its own copy of the library (LIB,
# below), its own PC lock directory (PC_LOCK_DIR) and its own mock GPU (MOCK_GPU_LOCK).
PRIVATE_ROOT = os.path.join(BUILD, "test-private")


def _processes_using(directory):
    """PIDs of the processes (not this one) whose command line or mappings name a file under
    `directory`: the mock apps, programs and consumers a test started on its copy of the library."""
    found = []
    needle = os.path.join(directory, "").encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open("/proc/%s/cmdline" % entry, "rb") as f:
                named = needle in f.read()
            if not named:
                with open("/proc/%s/maps" % entry, "rb") as f:
                    named = needle in f.read()
        except OSError:
            continue  # gone meanwhile, or a kernel thread
        if named:
            found.append(int(entry))
    return found


def reap(directory):
    """Kills (SIGKILL, by PID) what a test process left running on the files of its private
    directory, and removes the directory. A test that fails half-way, or that ctest kills at its
    timeout, leaves its mock app and consumers behind; side by side they would load the machine,
    or hold uprobes, for the tests after it."""
    for pid in _processes_using(directory):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    shutil.rmtree(directory, True)


def _owner_alive(name):
    """Whether the test process a private directory PID.xxx belongs to still runs."""
    try:
        with open("/proc/%d/cmdline" % int(name.split(".", 1)[0]), "rb") as f:
            return b"python" in f.read()
    except (OSError, ValueError):
        return False


def reap_leftovers():
    """reap() for the private directory of every test process that is gone (killed, so its own
    atexit never ran)."""
    if os.path.isdir(PRIVATE_ROOT):
        for name in os.listdir(PRIVATE_ROOT):
            if not _owner_alive(name):
                reap(os.path.join(PRIVATE_ROOT, name))


os.makedirs(PRIVATE_ROOT, exist_ok=True)
reap_leftovers()
PRIVATE_DIR = tempfile.mkdtemp(prefix="%d." % os.getpid(), dir=PRIVATE_ROOT)
atexit.register(reap, PRIVATE_DIR)


def _private_copy(lib):
    """`lib` copied into PRIVATE_DIR under its own name: a file (an inode) no other test maps."""
    copy = os.path.join(PRIVATE_DIR, "lib", os.path.basename(lib))
    os.makedirs(os.path.dirname(copy), exist_ok=True)
    shutil.copy2(lib, copy)
    return copy


# PARCAGPU_TEST_LIB: run the suite against another build of the library (an older commit's, to
# show a new test red). Either way, the tests run this process's copy of it.
SHARED_LIB = os.environ.get("PARCAGPU_TEST_LIB") or os.path.join(BUILD, "lib", "libparcagpu.so")
LIB = _private_copy(SHARED_LIB) if os.path.exists(SHARED_LIB) else SHARED_LIB
MOCKAPP = os.path.join(BUILD, "bin", "parcagpu-mockapp")
MOCK_DIR = os.path.join(BUILD, "mock")
# Sanitizer builds (make test-sanitize) have no parcagpu-trace of their own: the consumer is not
# under test there, and the plain build's is used.
TRACE = os.environ.get("PARCAGPU_TRACE", os.path.join(BUILD, "bin", "parcagpu-trace"))
AGENT_CONSUMER = os.path.join(BUILD, "bin", "agent-consumer")
AGENT_FAKE_PRODUCER = os.path.join(BUILD, "bin", "agent-fake-producer")
CBIDS_TOOL = os.path.join(BUILD, "bin", "parcagpu-cbids")
BT_SCRIPT = os.path.join(SOURCE, "scripts", "parcagpu.bt")

# Which CUPTI the mock presents to the whole suite (ctest registers the integration tests twice:
# as is, CUDA 13, and with MOCK_CUPTI_PERSONALITY=12). Under 12 the mock app also "links" the
# CUDA 12 runtime (build/mock/cudart/libcudart.so.12), as a CUDA 12 application would, so the
# library's search looks for a CUDA 12 CUPTI and finds build/mock/libcupti.so.12.
PERSONALITY = os.environ.get("MOCK_CUPTI_PERSONALITY", "")
CUDART = {12: os.path.join(MOCK_DIR, "cudart", "libcudart.so.12"),
          13: os.path.join(MOCK_DIR, "cudart", "libcudart.so.13")}
# Where a CUDA installation is: the library's search goes there before the loader path, so the
# suite's runs never inherit them (a test that wants one sets it).
CUDA_LOCATION_VARS = ("CUDA_HOME", "CUDA_PATH", "CONDA_PREFIX")

PC_LOCK_DIR = os.path.join(PRIVATE_DIR, "pc-locks")
os.makedirs(PC_LOCK_DIR, exist_ok=True)
# The mock GPU's PC sampling unit (tools/mock/cupti_mock_pcsampling.cc, gpu_lock_path), this
# test's own; also for the processes a test starts with an environment of its own making.
MOCK_GPU_LOCK = os.path.join(PRIVATE_DIR, "mock-gpu-pc.lock")
os.environ["MOCK_CUPTI_GPU_LOCK"] = MOCK_GPU_LOCK

# The mock cubin's kernels whose mangled names are longer than a consumer reads
# (tools/mock/pc_kernels.cu): `name`<`template_arg`>(float*) in LONG_NAMESPACE, and in
# LONG_NESTED inside it where `nested`.
LONG_NAMESPACE = ("a_namespace_whose_name_alone_is_longer_than_the_production_agents_cut_of_pc_"
                  "function_names_at_127_bytes_so_that_every_kernel_in_it_is_cut_there")
LONG_NESTED = ("and_a_second_one_nested_in_it_so_that_the_whole_mangled_name_is_longer_than_the_"
               "production_agents_cut_of_kernel_names_at_255_bytes_as_well")


def long_kernel_name(name, template_arg, nested):
    """The mangled name of one of those kernels."""
    parts = [LONG_NAMESPACE] + ([LONG_NESTED] if nested else []) + [name]
    return "_ZN" + "".join("%d%s" % (len(p), p) for p in parts) + "ILi%dEEEvPf" % template_arg


# Rate limits high enough that every launch of a test run is announced.
UNLIMITED = {"PARCAGPU_RATE_LIMIT": "100000000", "PARCAGPU_GRAPH_RATE_LIMIT": "100000000"}


def base_env(extra=None):
    """The environment of a mock app run: the mock libcupti/libcuda first on the search path
    (this machine may have a real libcupti in ldconfig), no inherited PARCAGPU_/MOCK_ knobs."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PARCAGPU_", "MOCK_CUPTI_", "MOCK_CUDA_", "MOCKAPP_",
                                "CUDA_INJECTION64"))
           and k not in CUDA_LOCATION_VARS}
    env["LD_LIBRARY_PATH"] = MOCK_DIR + (":" + env["LD_LIBRARY_PATH"]
                                         if env.get("LD_LIBRARY_PATH") else "")
    # The GPUs' PC sampling locks of this test's runs only: another test running at the same time
    # (whose mock GPUs have the same PCI addresses) does not put our episodes off, and its mock
    # GPU is not ours (MOCK_GPU_LOCK).
    env["PARCAGPU_PC_LOCK_DIR"] = PC_LOCK_DIR
    env["MOCK_CUPTI_GPU_LOCK"] = MOCK_GPU_LOCK
    if PERSONALITY:
        env["MOCK_CUPTI_PERSONALITY"] = PERSONALITY
        if PERSONALITY == "12":
            env["MOCKAPP_CUDART"] = CUDART[12]
    env.update(extra or {})
    return env


def hermetic(cmd, preload=None):
    """`cmd` in a private mount namespace where this machine's own CUDA is out of sight: /usr/local
    (the toolkits under /usr/local/cuda*) and /opt/cuda under empty tmpfs, an empty loader cache
    (ld.so.conf may list a real libcupti), and any libcupti in the system library directories
    replaced by an empty file. The library's CUPTI search then sees only what a test lays out.
    Needs root (as every integration test does). `preload`: LD_PRELOAD for `cmd` alone (not for
    unshare and the shell that set the namespace up)."""
    hide = ["mount -t tmpfs none /usr/local"]
    if os.path.isdir("/opt/cuda"):
        hide.append("mount -t tmpfs none /opt/cuda")
    hide.append("mount --bind /dev/null /etc/ld.so.cache")
    for pattern in ("/lib/*/libcupti.so*", "/usr/lib/*/libcupti.so*", "/lib64/libcupti.so*",
                    "/usr/lib64/libcupti.so*"):
        for f in glob.glob(pattern):
            hide.append("mount --bind /dev/null %s" % shlex.quote(f))
    script = " && ".join(hide) + ' && exec "$@"'
    if preload:
        cmd = ["env", "LD_PRELOAD=" + preload] + list(cmd)
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh"] + list(cmd)


class MockRun:
    def __init__(self, proc, stdout, stderr):
        self.returncode = proc.returncode
        self.stdout = stdout
        self.stderr = stderr
        self.garbled = []  # lines of a known kind that are not whole JSON
        self.summaries = self._json_lines(stdout, "MOCKAPP_SUMMARY")
        self.statuses = self._json_lines(stdout, "MOCKAPP_STATUS")
        self.exit_reports = self._json_lines(stderr, "MOCK_CUPTI_EXIT")

    def _json_lines(self, text, kind):
        """The JSON of each `kind` line. One that does not parse (a line another process's write
        cut: the mock writes each of its lines whole, tools/mock/mockapp_report.cc print_line) is
        kept in self.garbled, and said by `summary`, not raised here: a test that reads other
        lines of the run is not failed by it."""
        out = []
        for line in text.splitlines():
            if line.startswith(kind + " "):
                try:
                    out.append(json.loads(line.split(" ", 1)[1]))
                except ValueError as e:
                    self.garbled.append("%s (%s)" % (line[:200], e))
        return out

    @property
    def summary(self):
        assert not self.garbled, "lines that are not whole JSON:\n%s" % "\n".join(self.garbled)
        assert len(self.summaries) == 1, "expected one MOCKAPP_SUMMARY, got %d:\n%s\n%s" % (
            len(self.summaries), self.stdout[-3000:], self.stderr[-3000:])
        return self.summaries[0]

    def parcagpu_errors(self):
        return [l for l in self.stderr.splitlines() if re.search(r"parcagpu\[\d+\]: ", l)]


# A CPU kept busy the way test_storm.py found this VM's kernel tolerates: a spin that leaves the
# CPU 1 ms in every 50 (a loop that never sleeps starves a per-CPU kworker for minutes and every
# uprobe detach waits on it; docs/measurements/2026-11-27-impossible). Run with python -c.
BUSY_LOOP = """
import time
while True:
    t = time.monotonic()
    while time.monotonic() - t < 0.05:
        pass
    time.sleep(0.001)
"""


def run_mockapp(args, env=None, lib=LIB, timeout=120, isolated=False):
    """isolated: in hermetic() (no CUDA of this machine in sight)."""
    cmd = [MOCKAPP, lib] + list(args)
    env = base_env(env)
    if isolated:
        cmd = hermetic(cmd, preload=env.pop("LD_PRELOAD", None))
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    out, err = p.communicate(timeout=timeout)
    return MockRun(p, out, err)


def start_mockapp(args, env=None, lib=LIB):
    """Starts the mock app in the background; stdout lines are collected by a reader thread."""
    p = subprocess.Popen([MOCKAPP, lib] + list(args), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=base_env(env))
    p.lines = []
    p.err_lines = []

    def pump(stream, sink):
        for line in stream:
            sink.append(line)
    p.readers = [threading.Thread(target=pump, args=(p.stdout, p.lines), daemon=True),
                 threading.Thread(target=pump, args=(p.stderr, p.err_lines), daemon=True)]
    for t in p.readers:
        t.start()
    return p


def finish_mockapp(p, timeout=120):
    p.wait(timeout=timeout)
    for t in p.readers:
        t.join(timeout=10)
    p.stdout.close()
    p.stderr.close()
    return MockRun(p, "".join(p.lines), "".join(p.err_lines))


def wait_for_detachers(cmd, timeout=60):
    """Waits until no detacher that parcagpu-trace `cmd` left is running. The tool ends within
    2 s of its stop and leaves the kernel's slow uprobe detaching to a forked process
    (tools/trace/exit_detacher.h, comm parcagpu-detach, same command line): until that has ended,
    the library still sees a consumer. A test that asserts what happens once no consumer is
    attached starts counting from here."""
    want = b"\0".join(os.fsencode(str(a)) for a in cmd) + b"\0"
    deadline = time.time() + timeout
    while time.time() < deadline:
        left = False
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open("/proc/%s/comm" % entry, "rb") as f:
                    if f.read().strip() != b"parcagpu-detach":
                        continue
                with open("/proc/%s/cmdline" % entry, "rb") as f:
                    left = f.read() == want
            except OSError:
                continue
            if left:
                break
        if not left:
            return
        time.sleep(0.02)


# Where a thread waits in the kernel for a uprobe or perf event to be set up or torn down. Every
# uprobe attach and detach on the machine waits under one global lock (event_mutex) for an SRCU
# grace period, whose worker a CPU-bound process can keep off its CPU for minutes on this VM's
# kernel (docs/measurements/2026-11-27-impossible): a consumer attaching while another test's
# consumer detaches waits there, through no fault of its own.
UPROBE_WAIT = re.compile(r"uprobe|perf_event_open|perf_trace_event|perf_event_alloc|srcu|"
                         r"bpf_link|tracing_|trace_event")


def kernel_waits(pid):
    """The kernel stacks of the threads of `pid` that wait in uprobe or perf-event set-up or
    tear-down (UPROBE_WAIT), as text; "" when none does (or the process is gone)."""
    found = []
    for task in glob.glob("/proc/%d/task/*" % pid):
        try:
            with open(task + "/stack") as f:
                stack = f.read()
        except OSError:
            continue
        if UPROBE_WAIT.search(stack):
            found.append("thread %s:\n%s" % (os.path.basename(task), stack))
    return "\n".join(found)


def wait_for_line(proc, read, pattern, what, timeout=60, kernel_timeout=300):
    """Waits until `read`() (a consumer's output so far) matches `pattern`: `timeout` seconds of
    its own. Time it spends waiting in the kernel's uprobe set-up (kernel_waits: the machine's
    global uprobe lock, held meanwhile by another consumer's detach) does not count, up to
    `kernel_timeout` seconds in all. Fails (RuntimeError, with what it said and where it waits)
    when it exits first or its time is up: a consumer that never gets there still fails."""
    start = last = time.time()
    blocked_s = 0.0
    while True:
        if proc.poll() is not None:
            raise RuntimeError("consumer exited before its %s (%s):\n%s" % (
                what, proc.returncode, read()[-3000:]))
        if re.search(pattern, read()):
            if blocked_s >= 1:
                print("harness: %s after %.0f s, %.0f s of them waiting in the kernel's uprobe "
                      "set-up" % (what, time.time() - start, blocked_s), file=sys.stderr)
            return
        now = time.time()
        waits = kernel_waits(proc.pid)
        if waits:
            blocked_s += now - last
        last = now
        if now - start - blocked_s >= timeout or now - start >= kernel_timeout:
            raise RuntimeError("no %s within %.0f s (%.0f s of them waiting in the kernel's "
                               "uprobe set-up):\n%s\n%s" % (
                                   what, now - start, blocked_s, read()[-3000:], waits))
        time.sleep(0.05)


class _Consumer:
    """A consumer process that prints a ready line once its probes are attached."""
    ready_pattern = None
    # Its JSON summary may count impossible kernel records (_last_line_json); only tests that
    # make them on purpose set it.
    allow_impossible = False

    def __init__(self, cmd):
        self.out = tempfile.TemporaryFile(mode="w+")
        self.err = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(cmd, stdout=self.out, stderr=self.err, text=True,
                                     start_new_session=True)
        try:
            wait_for_line(self.proc, lambda: self._read(self.out) + self._read(self.err),
                          self.ready_pattern, "attach line")
        except RuntimeError:
            if self.proc.poll() is None:
                self.proc.kill()
            raise

    @staticmethod
    def _read(f):
        """All the consumer wrote so far. The file description (and its offset) is shared with the
        consumer, which writes at that offset: a seek here would move its next write over what it
        wrote before (seen: the attach line overwritten by the warning after it, and a 60 s wait
        for a line that was gone). pread leaves the offset alone."""
        fd, chunks, off = f.fileno(), [], 0
        while True:
            chunk = os.pread(fd, 1 << 20, off)
            if not chunk:
                return b"".join(chunks).decode("utf-8", errors="replace")
            chunks.append(chunk)
            off += len(chunk)

    def stop(self, timeout=60):
        """Stops the consumer (SIGINT, as Ctrl-C) and collects its output. Idempotent."""
        if self.out.closed:
            return self
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        wait_for_detachers(self.proc.args, timeout)
        self.stdout = self._read(self.out)
        self.stderr = self._read(self.err)
        self.out.close()
        self.err.close()
        return self

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if not self.out.closed:
            self.stop()


class Bpftrace(_Consumer):
    """scripts/parcagpu.bt attached system-wide to the library's probes."""
    ready_pattern = r"READY parcagpu.bt"

    def __init__(self, lib=LIB):
        self.lib = os.path.abspath(lib)
        super().__init__(["bpftrace", BT_SCRIPT, self.lib])

    def drain(self, timeout=60):
        """Waits until bpftrace has printed everything that fired before now.

        bpftrace formats its output in user space from per-CPU perf buffers and lags behind the
        probes; stopped right after the app exits it loses what it has not read yet (seen: 142
        of 202 kernels). So a marker goes through the same path on every CPU: a process pinned
        to that CPU loads the library with an unknown PARCAGPU_ variable, which fires the `error`
        probe with the variable's value in its message. Each CPU's buffer is read in order, so
        once every CPU's marker is printed, everything fired before on any CPU was read too."""
        if self.out.closed or self.proc.poll() is not None:
            return
        stamp = "drain%d_%d" % (os.getpid(), int(time.time() * 1e6))
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("PARCAGPU_", "CUDA_INJECTION64"))}
        # PARCAGPU_CUPTI_PATH: no CUPTI search (nor a real CUPTI loaded) in /bin/true.
        env.update({"LD_PRELOAD": self.lib, "LD_LIBRARY_PATH": "/nonexistent",
                    "PARCAGPU_CUPTI_PATH": "/nonexistent"})
        # A sanitized library preloaded into /bin/true brings its runtime in late: allowed here.
        env["ASAN_OPTIONS"] = env.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0"
        tokens = []
        for cpu in sorted(os.sched_getaffinity(0)):
            token = "%s_cpu%d" % (stamp, cpu)
            tokens.append(token)
            subprocess.run(["/bin/true"], env=dict(env, PARCAGPU_HARNESS_DRAIN_MARK=token),
                           check=False, stderr=subprocess.DEVNULL,
                           preexec_fn=lambda c=cpu: os.sched_setaffinity(0, {c}))
        deadline = time.time() + timeout
        while True:
            out = self._read(self.out)
            missing = [t for t in tokens if t not in out]
            if not missing:
                return
            if time.time() > deadline or self.proc.poll() is not None:
                raise AssertionError("bpftrace did not print the drain markers %s within %d s"
                                     % (missing, timeout))
            time.sleep(0.05)

    def stop(self, timeout=60):
        if self.out.closed:
            return self
        self.drain()
        super().stop(timeout)
        self.correlations = []  # (pid, corr, cbid, name)
        self.kernels = []       # (pid, corr, graph)
        self.errors = []        # (pid, code, component, message)
        self.batches = []       # (pid, count)
        self.gpu_configs = []
        self.captures = []      # (pid, corr, graph, node)
        self.clones = []        # (pid, original, cloned, exec_graph)
        for line in self.stdout.splitlines():
            if "PARCAGPU_HARNESS_DRAIN_MARK" in line:
                continue  # drain() marker, not the app's
            f = dict(kv.split("=", 1) for kv in line.split()[1:] if "=" in kv)
            tag = line.split(" ", 1)[0]
            if tag == "CORR":
                self.correlations.append((int(f["pid"]), int(f["corr"]), int(f["cbid"]),
                                          f.get("name", "")))
            elif tag == "KERNEL":
                self.kernels.append((int(f["pid"]), int(f["corr"]), int(f["graph"])))
            elif tag == "BATCH":
                self.batches.append((int(f["pid"]), int(f["count"])))
            elif tag == "ERROR":
                m = re.match(r"ERROR pid=(\d+) code=(-?\d+) component=(\S*) message=(.*)", line)
                self.errors.append((int(m[1]), int(m[2]), m[3], m[4]))
            elif tag == "GPU_CONFIG":
                self.gpu_configs.append(f)
            elif tag == "CAPTURE":
                self.captures.append((int(f["pid"]), int(f["corr"]), int(f["graph"]),
                                      int(f["node"])))
            elif tag == "CLONE":
                self.clones.append((int(f["pid"]), int(f["original"]), int(f["cloned"]),
                                    int(f["graph"])))
        return self

    def cbid_counts(self):
        counts = {}
        for _, _, cbid, _ in self.correlations:
            counts[cbid] = counts.get(cbid, 0) + 1
        return counts


def _last_line_json(consumer):
    """A stopped consumer's last stdout line, its JSON summary. A summary (parcagpu-trace's or
    agent-consumer's: one with kernel_records) must count no impossible kernel record
    (tools/trace/timestamp_check.h), unless the consumer was made with allow_impossible=True: every test
    that delivers kernels through the mock checks the mock's times and the consumers' judging of
    them here."""
    try:
        j = json.loads(consumer.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise AssertionError("%s printed no JSON:\n%s\n%s" % (
            os.path.basename(consumer.proc.args[0]), consumer.stdout[-2000:],
            consumer.stderr[-2000:]))
    if isinstance(j, dict) and "kernel_records" in j and not consumer.allow_impossible:
        check_no_impossible_records(j, os.path.basename(consumer.proc.args[0]))
    return j


def impossible_records(summary):
    """The impossible kernel records a consumer's JSON summary counts (parcagpu-trace's
    impossible_kernel_records, or agent-consumer's total of its processes'); a summary without
    the count fails."""
    assert "impossible_kernel_records" in summary, (
        "the summary has no impossible_kernel_records: %s" % sorted(summary))
    return summary["impossible_kernel_records"]


# No impossible kernel record passes. The stream overlaps once seen about once in a million
# records (fork stress, the soak with every launch announced, 1,207 in one CI run) were the mock's
# own: a graph kernel's thread preempted between "still running?" and "is activity on?" gave a
# kernel that had finished under activity the next enable's time as its end
# (tools/mock/cupti_mock_activity.cc, kernel_ran; 2026-11-27).


def check_no_impossible_records(summary, who="consumer"):
    n = impossible_records(summary)
    if n:
        if isinstance(summary.get("pids"), dict):  # agent-consumer: by process and reason
            why = {pid: p.get("impossible_by_reason") for pid, p in summary["pids"].items()
                   if p.get("impossible_kernel_records")}
        else:
            why = {k: v for k, v in summary.items() if k.startswith("impossible_") and v}
        raise AssertionError("%s counted %d impossible kernel records of %d (times no GPU could "
                             "give): %s" % (who, n, summary["kernel_records"], why))


class TraceTool(_Consumer):
    """build/bin/parcagpu-trace with any arguments; ready when it says it attached (or `ready`).
    After stop(), last_json() is its last output line as JSON."""
    ready_pattern = r"parcagpu-trace: attached \d+ probes"

    def __init__(self, args, ready=None, allow_impossible=False):
        if ready:
            self.ready_pattern = ready
        self.allow_impossible = allow_impossible
        super().__init__([TRACE] + list(args))

    def last_json(self):
        return _last_line_json(self)


def trace_when_loaded(app, args):
    """parcagpu-trace -p app.pid ARGS, started once the mock app `app` (start_mockapp, with a
    --status-interval) has printed its first status line, by when the library is loaded; run
    until it ends with the process, then stopped. Returns the TraceTool."""
    deadline = time.time() + 30
    while not app.lines and time.time() < deadline:
        time.sleep(0.05)
    tr = TraceTool(["-p", str(app.pid)] + list(args))
    tr.proc.wait(timeout=60)
    tr.stop()
    return tr


def cgroup2_root():
    """Where the cgroup v2 file system is mounted, or None."""
    with open("/proc/self/mountinfo") as f:
        for line in f:
            if " - cgroup2 " in line:
                return line.split()[4]
    return None


class HalfAttached:
    """A consumer caught half-way through attaching: uprobes on the named parcagpu probes of
    process `pid`, installed with their semaphore (ref_ctr_offset) as perf_event_open does for
    libbpf, and no BPF program on them yet. The semaphores stay raised until close(); whatever
    the library fires at those probes meanwhile reaches nobody."""

    def __init__(self, lib, pid, names):
        lib = os.path.realpath(lib)
        sections = []  # (address, file offset) of each allocated section
        for line in subprocess.run(["readelf", "-SW", lib], capture_output=True, text=True,
                                   check=True).stdout.splitlines():
            m = re.search(r"\]\s+\S+\s+\S+\s+([0-9a-f]{16}) ([0-9a-f]+)", line)
            if m and int(m[1], 16):
                sections.append((int(m[1], 16), int(m[2], 16)))

        def file_offset(addr):
            base, off = max(s for s in sections if s[0] <= addr)
            return addr - base + off

        notes = subprocess.run(["readelf", "-n", lib], capture_output=True, text=True,
                               check=True).stdout
        sites = re.findall(r"Provider: parcagpu\n\s+Name: (\S+)\n\s+Location: (0x[0-9a-f]+), "
                           r"Base: 0x[0-9a-f]+, Semaphore: (0x[0-9a-f]+)", notes)
        uprobe_type = int(open("/sys/bus/event_source/devices/uprobe/type").read())
        libc = ctypes.CDLL(None, use_errno=True)
        self._path = ctypes.create_string_buffer(lib.encode())
        self.fds = []
        for name, location, semaphore in sites:
            if name not in names:
                continue
            attr = (ctypes.c_uint8 * 128)()  # struct perf_event_attr
            struct.pack_into("IIQ", attr, 0, uprobe_type, 128,
                             file_offset(int(semaphore, 16)) << 32)  # config: ref_ctr_offset
            struct.pack_into("QQ", attr, 56, ctypes.addressof(self._path),  # config1: path
                             file_offset(int(location, 16)))  # config2: probe offset
            fd = libc.syscall(298, attr, pid, -1, -1, 8)  # perf_event_open, FD_CLOEXEC
            if fd < 0:
                self.close()
                raise OSError(ctypes.get_errno(), "perf_event_open on " + name)
            self.fds.append(fd)
        assert len(self.fds) == len(names), (names, sites)

    def close(self):
        for fd in self.fds:
            os.close(fd)
        self.fds = []


class _SummaryConsumer(_Consumer):
    """A consumer of one library file (`TOOL -l LIB ARGS`, `-p PID` for one process) whose last
    stdout line is its JSON summary: stop() keeps it as `result`."""

    def __init__(self, tool, lib, pid, args, allow_impossible):
        cmd = [tool, "-l", os.path.abspath(lib)] + list(args)
        if pid:
            cmd += ["-p", str(pid)]
        self.allow_impossible = allow_impossible
        super().__init__(cmd)

    def stop(self, timeout=60):
        if self.out.closed:
            return self
        super().stop(timeout)
        self.result = _last_line_json(self)
        return self


class Trace(_SummaryConsumer):
    """build/bin/parcagpu-trace --json, system-wide or on one pid."""
    ready_pattern = r"parcagpu-trace: attached \d+ probes"

    def __init__(self, lib=LIB, pid=None, extra=(), allow_impossible=False):
        super().__init__(TRACE, lib, pid, ["--json"] + list(extra), allow_impossible)


# The slowest reader of the agent's ring the library's firings are paced for
# (AgentRingPacer::kBytesPerSecond, src/base/agent_ring_pacer.h): 8 MiB a second.
AGENT_READ_BYTES_PER_S = 8 << 20


class AgentConsumer(_SummaryConsumer):
    """build/bin/agent-consumer: sees a library's probes exactly as the production agent does
    (tools/agent/README.md, docs/probe-abi.md). After stop(), `result` is its JSON summary and
    process(pid) the part about one process."""
    ready_pattern = r"agent-consumer: attached \d+ probes"

    def __init__(self, lib=LIB, pid=None, allow_impossible=False, scale_factor=0,
                 read_bytes_per_s=None):
        """scale_factor: the agent's --bpf-cupti-event-scale-factor, its ring of events is
        1 MiB << scale_factor; 0 is the agent's default, and what every test runs with unless it
        says why not. read_bytes_per_s: read that ring no faster (AGENT_READ_BYTES_PER_S: the
        slowest reader the library's pacing is made for); None: as fast as it can."""
        args = ["-s", str(scale_factor)]
        if read_bytes_per_s:
            args += ["-R", str(read_bytes_per_s)]
        super().__init__(AGENT_CONSUMER, lib, pid, args, allow_impossible)

    def stop(self, timeout=60):
        if self.out.closed:
            return self
        super().stop(timeout)
        # Its own ring (not the agent's) full: the summary misses events, whatever a test checks.
        drops = {pid: p["own_ring_drops"] for pid, p in self.result["pids"].items()
                 if p["own_ring_drops"]}
        assert not drops, "agent-consumer's own ring overflowed: %s" % drops
        return self

    def process(self, pid):
        """The summary of one process; a process the consumer never heard from has none."""
        p = self.result["pids"].get(str(pid))
        assert p is not None, "agent-consumer saw nothing of pid %d (saw %s)" % (
            pid, sorted(self.result["pids"]))
        return p


# The library's default PC sampling factor (src/base/config.h): what gpu_config reports unless
# PARCAGPU_SAMPLING_FACTOR says otherwise.
DEFAULT_SAMPLING_FACTOR = 17


def pc_sampling_problems(process):
    """What keeps the agent from using a process's PC samples, from AgentConsumer.process(pid):
    a list of sentences, empty when the stall-reason map, the cubins (by CRC, readable from
    /proc/PID/mem and parsable as ELF), PC samples with stall reasons, and a gpu_config with a
    sampling factor all arrived, and no read failed."""
    problems = []
    pc = process["pc_samples"]
    stall_map = process["stall_reason_map"]
    if not stall_map["seen"] or stall_map["count"] == 0 or not any(stall_map["names"]):
        problems.append("no stall-reason map (%s)" % stall_map)
    if not process["gpu_configs"]:
        problems.append("no gpu_config")
    for g in process["gpu_configs"]:
        if g["sampling_factor"] == 0 or g["clock_khz"] == 0:
            problems.append("gpu_config of device %d fixes a time scale of zero: %s"
                            % (g["device"], g))
    if pc["records"] == 0 or pc["stall_samples"] == 0:
        problems.append("no PC samples with stall reasons (%d records, %d stall samples)"
                        % (pc["records"], pc["stall_samples"]))
    unnamed = sorted(k for k in pc["by_stall_reason"] if k.startswith("#"))
    if unnamed:
        problems.append("stall reasons missing from the map: %s" % ", ".join(unnamed))
    cubins = {c["crc"]: c for c in process["cubins"]}
    for crc, n in sorted(pc["records_by_crc"].items()):
        c = cubins.get(crc)
        if c is None:
            problems.append("%d PC records of cubin %s, which was never announced" % (n, crc))
        elif not (c["readable"] and c["elf"]):
            problems.append("%d PC records of cubin %s, which is not a readable ELF image"
                            % (n, crc))
    if process["read_failures"]:
        problems.append("failed reads: %s" % {k: v for k, v in
                                              process["read_failures_by_kind"].items() if v})
    if pc["over_cap"] or pc["abandoned"]:
        problems.append("PC records the agent never reads: %d over the cap of 1024 per firing, "
                        "%d given up after a failed read" % (pc["over_cap"], pc["abandoned"]))
    return problems


@functools.lru_cache(maxsize=None)
def callbacks():
    """The subscribed-callback table (include/parcagpu/cbid_table.h), from build/bin/parcagpu-cbids:
    dicts with domain, cbid, signed_cbid (None for resources), role, name."""
    out = subprocess.run([CBIDS_TOOL], capture_output=True, text=True, check=True).stdout
    return tuple(json.loads(out)["callbacks"])


def graph_launch_cbids():
    """Signed cbids of the launches that fan out into a graph's kernels."""
    return {c["signed_cbid"] for c in callbacks() if c["role"] == "graph_launch"}


def is_graph_launch(signed_cbid):
    return signed_cbid in graph_launch_cbids()


def signed_cbid(name):
    """The signed cbid a probe carries for a launch API, by its name in the table."""
    for c in callbacks():
        if c["name"] == name and c["signed_cbid"] is not None:
            return c["signed_cbid"]
    raise KeyError("no launch API %r in the cbid table" % name)


def cbid_key(d):
    """JSON object keyed by signed cbid strings -> {int: int}."""
    return {int(k): v for k, v in d.items()}


_SITE = re.compile(r"(\+0x[0-9a-f]+)? \([^()]*\)( \[inlined\])?$")


def frame_function(name):
    """The function of a folded / flame graph frame name: parcagpu-trace names a frame as its text
    report does, with its call site ("f (file.cc:12)", "f+0x1a (libx.so)", issue 29); this is
    "f". Python frames ("file.py:12 qualname") and module offsets ("libx.so+0x1a") stay as
    they are."""
    return _SITE.sub("", name)


@functools.lru_cache(maxsize=None)
def counters():
    """The counters of parcagpu-trace's summary (tools/trace/counters.h), from `parcagpu-trace
    --list-counters --json`: dicts with name (the JSON key), kind (count, seconds, by_cbid,
    by_name), text (its place among -v's counter lines, 0 for none), label and help, in the JSON
    summary's order."""
    out = subprocess.run([TRACE, "--list-counters", "--json"], capture_output=True, text=True,
                         check=True).stdout
    return tuple(json.loads(out)["counters"])


class _CounterNames:
    """COUNTER.orphan_kernels is "orphan_kernels" when parcagpu-trace's counter table has it; a
    name the table lacks raises, so a renamed or dropped counter breaks every test that reads it
    rather than one that asserts its absence or reads it with a default."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        if name not in {c["name"] for c in counters()}:
            raise AttributeError("parcagpu-trace has no counter %r (tools/trace/counters.h)" % name)
        return name


COUNTER = _CounterNames()


def main():
    unittest.main(verbosity=2)


if __name__ == "__main__":
    # `harness.py reap`: what killed test processes left (make test runs it after ctest).
    if sys.argv[1:] == ["reap"]:
        reap_leftovers()

