# Compile options shared by every qjoule target: link `qjoule_options` to get them.
add_library(qjoule_options INTERFACE)
target_compile_options(qjoule_options INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wold-style-cast -Wcast-align
  -Wunused -Woverloaded-virtual -Wnull-dereference -Wimplicit-fallthrough
  -Wno-psabi)
if(QJOULE_WERROR)
  target_compile_options(qjoule_options INTERFACE -Werror)
endif()
target_include_directories(qjoule_options INTERFACE
  ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR}/src ${PROJECT_BINARY_DIR}/generated)
if(QJOULE_SANITIZE)
  target_compile_options(qjoule_options INTERFACE
    -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
  target_link_options(qjoule_options INTERFACE -fsanitize=address,undefined)
endif()
