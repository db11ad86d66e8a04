#!/usr/bin/env bash
# Follows docs/plugins.md step by step, as a third party would: install oml-cpp into a prefix,
# build plugins/examples out of tree against the installed package, and load the plugin with
# an installed command, both with --plugin and with `plugins:` in a config.
# Usage: example_plugin.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1
build=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

fail() {
  echo "example_plugin: $*" >&2
  for log in "$work"/*.log; do [ -f "$log" ] && { echo "--- $log" >&2; tail -n 30 "$log" >&2; }; done
  exit 1
}

# Step 1: install oml-cpp (headers, liboml_core, the commands, the CMake package).
cmake --install "$build" --prefix "$work/prefix" >"$work/install.log" 2>&1 || fail "cmake --install failed"

# Step 2: configure and build the plugin out of tree against the installed package.
generator=()
if command -v ninja >/dev/null; then generator=(-G Ninja); fi
cmake -S "$src/plugins/examples" -B "$work/plugin-build" "${generator[@]}" \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$work/prefix" >"$work/configure.log" 2>&1 ||
  fail "configuring plugins/examples against the installed package failed"
cmake --build "$work/plugin-build" >"$work/build.log" 2>&1 || fail "building the example plugin failed"
lib="$work/plugin-build/libfrequency_sampler.so"
[ -f "$lib" ] || fail "$lib was not built"
metric_lib="$work/plugin-build/librecall_metric.so"
[ -f "$metric_lib" ] || fail "$metric_lib was not built"

oml_sampler="$work/prefix/bin/oml-sampler"

# Step 3a: load it with --plugin; the sampler is listed with the plugin as its origin.
out=$("$oml_sampler" --plugin "$lib" --list-components) || fail "oml-sampler --plugin failed"
grep -q "frequency_balance" <<<"$out" || fail "frequency_balance missing from --list-components: $out"
grep -q "frequency_sampler" <<<"$out" || fail "the plugin's origin is missing from --list-components"
out=$("$oml_sampler" --plugin "$metric_lib" --list-components) || fail "oml-sampler --plugin (metric) failed"
grep -q "recall .*recall_metric" <<<"$out" || fail "the metric recall is missing from --list-components: $out"

# Step 3b: load it from the config's `plugins:` list and name its sampler in `sampler:`.
cat >"$work/config.yaml" <<YAML
plugins: [$lib]
sampler:
  name: frequency_balance
  args: {n_labels: 8, n_instances: 4, power: 0.5}
YAML
out=$("$oml_sampler" --config "$work/config.yaml" --list-components) || fail "a config with plugins: failed"
grep -q "frequency_balance" <<<"$out" || fail "frequency_balance missing after loading it via plugins:"

# Without the plugin the same sampler name is a config error (exit code 2) naming it.
sed -i '/^plugins:/d' "$work/config.yaml"
set +e
err=$("$oml_sampler" --config "$work/config.yaml" --list-components 2>&1 >/dev/null)
code=$?
set -e
[ "$code" -eq 2 ] || fail "expected exit code 2 without the plugin, got $code"
grep -q "unknown sampler 'frequency_balance'" <<<"$err" || fail "unexpected message: $err"

echo "example_plugin: ok"
