#!/usr/bin/env bash
# The packages as a user gets them: build/parcagpu{,-dev,-demo}_*.deb checked by lintian (no
# error), each one's files listed against what it must hold (anything else fails: the product
# only), then all three unpacked into an empty prefix (dpkg-deb -x changes nothing on the
# machine), their contents checked, and the demo run from those files.
#   scripts/check-package.sh [DIR]      # DIR: where the .deb files are (default build/)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build}
deb=$(ls -t "$dir"/parcagpu_*.deb 2>/dev/null | head -1)
[ -f "$deb" ] || { echo "check-package: no package in $dir (make package)" >&2; exit 1; }
version=$(dpkg-deb -f "$deb" Version)
upstream=${version%-*}  # the project's version; -N: the package's release of it
arch=$(dpkg-deb -f "$deb" Architecture)
dev_deb=$dir/parcagpu-dev_${version}_all.deb
demo_deb=$dir/parcagpu-demo_${version}_${arch}.deb
root=$(mktemp -d /tmp/parcagpu-pkg.XXXXXX)
trap 'rm -rf "$root"' EXIT
fail=0
# Each check reads a whole pipeline's output before grep looks at it: with pipefail, a grep -q or
# head that stops reading early fails the writer with SIGPIPE, and the check with it, at random.
check() {
  if eval "$2"; then echo "  ok    $1"; else echo "  FAIL  $1"; fail=1; fi
}
debs=()
for d in "$deb" "$dev_deb" "$demo_deb"; do
  if [ -f "$d" ]; then
    debs+=("$d")
    echo "check-package: $d (depends: $(dpkg-deb -f "$d" Depends))"
  else
    echo "  FAIL  $d missing"; fail=1
  fi
done

# What each package holds, files and links (directories: none empty), against its list; the debug
# file's build ID is written xx/yyyy. Debian's two files in each package's doc directory.
debian_docs() { printf './usr/share/doc/%s/changelog.Debian.gz\n./usr/share/doc/%s/copyright\n' "$1" "$1"; }
expected_parcagpu() {
  debian_docs parcagpu
  printf '%s\n' ./usr/bin/parcagpu-trace ./usr/lib/debug/.build-id/xx/yyyy.debug \
    ./usr/lib/parcagpu/libparcagpu.so ./usr/lib/parcagpu/libparcagpucupti.so \
    ./usr/share/doc/parcagpu/README.md ./usr/share/doc/parcagpu/parcagpu-trace.md \
    ./usr/share/doc/parcagpu/docs/cupti-facts.md ./usr/share/doc/parcagpu/docs/deploying.md \
    ./usr/share/doc/parcagpu/docs/how-it-works.md ./usr/share/doc/parcagpu/docs/pc-sampling.md \
    ./usr/share/doc/parcagpu/docs/probe-abi.md ./usr/share/lintian/overrides/parcagpu \
    ./usr/share/parcagpu/parcagpu.bt
}
expected_dev() {
  debian_docs parcagpu-dev
  printf '%s\n' ./usr/include/parcagpu/abi.h ./usr/include/parcagpu/cbid_table.h \
    ./usr/share/lintian/overrides/parcagpu-dev
}
expected_demo() {
  debian_docs parcagpu-demo
  printf '%s\n' ./usr/lib/parcagpu/demo/bin/parcagpu-mockapp ./usr/lib/parcagpu/demo/demo.sh \
    ./usr/lib/parcagpu/demo/mock/libcuda.so ./usr/lib/parcagpu/demo/mock/libcuda.so.1 \
    ./usr/lib/parcagpu/demo/mock/libcupti.so ./usr/lib/parcagpu/demo/mock/libcupti.so.13 \
    ./usr/share/lintian/overrides/parcagpu-demo
}
# dpkg-deb -c: type and permissions first, the path sixth ("./usr/x -> target" for a link).
held() { dpkg-deb -c "$1" | awk '$1 !~ /^d/ {print $6}' | sed -E 's|(/lib/debug/\.build-id/)[0-9a-f]{2}/[0-9a-f]+\.debug$|\1xx/yyyy.debug|' | sort; }
empty_dirs() {  # the directories with nothing under them
  dpkg-deb -c "$1" | awk '{print $6}' | sed 's|/$||' | sort -u >"$root/paths"
  dpkg-deb -c "$1" | awk '$1 ~ /^d/ {print $6}' | sed 's|/$||' | while read -r d; do
    grep -q "^$d/" "$root/paths" || echo "$d"
  done
}
files_check() {  # PACKAGE.deb EXPECTED-FUNCTION
  local got want extra missing empty
  [ -f "$1" ] || return 1
  got=$(held "$1") want=$("$2" | sort)
  extra=$(comm -23 <(echo "$got") <(echo "$want") | tr '\n' ' ')
  missing=$(comm -13 <(echo "$got") <(echo "$want") | tr '\n' ' ')
  empty=$(empty_dirs "$1" | tr '\n' ' ')
  [ -z "$extra" ] || echo "        $(basename "$1") holds what it must not: $extra"
  [ -z "$missing" ] || echo "        $(basename "$1") lacks: $missing"
  [ -z "$empty" ] || echo "        $(basename "$1") has empty directories: $empty"
  [ -z "$extra$missing$empty" ]
}
check "parcagpu: the library, its debug file, parcagpu-trace, the bpftrace script, the user's docs; nothing else" \
  'files_check "$deb" expected_parcagpu'
