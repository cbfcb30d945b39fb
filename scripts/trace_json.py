"""Reading parcagpu-trace's JSON output in the measurement scripts (scripts/*-real.sh and their
verdicts) and the integration tests: one place for what every verdict needs."""
import json


def last_json(path):
    """The last JSON object line of a file (a trace's --json output, an agent consumer's)."""
    lines = [l for l in open(path).read().strip().splitlines() if l.startswith("{")]
    return json.loads(lines[-1])


def gpu_ns_by_kernel(j):
    """GPU ns by (demangled) kernel name of a trace summary: summed over devices, which hold every
    kernel (gpu_time_by_stack holds the top stacks only)."""
    g = {}
    for s in j["gpu_time_by_device"]:
        for k in s["by_kernel"]:
            name = k.get("demangled") or k["kernel"]
            g[name] = g.get(name, 0) + k["gpu_ns"]
    return g


def json_lines(lines, kind=None):
    """The JSON objects among `lines` (parcagpu-trace --json-lines output: a line's object has a
    "type"), those of type `kind` only when given; other lines are passed over."""
    for line in lines:
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            j = json.loads(line)
        except ValueError:
            continue
        if kind is None or j.get("type") == kind:
            yield j
