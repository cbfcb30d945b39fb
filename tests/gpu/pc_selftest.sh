#!/usr/bin/env bash
# scripts/pc-sampling-real.sh without a GPU: its plumbing (build skipped, parcagpu-trace --pc
# attached, interleaved rounds, JSON parsing, cost table) and its verdict, with the mock
# application standing in for the CUDA program. The mock's kernels are not pc_workload's, so the
# attribution checks must fail, and say so; the cost part must run through.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
export PARCAGPU_BUILD_DIR="${PARCAGPU_BUILD_DIR:-$ROOT/build}"
OUTDIR=$(mktemp -d)
trap 'rm -rf "$OUTDIR"' EXIT
# A copy of the library, PC sampling locks and a mock GPU of its own: the script's consumer
# attaches to the library's file, and other tests run at the same time (ctest -j).
cp "$PARCAGPU_BUILD_DIR/lib/libparcagpu.so" "$OUTDIR/libparcagpu.so"
mkdir "$OUTDIR/pc-locks"
out=$(PC_WORKLOAD="$ROOT/tests/gpu/fake_pc_workload.sh" OUT="$OUTDIR" \
      PARCAGPU_PC_LOCK_DIR="$OUTDIR/pc-locks" MOCK_CUPTI_GPU_LOCK="$OUTDIR/mock-gpu-pc.lock" \
      PARCAGPU_LIB="$OUTDIR/libparcagpu.so" PARCAGPU_TRACE="$PARCAGPU_BUILD_DIR/bin/parcagpu-trace" \
      "$ROOT/scripts/pc-sampling-real.sh" --rounds 1 -n 100 2>&1)
rc=$?
echo "$out"
fail() { echo "pc_selftest: FAIL: $*"; exit 1; }
[ $rc -eq 1 ] || fail "expected exit 1 (attribution checks fail on the mock), got $rc"
grep -q "CHECK FAILED: no samples of stream_scale" <<<"$out" || fail "no verdict on stream_scale"
grep -q "RESULT: FAIL" <<<"$out" || fail "no RESULT line"
for v in nocons pc_off pc_on; do grep -qE "^   $v +[0-9]" <<<"$out" || fail "no cost line for $v"; done
grep -q "PC sampling at the default rate vs the library without PC sampling" <<<"$out" || fail "no slowdown"
grep -qE "achieved: [0-9.]+ samples/s" <<<"$out" || fail "no achieved rate"
grep -q "pc_kernels.cu:" <<<"$out" || fail "no source lines"
echo "pc_selftest: PASS"
