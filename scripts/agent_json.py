"""What the scripts read of agent-consumer's JSON (tools/agent): its per-process counts summed."""
import json


class AgentTotals:
    def __init__(self, path):
        self.procs = list(json.load(open(path)).get("pids", {}).values())
        # Correlation ID kinds of the PC records (announced, unannounced, ...) over all processes.
        self.ids = {}
        for p in self.procs:
            for k, n in p.get("pc_samples", {}).get("correlation_ids", {}).items():
                self.ids[k] = self.ids.get(k, 0) + n
        self.pc_records = sum(p.get("pc_samples", {}).get("records", 0) for p in self.procs)

    def __call__(self, key):
        """The counter `key` summed over the processes."""
        return sum(p.get(key, 0) for p in self.procs)
