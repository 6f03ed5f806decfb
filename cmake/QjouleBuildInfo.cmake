# Generates qjoule/build_info.h with version, git commit, build type and enabled backends.
find_package(Git QUIET)
set(QJOULE_GIT_COMMIT "unknown")
if(GIT_FOUND)
  execute_process(COMMAND ${GIT_EXECUTABLE} rev-parse --short=12 HEAD
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR} OUTPUT_VARIABLE _commit
    OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE _rc)
  if(_rc EQUAL 0 AND _commit)
    set(QJOULE_GIT_COMMIT "${_commit}")
    execute_process(COMMAND ${GIT_EXECUTABLE} status --porcelain --untracked-files=no
      WORKING_DIRECTORY ${PROJECT_SOURCE_DIR} OUTPUT_VARIABLE _dirty ERROR_QUIET)
    if(_dirty)
      set(QJOULE_GIT_COMMIT "${QJOULE_GIT_COMMIT}-dirty")
    endif()
  endif()
endif()
set(QJOULE_BACKENDS "cpu(oneDNN ${dnnl_VERSION})")
if(QJOULE_HAVE_CUDA)
  string(REPLACE ";" " " _archs "${CMAKE_CUDA_ARCHITECTURES}")
  set(QJOULE_BACKENDS "${QJOULE_BACKENDS}, cuda(CUDA ${CUDAToolkit_VERSION}; ${_archs})")
endif()
if(QJOULE_SANITIZE)
  set(QJOULE_BUILD_FLAVOUR "${CMAKE_BUILD_TYPE}+asan+ubsan")
else()
  set(QJOULE_BUILD_FLAVOUR "${CMAKE_BUILD_TYPE}")
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/build_info.h.in
  ${PROJECT_BINARY_DIR}/generated/qjoule/build_info.h @ONLY)