check "parcagpu-dev: the probe ABI headers; nothing else" 'files_check "$dev_deb" expected_dev'
check "parcagpu-demo: the mock app, libcuda.so.1 and libcupti.so.13 (and their links), demo.sh; nothing else" \
  'files_check "$demo_deb" expected_demo'
check "parcagpu-dev and parcagpu-demo depend on this parcagpu ($version)" \
  '[ "$(dpkg-deb -f "$dev_deb" Depends)" = "parcagpu (= $version)" ] &&
   grep -q "parcagpu (= $version)" <<<"$(dpkg-deb -f "$demo_deb" Depends)"'
check "maintainer: $(dpkg-deb -f "$deb" Maintainer)" \
  '[ "$(dpkg-deb -f "$deb" Maintainer)" = "parcagpu developers <parcagpu@localhost>" ]'
check "changelog.Debian.gz: the newest entry is this version" \
  'grep -q "^parcagpu ($version) " <<<"$(dpkg-deb --fsys-tarfile "$deb" |
   tar -xO ./usr/share/doc/parcagpu/changelog.Debian.gz | gzip -dc | sed -n 1p)"'
check "copyright: Apache-2.0, machine-readable" \
  'grep -qx "License: Apache-2.0" <<<"$(dpkg-deb --fsys-tarfile "$deb" | tar -xO ./usr/share/doc/parcagpu/copyright)"'
if command -v lintian >/dev/null; then
  # lintian's own exit status: 1 on any error (overrides, each with its reason, are in the
  # packages); warnings are printed, not failed on.
  check "lintian: no error" 'lintian --fail-on error "${debs[@]}" >"$root/lintian.out" 2>&1'
  grep -v "running with root privileges" "$root/lintian.out" | sed 's/^/        lintian: /' || true
else
  echo "  FAIL  lintian not installed (scripts/install-deps.sh)"; fail=1
fi
for d in "${debs[@]}"; do dpkg-deb -x "$d" "$root"; done
lib=$root/usr/lib/parcagpu/libparcagpu.so
build_id() { readelf -n "$1" | sed -n 's/.*Build ID: \([0-9a-f]*\).*/\1/p'; }
id=$(build_id "$lib")
check "libparcagpu.so installed" '[ -f "$lib" ]'
check "libparcagpucupti.so -> libparcagpu.so (the upstream name)" \
  '[ "$(readlink "$root/usr/lib/parcagpu/libparcagpucupti.so")" = libparcagpu.so ]'
