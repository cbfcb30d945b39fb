import sys, os, subprocess, time, json
sys.path.insert(0,'/work/main/tests/integration')
import harness
def prog_stats():
    out = subprocess.run(["bpftool","prog","show","--json"],capture_output=True,text=True).stdout
    return {p.get("name"):(p.get("run_time_ns",0),p.get("run_cnt",0)) for p in json.loads(out) if p.get("name") in ("cuda_correlation",)}
for thread in (False, True):
  for sb in sys.argv[1:] or ("0","8192","32768","65536"):
    env = harness.base_env(dict(harness.UNLIMITED, CUDA_INJECTION64_PATH=harness.LIB))
    with harness.Trace(extra=["--stack-bytes", sb]) as tr:
        r = subprocess.run([os.path.join(harness.BUILD,"bin","deep-launch"),"3000"]+(["--thread"] if thread else []),capture_output=True,text=True,env=env)
        st = prog_stats()
    tr.stop()
    t,c = st.get("cuda_correlation",(0,0))
    j = tr.result
    print("thread" if thread else "main  ", "stack-bytes %6s: cuda_correlation %5d firings, %6.2f us each; copied %6.0f B/launch, drops %d, stacks dropped %d" % (sb, c, t/1e3/max(c,1), j["stack_copy_bytes"]/max(c,1), j["ringbuf_drops"], j["stacks_dropped"]), flush=True)
