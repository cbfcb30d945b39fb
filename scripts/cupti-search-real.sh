#!/bin/bash
# On the GPU machine (root, CUDA 13, nvcc, PyTorch at /opt/torch/.venv): libparcagpu.so finds CUPTI
# where the toolkit and PyTorch keep it, with LD_LIBRARY_PATH empty and a loader cache that lists
# no CUDA directory (a private mount namespace binds a temporary one over /etc/ld.so.cache).
# Runs tests/gpu/cupti_search.cu with the CUDA runtime static and shared, then with a copy of the
# toolkit's CUPTI in an unusual prefix named by CUDA_HOME (the toolkit itself hidden), then a
# PyTorch program; parcagpu-trace --json is attached throughout. Prints each run's
# PARCAGPU_DEBUG search log and the consumer's counts; everything lands in $OUT (default
# /tmp/cupti-search). Usage: scripts/cupti-search-real.sh [LIB [TRACE]]
#   LIB default build/lib/libparcagpu.so, TRACE build/bin/parcagpu-trace (statically linked).
set -u
R=$(cd "$(dirname "$0")/.." && pwd)
LIB=$(readlink -f "${1:-$R/build/lib/libparcagpu.so}")
TRACE_BIN=$(readlink -f "${2:-$R/build/bin/parcagpu-trace}")
O=${OUT:-/tmp/cupti-search}; mkdir -p "$O"
D=$(mktemp -d)
trap 'rm -rf "$D" /tmp/odd /tmp/nocuda.conf /tmp/nocuda.cache' EXIT
nvcc -O2 -arch=sm_90 -o "$D/k_static" "$R/tests/gpu/cupti_search.cu" || exit 2
nvcc -O2 -arch=sm_90 -cudart shared -Xlinker -rpath=/usr/local/cuda/lib64 \
  -o "$D/k_shared" "$R/tests/gpu/cupti_search.cu" || exit 2
exec > >(tee "$O/device.log") 2>&1
T0=$(date +%s.%N)
echo "== the machine"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
ls -ld /usr/local/cuda* 2>&1
find -L /usr/local/cuda/ -maxdepth 4 -name 'libcupti.so*' 2>/dev/null
echo "ld.so.conf:"; cat /etc/ld.so.conf /etc/ld.so.conf.d/*.conf 2>/dev/null | grep -v '^#' | grep .
echo "ldconfig -p:"; ldconfig -p | grep -E 'libcupti|libcudart|libcuda\.so\.1'
echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
TK_CUPTI=$(readlink -f "$(find -L /usr/local/cuda/ -maxdepth 4 -name 'libcupti.so.13' | head -1)")
echo "toolkit CUPTI: $TK_CUPTI"

# The driver must stay findable; nothing of CUDA's toolkit may be.
DRV=$(ldconfig -p | awk '/libcuda\.so\.1 /{print $NF; exit}')
L=${LD_LIBRARY_PATH:-}; for d in ${L//:/ } /usr/local/nvidia/lib64 /usr/lib/x86_64-linux-gnu; do
  [ -z "$DRV" ] && [ -e "$d/libcuda.so.1" ] && DRV=$d/libcuda.so.1
done
printf '%s\n' /lib/x86_64-linux-gnu /usr/lib/x86_64-linux-gnu /usr/local/lib "$(dirname "$DRV")" >/tmp/nocuda.conf
ldconfig -C /tmp/nocuda.cache -f /tmp/nocuda.conf
echo "driver: $DRV; temporary cache lists CUPTI/cudart: $(ldconfig -p -C /tmp/nocuda.cache | grep -cE 'cupti|cudart')"
NS=(unshare -m --propagation private)
"${NS[@]}" true || { echo "no mount namespace: runs use the real cache"; NS=(); }
run() {  # run NAME SETUP CMD...: LD_LIBRARY_PATH empty; in a mount namespace with the CUDA-free
         # loader cache bound over /etc/ld.so.cache and SETUP's mounts done
  local name=$1 setup="mount --bind /tmp/nocuda.cache /etc/ld.so.cache; $2"; shift 2
  echo; echo "== $name"
  if [ ${#NS[@]} -eq 0 ]; then
    env LD_LIBRARY_PATH= PARCAGPU_DEBUG=1 CUDA_INJECTION64_PATH="$LIB" "$@"
  else
    env LD_LIBRARY_PATH= PARCAGPU_DEBUG=1 CUDA_INJECTION64_PATH="$LIB" \
      "${NS[@]}" sh -c "$setup"' exec "$@"' sh "$@"
  fi 2>&1 | grep -E 'starting|cupti|loaded|subscribed|^k:|torch|rror|announced|activity:|tracker'
}
trace() { "$TRACE_BIN" -l "$LIB" --json >"$O/$1.json" 2>"$O/$1.err" & TP=$!
  for i in $(seq 100); do grep -q attached "$O/$1.err" && break; sleep 0.1; done; }
untrace() { sleep 1; kill -INT $TP; wait $TP; echo "trace $1: $(tail -1 "$O/$1.json" | head -c 600)"; }

trace k
run "toolkit: static runtime, loader cache without CUDA" "" "$D/k_static"
run "toolkit: shared runtime (RUNPATH /usr/local/cuda/lib64)" "" "$D/k_shared"
# A copy of the toolkit's CUPTI in an unusual prefix, the real toolkit out of sight.
mkdir -p /tmp/odd/nv/cuda-13/extras/CUPTI/lib64
cp -a "$(dirname "$TK_CUPTI")"/libcupti.so* /tmp/odd/nv/cuda-13/extras/CUPTI/lib64/
HIDE=""; for t in /usr/local/cuda*; do HIDE="$HIDE mount -t tmpfs none $(readlink -f $t);"; done
run "toolkit copy under CUDA_HOME, /usr/local/cuda* hidden" "$HIDE" env CUDA_HOME=/tmp/odd/nv/cuda-13 "$D/k_static"
untrace k

trace torch
run "PyTorch (/opt/torch/.venv)" "" /opt/torch/.venv/bin/python -c "
import torch
a = torch.ones(1 << 20, device='cuda')
for _ in range(20): a.mul_(1.0001)
torch.cuda.synchronize()
print('torch', torch.__version__, 'CUDA', torch.version.cuda, float(a[0]))"
untrace torch
echo; echo "elapsed $(awk -v a="$T0" -v b="$(date +%s.%N)" 'BEGIN{print b-a}') s"
