# Compile options shared by every qjoule target: link `qjoule_options` to get them. They are the
# C++ compiler's; CUDA sources (nvcc) get theirs in src/kernels/cuda.
add_library(qjoule_options INTERFACE)
set(QJOULE_CXX_WARNINGS
  -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wold-style-cast -Wcast-align
  -Wunused -Woverloaded-virtual -Wnull-dereference -Wimplicit-fallthrough -Wno-psabi)
target_compile_options(qjoule_options INTERFACE "$<$<COMPILE_LANGUAGE:CXX>:${QJOULE_CXX_WARNINGS}>")
if(QJOULE_WERROR)
  target_compile_options(qjoule_options INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Werror>)
endif()
target_include_directories(qjoule_options INTERFACE
  ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR}/src ${PROJECT_BINARY_DIR}/generated)
if(QJOULE_SANITIZE)
  set(QJOULE_SANITIZE_FLAGS -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
  target_compile_options(qjoule_options INTERFACE "$<$<COMPILE_LANGUAGE:CXX>:${QJOULE_SANITIZE_FLAGS}>")
  # A test's own code (QJOULE_TEST_CODE, tests/CMakeLists.txt: checks, fixtures, commands run) keeps ASan and
  # UBSan but not UBSan's null and alignment checks on every pointer use, which doubled its compile time
  # (test_run_record.cpp: 15.0 -> 9.4 s); a null pointer used there still stops ASan. The code under test
  # keeps them all.
  target_compile_options(qjoule_options INTERFACE
    "$<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:$<TARGET_PROPERTY:QJOULE_TEST_CODE>>>:-fno-sanitize=null,alignment>")
  target_link_options(qjoule_options INTERFACE -fsanitize=address,undefined)
endif()
