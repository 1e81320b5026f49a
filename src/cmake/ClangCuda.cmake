# Clang's CUDA front end against a CUDA toolkit that has no nvcc, such as one
# assembled from NVIDIA's wheels (headers, ptxas, libdevice, libcudart): how
# the suite is built with a CUDA release whose nvcc a node lacks (CUDA 12.9
# beside the system's 13.0, for comparing an upgrade). CMake's CUDA language
# needs nvcc to identify a toolkit, so here the .cu sources are C++ sources
# compiled with -x cuda, and the toolkit's libraries are found by name.
#
# In: GPU_MEMPATHS_CLANG_CUDA_PATH (the toolkit), GPU_MEMPATHS_CUDA_ARCHS.
# Out: the targets CUDA::cudart and CUDA::cuda_driver, suite_clang_cuda (the
# compile options), GPU_MEMPATHS_CUDA_TOOLKIT ('12.9').
if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  message(FATAL_ERROR "GPU_MEMPATHS_CLANG_CUDA_PATH needs clang as the C++ compiler "
                      "(-DCMAKE_CXX_COMPILER=clang++), not ${CMAKE_CXX_COMPILER_ID}")
endif()
set(_root "${GPU_MEMPATHS_CLANG_CUDA_PATH}")
set(_api "${_root}/include/cuda_runtime_api.h")
if(NOT EXISTS "${_api}")
  message(FATAL_ERROR "GPU_MEMPATHS_CLANG_CUDA_PATH=${_root} is not a CUDA toolkit: no ${_api}")
endif()
file(STRINGS "${_api}" _line REGEX "^#define CUDART_VERSION +[0-9]+")
string(REGEX MATCH "[0-9]+$" _number "${_line}")
math(EXPR _major "${_number} / 1000")
math(EXPR _minor "${_number} % 1000 / 10")
set(GPU_MEMPATHS_CUDA_TOOLKIT "${_major}.${_minor}")

find_library(_cudart cudart PATHS "${_root}" PATH_SUFFIXES lib64 lib NO_DEFAULT_PATH REQUIRED)
# The driver API's library comes with the driver; a toolkit has only its stub.
find_library(_cuda cuda PATHS "${_root}" PATH_SUFFIXES lib64/stubs lib/stubs lib64 lib REQUIRED)
add_library(CUDA::cudart SHARED IMPORTED)
set_target_properties(CUDA::cudart PROPERTIES IMPORTED_LOCATION "${_cudart}"
                      INTERFACE_INCLUDE_DIRECTORIES "${_root}/include")
add_library(CUDA::cuda_driver SHARED IMPORTED)
set_target_properties(CUDA::cuda_driver PROPERTIES IMPORTED_LOCATION "${_cuda}")

set(_archs)
foreach(_arch IN LISTS GPU_MEMPATHS_CUDA_ARCHS)
  list(APPEND _archs "--cuda-gpu-arch=sm_${_arch}")
endforeach()
add_library(suite_clang_cuda INTERFACE)
# -isystem: the toolkit's headers before any other CUDA's on the default paths.
target_compile_options(suite_clang_cuda INTERFACE -x cuda "--cuda-path=${_root}" -isystem "${_root}/include"
                       -Wno-unknown-cuda-version ${_archs})
message(STATUS "CUDA ${GPU_MEMPATHS_CUDA_TOOLKIT} at ${_root}, compiled by Clang ${CMAKE_CXX_COMPILER_VERSION} "
               "for ${GPU_MEMPATHS_CUDA_ARCHS}")
