#!/usr/bin/env python3
"""Several GPUs, on the mock (issue 19, item 1; no multi-GPU machine was run). The mock app with
--num-gpus=4 gives each device its own context and stream and sends launch i of thread t to
device (t + i) % 4, eager and graph launches alike; its summary says how many kernels ran on each
device (kernels_by_device). With every launch announced (harness.UNLIMITED):

- parcagpu-trace's per-device view (gpu_time_by_device in --json, "GPU time by device" in the
  text report) holds exactly the mock's kernels per device, and the devices add up to the total;
  one device has no such section in the text report;
- a PC consumer (parcagpu-trace --pc) gets one gpu_config per device, PC sampling is enabled on
  each device's context, and the PC samples come from kernels of more than one device (a sample's
  device is its kernel's: the PC records carry the correlation ID, the kernel records the device).
"""
import collections
import json
import os
import re
import unittest

import harness

C = harness.COUNTER  # the summary's counters, by name (tools/trace/counters.h)

GPUS = 4
# 4 x 500 launches/s (a tenth of them graph launches) for 2 s, from 2 threads.
ARGS = ["--num-gpus=%d" % GPUS, "--duration=2s", "--launch-rate=500", "--graph-rate=50",
        "--threads=2"]


def mock_pc(run):
    """The mock CUPTI's PC sampling counters at exit."""
    assert run.exit_reports, run.stderr[-2000:]
    return run.exit_reports[-1]["pc_sampling"]


class KernelsByDevice(unittest.TestCase):
    def test_per_device_kernels_are_the_mocks_and_add_up(self):
        with harness.Trace() as tr:
            r = harness.run_mockapp(ARGS, env=harness.UNLIMITED)
        tr.stop()
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        self.assertEqual(tr.proc.returncode, 0, tr.stderr[-2000:])
        truth = r.summary["kernels_by_device"]
        self.assertEqual(len(truth), GPUS, r.summary)
        self.assertTrue(all(n > 0 for n in truth), truth)
        self.assertEqual(sum(truth), r.summary["kernels_run"])
        j = tr.result
        # Every kernel of every launch arrived and matched: the per-device figures are all of them.
        self.assertEqual(j[C.kernel_records], r.summary["kernels_run"])
        self.assertEqual(j[C.kernels_matched], j[C.kernel_records])
        self.assertEqual(j[C.orphan_kernels], 0)
        self.assertIn("gpu_time_by_device", j, "no per-device view in the JSON summary")
        rows = j["gpu_time_by_device"]
        self.assertEqual([d["device"] for d in rows], list(range(GPUS)), rows)
        for d, n in enumerate(truth):
            row = rows[d]
            self.assertEqual(row["kernel_records"], n, row)
            self.assertEqual(row["kernels"], n, row)
            self.assertGreater(row["gpu_ns"], 0, row)
            # The mock's 5 kernel names, each on every device (fewer than the top 10 shown).
            self.assertEqual(row["kernel_names"], len(row["by_kernel"]), row)
            self.assertEqual(sum(k["kernels"] for k in row["by_kernel"]), n, row)
            self.assertEqual(sum(k["gpu_ns"] for k in row["by_kernel"]), row["gpu_ns"], row)
        self.assertEqual(sum(d["kernels"] for d in rows), j[C.kernels_matched])
        self.assertEqual(sum(d["kernel_records"] for d in rows), j[C.kernel_records])
        self.assertEqual(sum(d["gpu_ns"] for d in rows), j[C.gpu_ns_matched])

    def test_text_report_has_a_device_section_with_several_devices_only(self):
        lib = os.path.abspath(harness.LIB)
        for gpus in (GPUS, 1):
            with self.subTest(gpus=gpus):
                with harness.TraceTool(["-l", lib]) as tr:
                    r = harness.run_mockapp(["--num-gpus=%d" % gpus, "--duration=1s",
                                             "--launch-rate=300", "--graph-rate=30"],
                                            env=harness.UNLIMITED)
                tr.stop()
                self.assertEqual(r.returncode, 0, r.stderr[-2000:])
                self.assertEqual(tr.proc.returncode, 0, tr.stderr[-2000:])
                truth = r.summary["kernels_by_device"]
                if gpus == 1:
                    self.assertNotIn("GPU time by device", tr.stdout)
                    continue
                self.assertRegex(tr.stdout, r"\nGPU time by device: .* in %d kernels, %d devices\n"
                                 % (sum(truth), gpus))
                for d, n in enumerate(truth):
                    self.assertRegex(tr.stdout, r"\n  device %d +\S+ \S+ +\S+%% +%d kernels\b"
                                     % (d, n))


