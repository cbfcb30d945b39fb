#!/usr/bin/env bash
# make test-sanitize: the library, the mock and the unit tests built under ASan + full UBSan
# (build-asan/) and under TSan (build-tsan/), then the unit tests and the integration files that
# drive the mock app hardest (16 threads replaying every scenario, stress, forks, faults, a second
# copy, with and without a consumer) run against each build. Any sanitizer report fails it: every
# report goes to a log file (log_path), and the run fails if one was written, whichever process
# (a forked child too) wrote it; the tests also require every app to exit 0.
#
# Needs the plain build (make): its parcagpu-trace is the consumer (the tool itself is not under
# test here). JOBS=N builds with N jobs; SANITIZERS="asan" or "tsan" runs one of the two.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-$(nproc)}
SANITIZERS=${SANITIZERS:-"asan tsan"}
TRACE=$PWD/build/bin/parcagpu-trace
[ -x "$TRACE" ] || { echo "test-sanitize: $TRACE missing: run make first" >&2; exit 1; }

# The integration files run under each sanitizer.
INTEGRATION=(test_reliability test_failures test_subscription test_graph_guard)

failed=0
for san in $SANITIZERS; do
  case $san in
    asan) flags="address,undefined" ;;
    tsan) flags="thread" ;;
    *) echo "test-sanitize: unknown sanitizer '$san' (asan, tsan)" >&2; exit 2 ;;
  esac
  dir=$PWD/build-$san
  start=$(date +%s)
  echo "== $san: building $dir (-fsanitize=$flags)"
  cmake -S . -B "$dir" -DPARCAGPU_SANITIZE="$flags" -DPARCAGPU_BUILD_TRACE=OFF >/dev/null
  cmake --build "$dir" -j"$JOBS" >/dev/null
  logs=$(mktemp -d /tmp/parcagpu-sanitize-$san.XXXXXX)
  # halt_on_error: ASan's and UBSan's first report ends the process (exit status != 0); TSan
  # reports every race and exits 66 at the end. Leak checking is on (LeakSanitizer with ASan).
  # verify_asan_link_order=0: tests LD_PRELOAD the (instrumented) library ahead of the runtime
  # the app links.
  export ASAN_OPTIONS="log_path=$logs/asan:detect_leaks=1:halt_on_error=1:verify_asan_link_order=0"
  export UBSAN_OPTIONS="log_path=$logs/ubsan:print_stacktrace=1:halt_on_error=1"
  export TSAN_OPTIONS="log_path=$logs/tsan:halt_on_error=0:second_deadlock_stack=1"
  export LSAN_OPTIONS="log_path=$logs/lsan"
  status=0
  echo "== $san: unit tests"
  "$dir/bin/parcagpu_unit_tests" --gtest_brief=1 || status=1
  for t in "${INTEGRATION[@]}"; do
    echo "== $san: $t"
    out=$logs.$t.out
    if PARCAGPU_BUILD_DIR="$dir" PARCAGPU_SOURCE_DIR=$PWD PARCAGPU_TRACE="$TRACE" \
         PYTHONUNBUFFERED=1 python3 "tests/integration/$t.py" >"$out" 2>&1; then
      tail -n 3 "$out"
    else
      status=1
      grep -E "^(FAIL|ERROR):|Error" "$out" | head -n 20 || true
      tail -n 5 "$out"
    fi
    rm -f "$out"
  done
  unset ASAN_OPTIONS UBSAN_OPTIONS TSAN_OPTIONS LSAN_OPTIONS
  reports=$(find "$logs" -type f | sort)
  if [ -n "$reports" ]; then
    status=1
    echo "== $san: sanitizer reports:"
    for f in $reports; do
      echo "--- $f"
      head -n 60 "$f"
    done
  fi
  echo "== $san: $([ $status -eq 0 ] && echo PASSED || echo FAILED) in $(( $(date +%s) - start )) s"
  [ $status -eq 0 ] && rm -rf "$logs"
  failed=$(( failed + status ))
done
exit $(( failed > 0 ))
