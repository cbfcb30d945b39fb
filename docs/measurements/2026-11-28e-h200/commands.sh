#!/usr/bin/env bash
# Issue 27 item 3: tests/gpu/graph_soak (C++ driver-API graph replay) for 900 s alone and under the
# library + agent-consumer, side by side on GPU 0. Detached; this call then watches until $1 s.
cd "$(dirname "$0")/.."
nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv,noheader
./.carry/graph_soak 2 || exit 3
rm -rf /tmp/soak; mkdir -p /tmp/soak/alone /tmp/soak/lib
setsid nohup env CUDA_VISIBLE_DEVICES=0 SOAK_ALONE=1 SOAK_APP=$PWD/.carry/graph_soak OUT=/tmp/soak/alone \
  bash -c "bash scripts/soak-agent-real.sh 900 30 > /tmp/soak/alone.txt 2>&1; touch /tmp/soak/alone.done" </dev/null >/dev/null 2>&1 &
setsid nohup env CUDA_VISIBLE_DEVICES=0 SOAK_APP=$PWD/.carry/graph_soak PARCAGPU_LIB=$PWD/.carry/libparcagpu.so \
  PARCAGPU_AGENT=$PWD/.carry/agent-consumer OUT=/tmp/soak/lib PARCAGPU_DEBUG=1 \
  bash -c "bash scripts/soak-agent-real.sh 900 30 > /tmp/soak/lib.txt 2>&1; touch /tmp/soak/lib.done" </dev/null >/dev/null 2>&1 &
start=$(date +%s)
while [ $(( $(date +%s) - start )) -lt "${1:-550}" ]; do sleep 10; done
for n in alone lib; do cp /tmp/soak/$n.txt $OUT/$n-partial.txt; echo "== $n"; tail -4 /tmp/soak/$n.txt; done
#!/usr/bin/env bash
[ -e /tmp/soak/lib.txt ] || { echo "no soak here (a fresh machine)"; exit 4; }
for i in $(seq 1 ${1:-500}); do [ -e /tmp/soak/alone.done ] && [ -e /tmp/soak/lib.done ] && break; sleep 1; done
for n in alone lib; do cp /tmp/soak/$n.txt $OUT/$n.txt; cp /tmp/soak/$n/app.out $OUT/$n-app.out 2>/dev/null; done
tail -80 /tmp/soak/lib/app.err > $OUT/lib-app-err-tail.txt
grep -c . /tmp/soak/lib/app.err
cat $OUT/alone.txt; cat $OUT/lib.txt | tail -12; cat $OUT/*-app.out
#!/usr/bin/env bash
# P36 probe: each variant under the library with agent-consumer, first Enable after 10 s of no
# module load, graph registration on; the library's totals (PARCAGPU_DEBUG=1).
cd "$(dirname "$0")/.."
PY=/opt/torch/.venv/bin/python
run() {
  local name=$1; shift
  ./.carry/agent-consumer -l $PWD/.carry/libparcagpu.so > /tmp/$name.agent.json 2>/tmp/$name.agent.err &
  local a=$!
  for i in $(seq 1 100); do grep -q "attached" /tmp/$name.agent.err && break; sleep 0.2; done
  env CUDA_INJECTION64_PATH=$PWD/.carry/libparcagpu.so PARCAGPU_DEBUG=1 "$@" > /tmp/$name.out 2> /tmp/$name.err
  sleep 1; kill -INT $a; wait $a
  echo "== $name: $(cat /tmp/$name.out)"
  grep -E "registered|records=|first episode|PC sampling enabled" /tmp/$name.err | head -4 | cut -c1-260
  grep -E "pc sampling: (drains|episodes)" /tmp/$name.err | cut -c1-330
  cp /tmp/$name.err $OUT/$name.err
}
Q="PARCAGPU_PC_START_QUIET_MS=10000 PARCAGPU_PC_GRAPH_SHADOWS=1"
run cxx_quiet env $Q ./.carry/graph_soak 30
run elementwise_quiet env $Q $PY .carry/p36.py elementwise 40
run linear_quiet env $Q $PY .carry/p36.py linear 40
run elementwise_defaults $PY .carry/p36.py elementwise 25

# .carry/p37.sh: p36.sh's run() (its grep of the totals only), then:
run elementwise_defaults $PY .carry/p36.py elementwise 40
run linear_defaults $PY .carry/p36.py linear 40
run torch_step_defaults $PY tools/bench/torch_step.py --mode graph --seconds 30
