# Generates qjoule/build_info.h with version, build type and enabled backends, and the target that
# stamps the git commit (qjoule/build_commit.h) at every build.
find_package(Git QUIET)
# The commit is stamped at every build, not at configure time (qjoule/build_commit.h, included by
# build_info.h): a target that includes build_info.h depends on qjoule_build_commit.
set(_qjoule_commit_header ${PROJECT_BINARY_DIR}/generated/qjoule/build_commit.h)
set(_qjoule_commit_command ${CMAKE_COMMAND} -DSOURCE_DIR=${PROJECT_SOURCE_DIR} -DOUTPUT=${_qjoule_commit_header}
    -DGIT_EXECUTABLE=${GIT_EXECUTABLE} -P ${PROJECT_SOURCE_DIR}/cmake/QjouleGitCommit.cmake)
execute_process(COMMAND ${_qjoule_commit_command})  # so that the header exists from the start
add_custom_target(qjoule_build_commit ALL COMMAND ${_qjoule_commit_command} BYPRODUCTS ${_qjoule_commit_header}
                  VERBATIM)
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
