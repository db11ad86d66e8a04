#!/usr/bin/env bash
# Checks that every C++ source of the repository is formatted with its .clang-format
# (Debian's clang-format-14, installed by `scripts/setup.sh --with-tests`), and that no Catch test
# is named so that ctest cannot run it. Fast: no build. Exit 1 lists what to fix.
set -euo pipefail
# Usage: scripts/check_format.sh [--fix]
#   --fix  rewrites the files in place instead of checking them.
cd "$(dirname "$0")/.."

formatter="${CLANG_FORMAT:-clang-format-14}"
if ! command -v "$formatter" > /dev/null; then
  echo "check_format: $formatter not found; run: bash scripts/setup.sh --with-tests" >&2
  exit 2
fi

# Tracked files only: build folders and files a user keeps next to the tree are not ours to judge.
mapfile -t sources < <(git ls-files -- '*.cpp' '*.h')
if [ ${#sources[@]} -eq 0 ]; then
  echo "check_format: no C++ sources found (is this a git checkout?)" >&2
  exit 2
fi

# ctest runs each test as `<binary> "<name>"`, and Catch reads an argument starting with '-' as an
# option and one starting with '~' as an exclusion; and CMake, which registers the names, splits a
# name at each ';' (a list separator) into two tests that match nothing. Such a test builds, runs
# under its binary's own test spec, and fails only under ctest, an hour into CI.
mapfile -t bad_names < <(perl -0ne 'while (/TEST_CASE\(\s*"([-~][^"]*|[^"]*;[^"]*)"/g) { print "$ARGV: \"$1\"\n" }' \
  $(git ls-files -- 'tests/*.cpp'))
if [ ${#bad_names[@]} -gt 0 ]; then
  echo "check_format: ${#bad_names[@]} test name(s) start with '-' or '~' or hold a ';', which ctest cannot run:" >&2
  printf '  %s\n' "${bad_names[@]}" >&2
  exit 1
fi

if [ "${1:-}" = "--fix" ]; then
  "$formatter" -i --style=file "${sources[@]}"
  echo "check_format: formatted ${#sources[@]} files"
  exit 0
fi

# --dry-run prints one warning per deviation as "file:line:col: warning: ..."; keep the names.
mapfile -t unformatted < <("$formatter" --dry-run --style=file "${sources[@]}" 2>&1 |
  sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: warning: .*/\1/p' | sort -u)
if [ ${#unformatted[@]} -gt 0 ]; then
  echo "check_format: ${#unformatted[@]} file(s) differ from .clang-format:" >&2
  printf '  %s\n' "${unformatted[@]}" >&2
  echo "fix with: bash scripts/check_format.sh --fix" >&2
  exit 1
fi
echo "check_format: ${#sources[@]} files formatted"
