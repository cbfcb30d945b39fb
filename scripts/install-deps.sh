#!/usr/bin/env bash
# Installs what parcagpu needs to build and test, from Debian packages. Idempotent.
# CUDA headers come from the toolkit at /usr/local/cuda (or $CUDA_HOME); they are not installed here.
set -euo pipefail
PKGS=(build-essential cmake pkg-config systemtap-sdt-dev libbpf-dev bpftool clang llvm
      libelf-dev zlib1g-dev libgtest-dev bpftrace python3 clang-format
      # parcagpu-trace: symbols, inlines and file:line (elfutils), JSON; the static archives
      # that libdw.a / libelf.a need for -DPARCAGPU_STATIC_TRACE=ON
      libdw-dev nlohmann-json3-dev liblzma-dev libbz2-dev libzstd-dev
      # parcagpu-trace --pprof: pprof's profile.proto compiled by protoc (which also decodes the
      # profiles in the tests), the C++ runtime (libprotobuf.a too, for the static build)
      libprotobuf-dev protobuf-compiler
      # the packages (cpack -G DEB: dpkg-shlibdeps) and their check (scripts/check-package.sh)
      dpkg-dev lintian
      # unshare, mount: the CUPTI search tests run in a private mount namespace; setpriv: the
      # capability test of parcagpu-trace
      util-linux mount)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
if [ ! -f "$CUDA_HOME/include/cupti.h" ] && [ ! -f "$CUDA_HOME/extras/CUPTI/include/cupti.h" ]; then
  echo "install-deps: CUDA toolkit headers not found under $CUDA_HOME (set CUDA_HOME)" >&2
  exit 1
fi
echo "install-deps: all dependencies present"
