# GPU_MEMPATHS_CUDA_ARCHS (src/CMakeLists.txt) lists the architectures to
# build for. CUDA 13 dropped Volta, so an architecture the toolkit cannot
# target is left out with a warning instead of failing the whole build; a
# Volta build needs a CUDA 12 (or older) toolkit, which the summit system's
# data names.

execute_process(COMMAND ${CMAKE_CUDA_COMPILER} --list-gpu-arch
                OUTPUT_VARIABLE _supported RESULT_VARIABLE _rc ERROR_QUIET)
set(_kept)
foreach(_arch IN LISTS GPU_MEMPATHS_CUDA_ARCHS)
  string(REGEX MATCH "^[0-9]+" _num "${_arch}")
  if(_rc EQUAL 0 AND NOT _supported MATCHES "compute_${_num}([^0-9]|$)")
    message(WARNING "CUDA ${CMAKE_CUDA_COMPILER_VERSION} cannot target sm_${_num}: left out of this build")
  else()
    list(APPEND _kept ${_arch})
  endif()
endforeach()
if(NOT _kept)
  message(FATAL_ERROR "none of GPU_MEMPATHS_CUDA_ARCHS='${GPU_MEMPATHS_CUDA_ARCHS}' is supported by ${CMAKE_CUDA_COMPILER}")
endif()
# A normal variable shadows the compiler default for every target below.
set(CMAKE_CUDA_ARCHITECTURES ${_kept})
message(STATUS "CUDA architectures: ${CMAKE_CUDA_ARCHITECTURES}")