class PcSamplingByDevice(unittest.TestCase):
    def test_pc_consumer_gets_each_devices_gpu_config_and_samples_from_several(self):
        with harness.TraceTool(["-l", os.path.abspath(harness.LIB), "--json-lines", "--pc"]) as tr:
            # Windows as often as the duty caps allow (no sample credit: a window of 32 launches
            # would otherwise keep the next one seconds away), so that in a short run the
            # episodes reach several devices, in turn.
            r = harness.run_mockapp(ARGS, env=dict(harness.UNLIMITED, PARCAGPU_DEBUG="1",
                                                   PARCAGPU_PC_SAMPLING_RATE="0"))
        tr.stop()
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        self.assertEqual(tr.proc.returncode, 0, tr.stderr[-2000:])
        j = tr.last_json()
        pc = j["pc"]
        # One gpu_config per device, each its own.
        self.assertEqual(sorted(g["device"] for g in pc["gpu_configs"]), list(range(GPUS)),
                         pc["gpu_configs"])
        self.assertEqual(pc["gpu_config_firings"], GPUS)
        self.assertEqual(j[C.gpu_config], GPUS)
        # PC sampling per context: enabled on each device's context (the library's debug log),
        # none left enabled at exit.
        enabled_on = set(int(d) for d in re.findall(
            r"PC sampling enabled on context \S+ \(device (\d+)\)", r.stderr))
        self.assertEqual(sorted(enabled_on), list(range(GPUS)), r.stderr[-3000:])
        mpc = mock_pc(r)
        self.assertGreaterEqual(mpc["enables"], GPUS, mpc)
        self.assertEqual(mpc["enabled_now"], 0, mpc)
        # A sample's device is its kernel's (correlation ID -> the kernel lines' device).
        device_of = {}
        for line in tr.stdout.splitlines():
            if line.startswith('{"type":"kernel"'):
                k = json.loads(line)
                device_of[(k["pid"], k["correlation_id"])] = k["device"]
        self.assertEqual(sorted(set(device_of.values())), list(range(GPUS)))
        sampled = collections.Counter()
        unknown = 0
        for k in pc["kernels"]:
            for corr in k["correlation_ids"]:
                if (k["pid"], corr) in device_of:
                    sampled[device_of[(k["pid"], corr)]] += 1
                else:
                    unknown += 1
        self.assertEqual(unknown, 0, "PC samples of launches without a kernel record")
        self.assertGreater(len(sampled), 1,
                           "PC samples from the kernels of one device only: %s" % dict(sampled))

    def test_kernels_first_launched_after_the_first_graph_still_give_records(self):
        # A kernel first launched while PC sampling is off between episodes never gives a record
        # (docs/pc-sampling.md P20; the mock CUPTI keeps the rule per context), and a graph's
        # first launch ends the episode under way (P21). On two H100s the first graph of device
        # 0 ended the process's first episode before device 1 had launched its kernels: not one
        # PC sample of device 1 in 40 s. Here: two devices, launches alternating between them,
        # a graph launch in ten, so graphs are first launched before most kernels are; the
        # library at its defaults with the agent's probe set.
        # And the devices driven in turn from one thread, 16 eager launches each (as
        # tests/gpu/two_gpu.cu does): device 1's first launches come while the first window is
        # open on device 0, and a kernel first launched on a context where PC sampling is not
        # enabled, once it was enabled anywhere in the process, never gives records either (P23):
        # device 1 must join the episode at its first launch, window or not.
        for batch, graph_rate in ((1, 100), (16, 0)):
            with self.subTest(device_batch=batch, graph_rate=graph_rate):
                self.check_first_uses(batch, graph_rate)

    def check_first_uses(self, batch, graph_rate):
        with harness.AgentConsumer() as ac:
            r = harness.run_mockapp(["--num-gpus=2", "--device-batch=%d" % batch, "--duration=2s",
                                     "--launch-rate=1000", "--graph-rate=%d" % graph_rate],
                                    env={"PARCAGPU_DEBUG": "1"})
        ac.stop()
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        mpc = mock_pc(r)
        ended = [l for l in r.stderr.splitlines() if "ended before a graph's first launch" in l]
        if graph_rate:
            self.assertTrue(ended, "a graph's first launch met an episode (the case this is about)")
        # Functions first run in a graph uploaded between episodes are lost by design (P19).
        self.assertEqual(mpc["functions_first_run_between_episodes"] - mpc["of_them_in_graphs"],
                         0, mpc)
        enabled_on = set(int(d) for d in re.findall(
            r"PC sampling enabled on context \S+ \(device (\d+)\)", r.stderr))
        self.assertEqual(sorted(enabled_on), [0, 1], r.stderr[-3000:])
        p = ac.process(r.summary["pid"])
        self.assertEqual(p["pc_samples"]["correlation_ids"]["unannounced"], 0, p["pc_samples"])
        self.assertEqual(p["orphan_kernels"], 0, p)


