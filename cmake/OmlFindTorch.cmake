# oml_find_torch([REQUIRED]): find_package(Torch) as oml-cpp needs it, for the in-tree build and
# for third parties that build plugins against the installed package (omlcppConfig.cmake).
#
# - A CUDA build of LibTorch (the torch wheel's) enables the CUDA language in the project
#   although nothing here compiles CUDA: nvcc only has to accept the standard (CUDA 17; CMake
#   3.25 has no flags for CUDA 20 with nvcc), a fixed architecture list keeps LibTorch's CMake
#   from probing for a GPU with try_run, and CMP0104 OLD leaves CMAKE_CUDA_ARCHITECTURES unset
#   (LibTorch warns about it and uses TORCH_CUDA_ARCH_LIST instead).
# - torch.utils.cmake_prefix_path is the wheel's share/cmake: TorchConfig would then look for
#   libtorch.so on the system paths before its own lib/ and, with Debian's libtorch-dev
#   installed, mix two LibTorches. Torch_ROOT (searched first by the find_* calls inside
#   TorchConfig) pins the libraries to the LibTorch whose TorchConfig.cmake is used.
# - OML_TORCH_HOST_LIBRARIES is what oml_core links: LibTorch's TORCH_LIBRARIES, or for a CUDA
#   build its CPU half alone (torch_cpu_library, c10), whose CUDA half oml-cpp loads on demand
#   (core/src/distributed/cuda_module.h). The CPU half's imported targets lack what TorchConfig
#   puts on `torch` only (the C++ API's include folder, TORCH_CXX_FLAGS), so they get it here.
macro(oml_find_torch)
  cmake_policy(SET CMP0104 OLD)
  if(NOT DEFINED CMAKE_CUDA_STANDARD)
    set(CMAKE_CUDA_STANDARD 17)
  endif()
  if(NOT DEFINED TORCH_CUDA_ARCH_LIST AND NOT DEFINED ENV{TORCH_CUDA_ARCH_LIST})
    set(TORCH_CUDA_ARCH_LIST "8.0;9.0")
  endif()
  if(NOT DEFINED Torch_ROOT)
    foreach(_oml_prefix ${Torch_DIR}/.. ${CMAKE_PREFIX_PATH})
      if(EXISTS "${_oml_prefix}/Torch/TorchConfig.cmake")
        get_filename_component(Torch_ROOT "${_oml_prefix}/../.." ABSOLUTE)
        break()
      endif()
    endforeach()
  endif()
  find_package(Torch ${ARGN})
  if(TARGET torch_cuda AND TARGET torch_cpu_library)
    set(OML_TORCH_HOST_LIBRARIES torch_cpu_library c10)
    get_target_property(_oml_torch_host_includes torch_cpu_library INTERFACE_INCLUDE_DIRECTORIES)
    if(NOT "${TORCH_INCLUDE_DIRS}" STREQUAL "" AND NOT _oml_torch_host_includes MATCHES "csrc/api/include")
      set_property(TARGET torch_cpu_library APPEND PROPERTY INTERFACE_INCLUDE_DIRECTORIES ${TORCH_INCLUDE_DIRS})
      if(TORCH_CXX_FLAGS)
        separate_arguments(_oml_torch_cxx_flags UNIX_COMMAND "${TORCH_CXX_FLAGS}")
        set_property(TARGET torch_cpu_library APPEND PROPERTY INTERFACE_COMPILE_OPTIONS ${_oml_torch_cxx_flags})
      endif()
    endif()
  else()
    set(OML_TORCH_HOST_LIBRARIES ${TORCH_LIBRARIES})
  endif()
endmacro()
