# qjoule_unity_build(TARGET...): the target's sources compiled up to 8 to one translation unit (CMake's unity
# build) unless QJOULE_UNITY_BUILD is OFF (scripts/build.sh debug: every file alone, which shows a file that
# does not include what it uses). The commands and most libraries include the same heavy headers (CLI11,
# nlohmann::json, fmt) in every file, and CI builds them twice: compiled together, a batch parses and
# instantiates them once. The kernels stay one file a unit (each file its own target ISA).
function(qjoule_unity_build)
  if(NOT QJOULE_UNITY_BUILD)
    return()
  endif()
  foreach(target IN LISTS ARGN)
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 8)
  endforeach()
endfunction()
