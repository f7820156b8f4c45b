#!/usr/bin/env bash
# Checks that every tracked C++ and CUDA source is formatted as .clang-format says (Debian's
# clang-format-14; ctest runs this as format.clang_format). `--fix` formats them in place instead.
set -euo pipefail
cd "$(dirname "$0")/.."
CF=${CLANG_FORMAT:-$(command -v clang-format-14 || command -v clang-format || true)}
[ -n "$CF" ] || { echo "check_format: clang-format not found (Debian package clang-format-14)" >&2; exit 1; }
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files '*.cpp' '*.h' '*.cu' '*.cuh')
else
  mapfile -t files < <(find src tests tools bench fuzz -name '*.cpp' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh')
fi
if [ "${1:-}" = "--fix" ]; then
  "$CF" -i "${files[@]}"
  exit 0
fi
if ! "$CF" --dry-run --Werror "${files[@]}" 2>/tmp/check_format.$$; then
  grep -E "error:" /tmp/check_format.$$ | cut -d: -f1 | sort -u | sed 's/^/not formatted: /' >&2
  rm -f /tmp/check_format.$$
  echo "check_format: run scripts/check_format.sh --fix" >&2
  exit 1
fi
rm -f /tmp/check_format.$$
echo "check_format: ${#files[@]} files formatted"
