#pragma once
// Plugins: shared libraries that add components to the registries.
//
// A plugin exports one C entry point, `oml_plugin_info`, returning its description:
//
//   #include "oml/registry/plugin.h"
//   static void register_components(oml::Registries& r) {
//     r.samplers.add("my_sampler", parse_my_sampler, build_my_sampler, "what it does");
//   }
//   OML_PLUGIN("my_plugin", "1.0.0", register_components)
//
// Components come in two phases, parse and build, with the contract of oml/registry/registry.h.
//
// Loading checks each step and reports which one failed: the file is missing or cannot be
// opened (with the system's reason), there is no entry point, the plugin was built for another
// API version (both numbers given), or a name clashes with one already registered. Libraries
// are never unloaded: components they registered stay usable for the life of the process.

#include <cstdint>
#include <string>
#include <vector>

#include "oml/registry/registries.h"

/// Bumped whenever Registries or a component interface changes in a way that breaks plugins.
/// 2: Registries gained `metrics` (the metric interface, oml/metrics/metric.h).
/// 3: components in two phases: add(name, parse, build, help) instead of one factory; metrics
///    read `metric_args:` in their parse (MetricContext is gone).
/// 4: retrieval searches by a measure (KnnOptions::measure, the inner product of `distance: dot`);
///    RetrievalBackend gained supports() and load_index() a measure.
/// 5: Extractor gained input() (images, or the packed tokens of text extractors).
/// 6: TripletMiner gained check_labels() (the label checks, on the host) and TripletSet `valid`
///    (placeholder triplets, so that a miner's output size need not depend on the labels).
/// 7: TripletMiner gained mine_anchored(), check_anchored_labels() and anchors_on_rows()
///    (triplets anchored on the first rows only, for miner_with_bank).
#define OML_PLUGIN_API_VERSION 7u

extern "C" {
struct OmlPluginInfo {
  uint32_t api_version;  ///< OML_PLUGIN_API_VERSION the plugin was compiled against
  const char* name;      ///< plugin name, for messages and listings
  const char* version;   ///< plugin's own version string
  void (*register_components)(oml::Registries& registries);
};
typedef const OmlPluginInfo* (*OmlPluginEntryPoint)();
}

#define OML_PLUGIN_ENTRY_POINT_NAME "oml_plugin_info"

/// Defines the entry point of a plugin library.
#define OML_PLUGIN(plugin_name, plugin_version, register_fn)                                           \
  extern "C" __attribute__((visibility("default"))) const OmlPluginInfo* oml_plugin_info() {           \
    static const OmlPluginInfo info{OML_PLUGIN_API_VERSION, plugin_name, plugin_version, register_fn}; \
    return &info;                                                                                      \
  }

namespace oml {

struct LoadedPlugin {
  std::string path;
  std::string name;
  std::string version;
};

/// Loads the plugin at `path` and runs its register function. Loading the same file twice
/// is a no-op. Throws PluginError naming the library and the step that failed.
const LoadedPlugin& load_plugin(const std::string& path);

/// The plugins this process loaded, in the order loaded.
const std::vector<LoadedPlugin>& loaded_plugins();

}  // namespace oml
