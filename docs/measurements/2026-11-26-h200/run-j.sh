#!/usr/bin/env bash
# Device call J2 (2026-11-26): kernel activity on after an episode (after_ep_post_act) against activity on with PC sampling never enabled (activity); 5 rounds.
# Enable (after_ep_pre), inside an episode (after_ep), or between episodes after one
# (after_ep_post, the library's default since graphs are uploaded outside episodes): 5 rounds,
# one short process per state, the order rotated; GPU 0.
set -u
CU=/usr/local/cuda/targets/x86_64-linux
/usr/local/cuda/bin/nvcc -O2 -std=c++17 -arch=sm_90 -lineinfo -I$CU/include -o /tmp/pef tests/gpu/pc_episode_facts.cu -lcuda -L$CU/lib -lcupti > $OUT/cost-upload.txt 2>&1
export LD_LIBRARY_PATH=$CU/lib CUDA_VISIBLE_DEVICES=0
nvidia-smi --query-gpu=index,name --format=csv >> $OUT/cost-upload.txt
S=(activity after_ep_post_act after_ep_post callbacks none)
for r in 0 1 2 3 4; do
  for k in 0 1 2 3 4; do
    st=${S[$(( (k + r) % 5 ))]}
    timeout 30 /tmp/pef cost $st 2>&1 | grep -E "cost_round|cost_after_episode|watchdog" >> $OUT/cost-upload.txt
  done
done
python3 - $OUT/cost-upload.txt <<'PY' >> $OUT/cost-upload.txt
import re, sys, statistics
g, e = {}, {}
for l in open(sys.argv[1]):
    m = re.search(r"cost_round state=(\S+) eager_ns=([\d.]+) graph_ns=([\d.]+)", l)
    if m:
        e.setdefault(m[1], []).append(float(m[2])); g.setdefault(m[1], []).append(float(m[3]))
for k in g:
    print("MEDIAN state=%-14s eager_ns=%8.1f graph_ns=%8.1f rounds=%d" % (k, statistics.median(e[k]), statistics.median(g[k]), len(g[k])))
PY
