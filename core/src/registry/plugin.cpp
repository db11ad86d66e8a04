#include "oml/registry/plugin.h"

#include <dlfcn.h>

#include <filesystem>
#include <memory>

namespace oml {

namespace {
std::vector<LoadedPlugin>& plugin_list() {
  static std::vector<LoadedPlugin> plugins;
  return plugins;
}

// Restores the default registration origin even when a register function throws.
struct OriginGuard {
  explicit OriginGuard(std::string origin) { set_registration_origin(std::move(origin)); }
  ~OriginGuard() { set_registration_origin("built-in"); }
};
}  // namespace

const LoadedPlugin& load_plugin(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    throw PluginError("plugin library '" + path + "' not found");
  }
  const std::string canonical = fs::canonical(path, ec).string();
  for (const auto& plugin : plugin_list()) {
    if (plugin.path == canonical) return plugin;
  }

  // RTLD_NOW: unresolved symbols are reported here, not at the first call into the plugin.
  // The handle is deliberately never closed (registered components point into the library).
  void* handle = dlopen(canonical.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* reason = dlerror();
    throw PluginError("cannot open plugin library '" + path + "': " + (reason ? reason : "unknown reason"));
  }
  dlerror();
  void* symbol = dlsym(handle, OML_PLUGIN_ENTRY_POINT_NAME);
  if (symbol == nullptr) {
    throw PluginError("'" + path + "' is not an oml-cpp plugin: it has no entry point '" +
                      OML_PLUGIN_ENTRY_POINT_NAME + "' (define one with OML_PLUGIN(...))");
  }
  const auto entry = reinterpret_cast<OmlPluginEntryPoint>(symbol);
  const OmlPluginInfo* info = entry();
  if (info == nullptr) {
    throw PluginError("plugin '" + path + "': its entry point returned no plugin description");
  }
  if (info->api_version != OML_PLUGIN_API_VERSION) {
    // Versions 1 and 2 registered one factory per component; since 3 a component is a parse
    // and a build. Their code needs changing, not only a rebuild: say what changed. (4 changed
    // retrieval's interfaces, 5 the extractor's, 6 and 7 the triplet miner's, which a rebuild follows.)
    const std::string change = info->api_version < 3
                                   ? " (since version 3 each component is registered as a parse and a build: "
                                     "add(name, parse, build, help), see docs/plugins.md#two-phases)"
                                   : "";
    throw PluginError("plugin '" + path + "' was built for plugin API version " +
                      std::to_string(info->api_version) + ", but this oml-cpp provides version " +
                      std::to_string(OML_PLUGIN_API_VERSION) + change +
                      "; rebuild the plugin against this oml-cpp");
  }
  const std::string name = info->name ? info->name : "";
  const std::string version = info->version ? info->version : "";
  if (info->register_components == nullptr) {
    throw PluginError("plugin '" + name + "' (" + path + ") has no register function");
  }
  {
    OriginGuard guard("plugin '" + name + "' (" + canonical + ")");
    try {
      info->register_components(registries());
    } catch (PluginError&) {
      throw;
    } catch (const Error& e) {
      throw PluginError("plugin '" + name + "' (" + path +
                        ") failed to register its components: " + e.what());
    } catch (const std::exception& e) {
      throw PluginError("plugin '" + name + "' (" + path +
                        ") failed to register its components: " + e.what());
    }
  }
  plugin_list().push_back(LoadedPlugin{canonical, name, version});
  return plugin_list().back();
}

}  // namespace oml
