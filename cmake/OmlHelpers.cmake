# Helpers shared by the in-tree build and by third parties (installed with the package).

# oml_add_plugin(<target> SOURCES <files...>)
# Builds an oml-cpp plugin: a MODULE library (loaded with dlopen, never linked against) whose
# symbols from liboml_core resolve against the host command at load time.
function(oml_add_plugin target)
  cmake_parse_arguments(ARG "" "" "SOURCES" ${ARGN})
  add_library(${target} MODULE ${ARG_SOURCES})
  if(TARGET omlcpp::oml_core)
    target_link_libraries(${target} PRIVATE omlcpp::oml_core)
  else()
    target_link_libraries(${target} PRIVATE oml_core)
  endif()
  set_target_properties(${target} PROPERTIES PREFIX "lib" CXX_VISIBILITY_PRESET hidden)
endfunction()

# oml_precompile_heavy_headers(<target>)
# Precompiles the expensive third-party headers (LibTorch alone costs ~16 s per translation
# unit). In-tree only: each target gets its own PCH (flags differ between shared libraries
# and executables, so one PCH cannot be reused across them).
function(oml_precompile_heavy_headers target)
  target_precompile_headers(${target} PRIVATE
    <torch/torch.h>
    <yaml-cpp/yaml.h>
    <string>
    <vector>
    <map>
    <memory>
    <functional>)
endfunction()
