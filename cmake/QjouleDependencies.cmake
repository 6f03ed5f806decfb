# Every dependency comes from a Debian 12 package (scripts/install-deps.sh installs them).
find_package(Threads REQUIRED)
find_package(OpenMP REQUIRED)               # oneDNN's Debian build uses the OpenMP runtime
find_package(nlohmann_json 3.10 REQUIRED)   # nlohmann-json3-dev
find_package(CLI11 2.1 REQUIRED)            # libcli11-dev
find_package(fmt 9 REQUIRED)                # libfmt-dev
find_package(dnnl 2.6 REQUIRED)             # libdnnl-dev (oneDNN)
find_package(PkgConfig REQUIRED)
pkg_check_modules(UTF8PROC REQUIRED IMPORTED_TARGET libutf8proc)  # libutf8proc-dev
pkg_check_modules(OPENBLAS REQUIRED IMPORTED_TARGET openblas)     # libopenblas-openmp-dev (BLAS + LAPACK: GPTQ)
if(QJOULE_BUILD_TESTS)
  find_package(GTest REQUIRED)              # libgtest-dev, libgmock-dev
endif()
if(QJOULE_BUILD_BENCH)
  find_package(benchmark REQUIRED)          # libbenchmark-dev
endif()
