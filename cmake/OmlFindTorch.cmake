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
endmacro()
