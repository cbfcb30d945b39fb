"""Shared helpers of the integration tests: run the mock application under the library, with
real eBPF consumers (bpftrace and parcagpu-trace) attached to the library's USDT probes.

Paths come from the environment that ctest sets (PARCAGPU_BUILD_DIR, PARCAGPU_SOURCE_DIR), so
the tests run against the build they belong to.
"""
import glob
import json
import os
import re
import shlex
import signal
import subprocess
import tempfile
import threading
import time
import unittest

SOURCE = os.environ.get("PARCAGPU_SOURCE_DIR",
                        os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
BUILD = os.environ.get("PARCAGPU_BUILD_DIR", os.path.join(SOURCE, "build"))
# PARCAGPU_TEST_LIB: run the suite against another build of the library (an older commit's, to
# show a new test red).
LIB = os.environ.get("PARCAGPU_TEST_LIB") or os.path.join(BUILD, "lib", "libparcagpu.so")
MOCKAPP = os.path.join(BUILD, "bin", "parcagpu-mockapp")
MOCK_DIR = os.path.join(BUILD, "mock")
TRACE = os.path.join(BUILD, "bin", "parcagpu-trace")
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
        self.summaries = [json.loads(l.split(" ", 1)[1]) for l in stdout.splitlines()
                          if l.startswith("MOCKAPP_SUMMARY ")]
        self.statuses = [json.loads(l.split(" ", 1)[1]) for l in stdout.splitlines()
                         if l.startswith("MOCKAPP_STATUS ")]
        self.exit_reports = [json.loads(l.split(" ", 1)[1]) for l in stderr.splitlines()
                             if l.startswith("MOCK_CUPTI_EXIT ")]

    @property
    def summary(self):
        assert len(self.summaries) == 1, "expected one MOCKAPP_SUMMARY, got %d:\n%s\n%s" % (
            len(self.summaries), self.stdout[-3000:], self.stderr[-3000:])
        return self.summaries[0]

    def parcagpu_errors(self):
        return [l for l in self.stderr.splitlines() if re.search(r"parcagpu\[\d+\]: ", l)]


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


class _Consumer:
    """A consumer process that prints a ready line once its probes are attached."""
    ready_pattern = None

    def __init__(self, cmd):
        self.out = tempfile.TemporaryFile(mode="w+")
        self.err = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(cmd, stdout=self.out, stderr=self.err, text=True,
                                     start_new_session=True)
        deadline = time.time() + 60
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("consumer exited early (%s):\n%s\n%s" % (
                    self.proc.returncode, self._read(self.out), self._read(self.err)))
            if re.search(self.ready_pattern, self._read(self.out) + self._read(self.err)):
                return
            time.sleep(0.05)
        self.proc.kill()
        raise RuntimeError("consumer did not attach within 60 s:\n" + self._read(self.err))

    @staticmethod
    def _read(f):
        f.flush()
        f.seek(0)
        return f.read()

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
        of 202 kernels). So a marker goes through the same path: a process that loads the library
        with an unknown PARCAGPU_ variable fires the `error` probe, whose message names it. Once
        the marker is printed, everything fired before it has been read too, give or take the
        order of the per-CPU buffers, which a short quiet period covers."""
        if self.out.closed or self.proc.poll() is not None:
            return
        token = "drain%d_%d" % (os.getpid(), int(time.time() * 1e6))
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("PARCAGPU_", "CUDA_INJECTION64"))}
        # PARCAGPU_CUPTI_PATH: no CUPTI search (nor a real CUPTI loaded) in /bin/true.
        env.update({"LD_PRELOAD": self.lib, "PARCAGPU_HARNESS_DRAIN_MARK": token,
                    "LD_LIBRARY_PATH": "/nonexistent", "PARCAGPU_CUPTI_PATH": "/nonexistent"})
        deadline = time.time() + timeout
        subprocess.run(["/bin/true"], env=env, check=False, stderr=subprocess.DEVNULL)
        while token not in self._read(self.out):
            if time.time() > deadline or self.proc.poll() is not None:
                raise AssertionError("bpftrace did not print the drain marker within %d s" % timeout)
            time.sleep(0.05)
        size, quiet_since = -1, time.time()
        while time.time() - quiet_since < 0.3 and time.time() < deadline:
            now = len(self._read(self.out))
            if now != size:
                size, quiet_since = now, time.time()
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


class Trace(_Consumer):
    """build/bin/parcagpu-trace --json, system-wide or on one pid."""
    ready_pattern = r"parcagpu-trace: attached \d+ probes"

    def __init__(self, lib=LIB, pid=None, extra=()):
        cmd = [TRACE, "-l", os.path.abspath(lib), "--json"] + list(extra)
        if pid:
            cmd += ["-p", str(pid)]
        super().__init__(cmd)

    def stop(self, timeout=60):
        if self.out.closed:
            return self
        super().stop(timeout)
        try:
            self.result = json.loads(self.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            raise AssertionError("parcagpu-trace printed no JSON:\n%s\n%s" % (
                self.stdout[-2000:], self.stderr[-2000:]))
        return self


def cbid_key(d):
    """JSON object keyed by signed cbid strings -> {int: int}."""
    return {int(k): v for k, v in d.items()}


def main():
    unittest.main(verbosity=2)
