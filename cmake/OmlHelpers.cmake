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
# LibTorch's headers, precompiled, for the files of <target> that include them. On a 2-core
# machine <torch/torch.h> costs ~30 s to parse and its precompiled header ~10 s to load, while a
# file that needs no LibTorch compiles in ~1 s and one that needs only <ATen/core/Tensor.h> in
# ~5 s (docs/building.md#keeping-builds-fast). So:
#   - only the files whose includes (followed through the project's own headers,
#     _oml_includes_heavy below) reach a heavy LibTorch header use the PCH; the others skip it,
#     and a target with no such file takes none (the commands, the built-in samplers);
#   - the tree has three PCHs, since a GCC PCH is valid only for the code-generation flags it
#     was made with: oml_core's own (-fPIC, with OpenMP); oml_heavy_headers' (core/CMakeLists.txt),
#     which the other libraries reuse (the pipelines' static libraries, the built-in plugins:
#     -fPIC, no OpenMP); and oml_heavy_headers_pie's, which the executables reuse (the commands,
#     tests and benchmarks: -fPIE).
# Defines that differ between those targets (OML_DDP_WORKER, ...) do not matter: LibTorch's
# headers never read them, and GCC checks only the macros the PCH uses (-Winvalid-pch says when
# a PCH is refused). A file that skips the PCH must include what it uses (the PCH also brought
# <string>, <vector>, <map>, <memory>, <functional> and yaml-cpp). Which files use the PCH is
# decided when CMake configures: a file whose LibTorch includes change keeps its previous choice
# until the next configure (`cmake build`), and compiles correctly either way, only slower.
# In-tree only: plugins built elsewhere take no PCH.
function(oml_precompile_heavy_headers target)
  # Which files need the PCH; a target with none takes none (and waits for no PCH owner).
  get_target_property(sources ${target} SOURCES)
  get_target_property(source_dir ${target} SOURCE_DIR)
  set(heavy_sources "")
  set(light_sources "")
  foreach(source IN LISTS sources)
    if(NOT source MATCHES "\\.(cpp|cc)$" OR source MATCHES "^\\$<")
      continue()
    endif()
    get_filename_component(path "${source}" ABSOLUTE BASE_DIR "${source_dir}")
    _oml_includes_heavy("${path}" heavy)
    if(heavy)
      list(APPEND heavy_sources "${source}")
    else()
      list(APPEND light_sources "${source}")
    endif()
  endforeach()
  # The PCH owners (core/CMakeLists.txt) take theirs whatever their one source includes.
  set(owner FALSE)
  if(target MATCHES "^(oml_core|oml_heavy_headers|oml_heavy_headers_pie)$")
    set(owner TRUE)
  endif()
  if(NOT heavy_sources AND NOT owner)
    return()
  endif()
  # An owner needs one source compiled with its PCH, or CMake has no object that makes it: the
  # dedicated owners' one source includes nothing, so it is not skipped.
  if(owner AND NOT heavy_sources)
    set(light_sources "")
  endif()
  if(light_sources)
    set_source_files_properties(${light_sources} PROPERTIES SKIP_PRECOMPILE_HEADERS ON)
  endif()
  get_target_property(type ${target} TYPE)
  # OML_UNITY_BUILD: a library's heavy files compiled one folder at a time (the PCH's ~10 s load
  # paid once per folder), and its light ones one folder at a time too, in a unit of their own
  # (the ATen, yaml-cpp and standard headers they share parsed once a folder; CMake gives a
  # unity unit the target's PCH, so that unit loads it once too).
  # (not tests/: its support library stays one file a unit; tests/CMakeLists.txt batches the
  # test files).
  if(OML_UNITY_BUILD AND NOT type STREQUAL "EXECUTABLE" AND heavy_sources
     AND NOT source_dir MATCHES "/tests(/|$)")
    foreach(source IN LISTS heavy_sources light_sources)
      get_filename_component(path "${source}" ABSOLUTE BASE_DIR "${source_dir}")
      get_filename_component(folder "${path}" DIRECTORY)
      file(RELATIVE_PATH group "${PROJECT_SOURCE_DIR}" "${folder}")
      string(MAKE_C_IDENTIFIER "${group}" group)
      if(source IN_LIST light_sources)
        string(APPEND group "_light")
      endif()
      set_source_files_properties(${source} PROPERTIES UNITY_GROUP "${group}")
    endforeach()
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_MODE GROUP)
  endif()
  if(owner)
    target_precompile_headers(${target} PRIVATE
      <torch/torch.h>
      <yaml-cpp/yaml.h>
      <string>
      <vector>
      <map>
      <memory>
      <functional>)
  elseif(type STREQUAL "EXECUTABLE")
    target_precompile_headers(${target} REUSE_FROM oml_heavy_headers_pie)
  else()
    target_precompile_headers(${target} REUSE_FROM oml_heavy_headers)
  endif()
