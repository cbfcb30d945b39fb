#!/usr/bin/env bash
# src/ and include/ as the repository's .clang-format makes them: `clang-format --dry-run --Werror`
# on every C/C++ file there, listing the files that differ. ctest runs it (format.src); exit 77,
# which ctest counts as skipped, when clang-format is absent (scripts/install-deps.sh installs it).
#   scripts/check-format.sh          # check
#   scripts/check-format.sh --fix    # reformat those files in place
set -euo pipefail
cd "$(dirname "$0")/.."
cf=${CLANG_FORMAT:-clang-format}
if ! command -v "$cf" >/dev/null 2>&1; then
  echo "check-format: SKIPPED: $cf not found (scripts/install-deps.sh installs clang-format)"
  exit 77
fi
mapfile -t files < <(find src include -type f \( -name '*.cc' -o -name '*.h' -o -name '*.c' \) | sort)
if [ "${1:-}" = --fix ]; then
  "$cf" -i "${files[@]}"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  "$cf" --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ ${#bad[@]} -gt 0 ]; then
  for f in "${bad[@]:0:3}"; do "$cf" --dry-run "$f" 2>&1 | head -n 6; done
  echo "check-format: ${#bad[@]} of ${#files[@]} files differ from what $("$cf" --version) makes of them:"
  printf '  %s\n' "${bad[@]}"
  echo "fix: scripts/check-format.sh --fix"
  exit 1
fi
echo "check-format: ${#files[@]} files in src/ and include/ as $("$cf" --version) formats them"
