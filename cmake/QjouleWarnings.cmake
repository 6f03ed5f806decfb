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
  target_link_options(qjoule_options INTERFACE -fsanitize=address,undefined)
endif()