class TheAgentOnTwoGpus(unittest.TestCase):
    """Issue 42, item 4: what the production agent makes of a two-GPU process
    (docs/probe-abi.md, "The agent's limits"), through the agent-faithful consumer."""

    def test_every_devices_kernel_of_a_multi_device_cooperative_launch_is_matched(self):
        # cu/cudaLaunchCooperativeKernelMultiDevice runs the kernel on both mock GPUs under one
        # correlation ID. The agent matches an eager launch's first kernel only. Before: the
        # library delivered the first kernel only (800 of 1,600 run; its tracker expected one),
        # and one ID for both would have left the second an orphan at the agent.
        with harness.AgentConsumer() as ac:
            r = harness.run_mockapp(
                ["--num-gpus=2", "--duration=2s", "--launch-rate=200",
                 "--apis=cuLaunchCooperativeKernelMultiDevice,"
                 "cudaLaunchCooperativeKernelMultiDevice"], env=harness.UNLIMITED)
        ac.stop()
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        s = r.summary
        p = ac.process(s["pid"])
        self.assertEqual(s["kernels_run"], 2 * s["launches"], s)
        self.assertEqual((p["kernel_records"], p["matched"], p["orphan_kernels"],
                          p["eager_kernels_unmatched"], p["orphan_correlations_eager"]),
                         (s["kernels_run"], s["kernels_run"], 0, 0, 0), p)
        # Each launch ran on both devices.
        self.assertEqual(s["kernels_by_device"], [s["launches"]] * 2, s)

    def test_the_one_gpu_config_the_agent_keeps_is_right_for_both_devices(self):
        # Two kinds of GPU: CUPTI's default sampling period is 11 on device 0 and 12 on device 1
        # (the mock's MOCK_CUPTI_PC_DEFAULT_PERIODS), the library left at CUPTI's default
        # (PARCAGPU_SAMPLING_FACTOR=0). The agent keeps the last gpu_config of a process. Before:
        # factor 11 on device 0 and 12 on device 1, and the agent scaled device 0's samples by
        # device 1's factor (gpu_config_overwrites 1).
        env = {"PARCAGPU_SAMPLING_FACTOR": "0", "MOCK_CUPTI_PC_DEFAULT_PERIODS": "11,12",
               "PARCAGPU_DEBUG": "1"}
        with harness.AgentConsumer() as ac:
            r = harness.run_mockapp(["--num-gpus=2", "--duration=4s", "--launch-rate=1000",
                                     "--graph-rate=100"], env=env)
        ac.stop()
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        p = ac.process(r.summary["pid"])
        self.assertEqual(sorted(g["device"] for g in p["gpu_configs"]), [0, 1], p["gpu_configs"])
        self.assertEqual([g["sampling_factor"] for g in p["gpu_configs"]], [11, 11],
                         p["gpu_configs"])
        self.assertEqual(p["gpu_config_overwrites"], 0, p["gpu_configs"])
        self.assertEqual(p["gpu_config"]["sampling_factor"], 11)
        self.assertGreater(p["pc_samples"]["records"], 0)
        self.assertNotIn("samples every 2^", r.stderr)


# CUDA 12.0's CUPTI (the mock's personality 12) has no PC sampling for us (correlation IDs in PC
# records came with 12.4): the per-device kernel view is checked there, PC sampling is not.
if harness.PERSONALITY == "12":
    PcSamplingByDevice = unittest.skip("CUPTI older than 12.4: no PC sampling")(PcSamplingByDevice)
    TheAgentOnTwoGpus.test_the_one_gpu_config_the_agent_keeps_is_right_for_both_devices = \
        unittest.skip("CUPTI older than 12.4: no PC sampling")(
            TheAgentOnTwoGpus.test_the_one_gpu_config_the_agent_keeps_is_right_for_both_devices)


if __name__ == "__main__":
    harness.main()