check "library stripped: no .debug_info, no .symtab ($(stat -c %s "$lib") bytes)" \
  '! readelf -S "$lib" | grep -E >/dev/null "\.debug_info|\.symtab"'
check "library keeps its SDT notes and its .gnu_debuglink" \
  '[ "$(readelf -n "$lib" | grep -c "Provider: parcagpu")" -ge 11 ] && readelf -S "$lib" | grep >/dev/null gnu_debuglink'
check "debug info at usr/lib/debug/.build-id/${id:0:2}/${id:2}.debug, same build ID" \
  '[ -n "$id" ] && [ "$(build_id "$root/usr/lib/debug/.build-id/${id:0:2}/${id:2}.debug")" = "$id" ] &&
   readelf -S "$root/usr/lib/debug/.build-id/${id:0:2}/${id:2}.debug" | grep >/dev/null "\.debug_info"'
check "version string in the library: parcagpu version $upstream" \
  'strings "$lib" | grep -x >/dev/null "parcagpu version $upstream"'
check "parcagpu-trace --version: parcagpu-trace $upstream" \
  '"$root/usr/bin/parcagpu-trace" --version | grep -x >/dev/null "parcagpu-trace $upstream"'
demo=$root/usr/lib/parcagpu/demo
check "demo: none of its programs with debug info ($(du -sk "$demo" | cut -f1) KiB)" \
  '! readelf -S "$demo"/bin/parcagpu-mockapp "$demo"/mock/libcuda.so.1 "$demo"/mock/libcupti.so.13 | grep -q "\.debug_info"'
check "depends on libdw (parcagpu-trace's symbols and the PC profile's cubin line tables)" \
  'dpkg-deb -f "$deb" Depends | grep -q "libdw1"'
# parcagpu-trace --pc from the unpacked files on the demo's app: its PC profile works from the
# package (BPF object in the binary, libdw, the demo's mock cubin with line information).
pc_json=$root/pc.json
"$root/usr/bin/parcagpu-trace" -l "$lib" --pc --json >"$pc_json" 2>"$root/pc.err" &
pc_tool=$!
for _ in $(seq 600); do grep -q "parcagpu-trace: attached" "$root/pc.err" && break; kill -0 "$pc_tool" 2>/dev/null || break; sleep 0.1; done
"$root/usr/lib/parcagpu/demo/bin/parcagpu-mockapp" "$lib" --duration=2s --launch-rate=300 --graph-rate=60 \
  >"$root/pc-app.out" 2>&1 || { cat "$root/pc-app.out"; fail=1; }
kill -TERM "$pc_tool" 2>/dev/null; wait "$pc_tool" || true
check "parcagpu-trace --pc: PC samples with named stall reasons, the demo's cubin read and mapped to source lines" \
  'python3 - "$pc_json" <<"PY"
import json, sys
pc = json.loads(open(sys.argv[1]).read().splitlines()[-1])["pc"]
lines = [h for k in pc["kernels"] for h in k["hot_pcs"] if h.get("file", "").endswith("pc_kernels.cu")]
ok = (pc["samples"] > 0 and pc["stall_reasons_named"] and pc["cubins"] and lines and
      all(c["read"] and c["bytes_crc32"] == c["crc"] and c["has_lines"] for c in pc["cubins"]))
print("        %d samples, %d kernels, cubins %s, %d hot PCs with a source line" % (
    pc["samples"], len(pc["kernels"]), [(c["crc"], c["read"], c["has_lines"]) for c in pc["cubins"]], len(lines)))
sys.exit(0 if ok else 1)
PY'
[ "$fail" = 0 ] || { echo "check-package: FAIL" >&2; exit 1; }
echo "check-package: the demo from the unpacked files ($root/usr/lib/parcagpu/demo/demo.sh):"
OUT=$root/demo-out "$root/usr/lib/parcagpu/demo/demo.sh"
