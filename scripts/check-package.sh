#!/usr/bin/env bash
# The package as a user gets it: build/parcagpu_*.deb unpacked into an empty prefix (dpkg-deb -x
# changes nothing on the machine), its contents checked, then the demo run from those files.
#   scripts/check-package.sh [PACKAGE.deb]
set -euo pipefail
cd "$(dirname "$0")/.."
deb=${1:-$(ls -t build/parcagpu_*.deb 2>/dev/null | head -1)}
[ -f "$deb" ] || { echo "check-package: no package (make package)" >&2; exit 1; }
root=$(mktemp -d /tmp/parcagpu-pkg.XXXXXX)
trap 'rm -rf "$root"' EXIT
dpkg-deb -x "$deb" "$root"
version=$(dpkg-deb -f "$deb" Version)
lib=$root/usr/lib/parcagpu/libparcagpu.so
echo "check-package: $deb (version $version; depends: $(dpkg-deb -f "$deb" Depends))"
fail=0
check() {
  if eval "$2"; then echo "  ok    $1"; else echo "  FAIL  $1"; fail=1; fi
}
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
check "version string in the library: parcagpu version $version" \
  'strings "$lib" | grep -x >/dev/null "parcagpu version $version"'
check "parcagpu-trace --version: parcagpu-trace $version" \
  '"$root/usr/bin/parcagpu-trace" --version | grep -x >/dev/null "parcagpu-trace $version"'
check "headers abi.h, cbid_table.h" \
  '[ -f "$root/usr/include/parcagpu/abi.h" ] && [ -f "$root/usr/include/parcagpu/cbid_table.h" ]'
check "bpftrace script" '[ -f "$root/usr/share/parcagpu/parcagpu.bt" ]'
demo=$root/usr/lib/parcagpu/demo
check "demo: the mock app, libcuda.so.1 and libcupti.so.13 only, none with debug info ($(du -sk "$demo" | cut -f1) KiB)" \
  '[ "$(cd "$demo" && find . -type f -o -type l | sort | tr "\n" " ")" = "./bin/parcagpu-mockapp ./demo.sh ./mock/libcuda.so ./mock/libcuda.so.1 ./mock/libcupti.so ./mock/libcupti.so.13 " ] &&
   ! readelf -S "$demo"/bin/parcagpu-mockapp "$demo"/mock/libcuda.so.1 "$demo"/mock/libcupti.so.13 | grep -q "\.debug_info"'
check "README, parcagpu-trace.md, LICENSE (Apache-2.0)" \
  '[ -f "$root/usr/share/doc/parcagpu/README.md" ] && [ -f "$root/usr/share/doc/parcagpu/parcagpu-trace.md" ] &&
   grep -q "Apache License" "$root/usr/share/doc/parcagpu/LICENSE"'
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
