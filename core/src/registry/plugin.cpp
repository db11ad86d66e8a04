#include "oml/registry/plugin.h"

#include <dlfcn.h>
#include <elf.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

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

// What dlopen must not be given: the dynamic loader maps a library's segments without checking
// them against the file's size, so a truncated copy (a half-finished download) dies of SIGBUS on
// the first page past the end, and a FIFO blocks the open for good. Returns "" for a regular file
// whose ELF headers fit in it; anything else ELF-wise (another class or machine) is dlopen's to
// name.
std::string library_problem(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::string("it cannot be read: ") + std::strerror(errno);
  if (!S_ISREG(st.st_mode)) {
    return std::string("it is ") +
           (S_ISDIR(st.st_mode)    ? "a folder"
            : S_ISFIFO(st.st_mode) ? "a FIFO"
            : S_ISSOCK(st.st_mode) ? "a socket"
                                   : "a device") +
           ", not a shared library file";
  }
  const auto size = static_cast<uint64_t>(st.st_size);
  Elf64_Ehdr header{};
  std::ifstream in(path, std::ios::binary);
  if (!in.read(reinterpret_cast<char*>(&header), sizeof(header)) ||
      std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0) {
    return "it is not an ELF shared library (" + std::to_string(size) + " bytes without an ELF header)";
  }
  if (header.e_ident[EI_CLASS] != ELFCLASS64 || header.e_phentsize != sizeof(Elf64_Phdr)) return "";
  const auto truncated = [&](uint64_t needed) {
    return "the file is truncated: " + std::to_string(size) + " bytes, but its ELF headers describe " +
           std::to_string(needed) + " (an unfinished copy or download?)";
  };
  // Sums of values below 2^32 each (counts and sizes are 16-bit), or checked one at a time: none wraps.
  const uint64_t table_end = header.e_phoff + uint64_t{header.e_phnum} * sizeof(Elf64_Phdr);
  if (header.e_phoff > size || table_end > size) return truncated(std::max(header.e_phoff, table_end));
  if (header.e_shoff != 0) {
    const uint64_t sections_end = header.e_shoff + uint64_t{header.e_shnum} * header.e_shentsize;
    if (header.e_shoff > size || sections_end > size)
      return truncated(std::max(header.e_shoff, sections_end));
  }
  for (uint16_t i = 0; i < header.e_phnum; ++i) {
    Elf64_Phdr segment{};
    in.seekg(static_cast<std::streamoff>(header.e_phoff + uint64_t{i} * sizeof(Elf64_Phdr)));
    if (!in.read(reinterpret_cast<char*>(&segment), sizeof(segment))) return truncated(table_end);
    if (segment.p_type != PT_LOAD) continue;
    if (segment.p_offset > size || segment.p_filesz > size - segment.p_offset) {
      return truncated(segment.p_offset +
                       std::min<uint64_t>(segment.p_filesz, UINT64_MAX - segment.p_offset));
    }
  }
  return "";
}

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

  if (const std::string problem = library_problem(canonical); !problem.empty()) {
    throw PluginError("cannot open plugin library '" + path + "': " + problem);
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
    } catch (...) {
      throw PluginError("plugin '" + name + "' (" + path +
                        ") failed to register its components: it threw something that is not a "
                        "std::exception");
    }
  }
  plugin_list().push_back(LoadedPlugin{canonical, name, version});
  return plugin_list().back();
}

const std::vector<LoadedPlugin>& loaded_plugins() { return plugin_list(); }

}  // namespace oml
