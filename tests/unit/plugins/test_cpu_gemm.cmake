# Calls the cpu accelerator's GEMM variants directly (their sources are
# compiled in, and the AVX2 one asks OpenBLAS its thread count), and the
# plugin (dlopened) for the gemm and isa parameters.
target_sources(${name} PRIVATE ${CMAKE_SOURCE_DIR}/plugins/accelerators/cpu/gemm_short.c
  ${CMAKE_SOURCE_DIR}/plugins/accelerators/cpu/gemm_avx512.c
  ${CMAKE_SOURCE_DIR}/plugins/accelerators/cpu/gemm_avx2.c)
target_include_directories(${name} PRIVATE ${CMAKE_SOURCE_DIR}/plugins/accelerators/cpu)
target_compile_options(${name} PRIVATE -O2)
target_link_libraries(${name} PRIVATE PkgConfig::OPENBLAS)
add_dependencies(${name} lt-accelerator-cpu)