endfunction()

# oml_compile_in_batches(<target> <batch> <namespace> [CHECK <sources...>])
# For an executable of many short files that each stand alone (the test binaries, the
# benchmarks): with OML_UNITY_BUILD, its files that take the precompiled header are compiled
# <batch> a translation unit, so that a cold build loads the PCH and instantiates LibTorch's
# templates once a batch instead of once a file; the files that take no PCH stay one each. In
# one unit, two files' file-local helpers of one name would collide or, worse, overload each
# other, so each file of CHECK keeps its names in `namespace <namespace> {` after its includes
# (`<stem>` in <namespace> is the file's name without extension), checked when CMake configures,
# unity build or not. Call after oml_precompile_heavy_headers(<target>). In-tree only.
function(oml_compile_in_batches target batch namespace)
  cmake_parse_arguments(ARG "" "" "CHECK" ${ARGN})
  foreach(source IN LISTS ARG_CHECK)
    get_filename_component(stem "${source}" NAME_WE)
    string(REPLACE "<stem>" "${stem}" expected "${namespace}")
    file(READ "${source}" text)
    string(FIND "${text}" "\nnamespace ${expected} {\n" at)
    if(at EQUAL -1)
      message(FATAL_ERROR "${source}: each file of ${target} keeps its names in 'namespace ${expected} {', "
                          "opened after its #includes and closed at its end (oml_compile_in_batches in "
                          "cmake/OmlHelpers.cmake says why)")
    endif()
  endforeach()
  if(NOT OML_UNITY_BUILD)
    return()
  endif()
  get_target_property(sources ${target} SOURCES)
  foreach(source IN LISTS sources)
    get_source_file_property(light "${source}" SKIP_PRECOMPILE_HEADERS)
    if(light)
      set_source_files_properties("${source}" PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
    endif()
  endforeach()
  set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_MODE BATCH UNITY_BUILD_BATCH_SIZE ${batch})
endfunction()

# _oml_includes_heavy(<file> <out_var>): TRUE when <file> includes, itself or through the
# project's headers (quoted includes and <oml/...>, resolved against the folders below), a
# LibTorch header heavier than ATen's core ones: anything under torch/ but torch/version.h, or
# ATen/ATen.h, ATen/Functions.h, ATen/autocast_mode.h. Results are kept per file for the run.
function(_oml_includes_heavy file out_var)
  string(MD5 key "${file}")
  get_property(known GLOBAL PROPERTY "OML_HEAVY_${key}" SET)
  if(known)
    get_property(heavy GLOBAL PROPERTY "OML_HEAVY_${key}")
    set(${out_var} ${heavy} PARENT_SCOPE)
    return()
  endif()
  set_property(GLOBAL PROPERTY "OML_HEAVY_${key}" FALSE)  # while visiting: include cycles end here
  set(heavy FALSE)
  get_filename_component(dir "${file}" DIRECTORY)
  file(STRINGS "${file}" lines REGEX "^[ \t]*#[ \t]*include[ \t]*[<\"][^>\"]+[>\"]")
  foreach(line IN LISTS lines)
    string(REGEX MATCH "([<\"])([^>\"]+)[>\"]" _ "${line}")
    set(delimiter "${CMAKE_MATCH_1}")
    set(header "${CMAKE_MATCH_2}")
    if(delimiter STREQUAL "<" AND NOT header MATCHES "^oml/")
      if((header MATCHES "^torch/" AND NOT header STREQUAL "torch/version.h") OR
         header MATCHES "^ATen/(ATen|Functions|autocast_mode)\\.h$")
        set(heavy TRUE)
        break()
      endif()
      continue()
    endif()
    foreach(base IN ITEMS "${dir}" "${PROJECT_SOURCE_DIR}/core/include" "${PROJECT_BINARY_DIR}/core/include"
                          "${PROJECT_SOURCE_DIR}/core/src" "${PROJECT_SOURCE_DIR}/pipelines"
                          "${PROJECT_SOURCE_DIR}/plugins/ddp/include" "${PROJECT_SOURCE_DIR}/plugins/samplers/include"
                          "${PROJECT_SOURCE_DIR}/tests")
      if(EXISTS "${base}/${header}" AND NOT IS_DIRECTORY "${base}/${header}")
        get_filename_component(included "${base}/${header}" REALPATH)
        _oml_includes_heavy("${included}" included_heavy)
        if(included_heavy)
          set(heavy TRUE)
        endif()
        break()
      endif()
    endforeach()
    if(heavy)
      break()
    endif()
  endforeach()
  set_property(GLOBAL PROPERTY "OML_HEAVY_${key}" ${heavy})
  set(${out_var} ${heavy} PARENT_SCOPE)
endfunction()
