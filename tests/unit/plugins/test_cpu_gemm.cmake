# Calls the cpu accelerator's AVX-512 GEMM directly (its source is compiled
# in), and the plugin (dlopened) for the gemm parameter.
target_sources(${name} PRIVATE ${CMAKE_SOURCE_DIR}/plugins/accelerators/cpu/gemm_avx512.c)
target_include_directories(${name} PRIVATE ${CMAKE_SOURCE_DIR}/plugins/accelerators/cpu)
target_compile_options(${name} PRIVATE -O2)
add_dependencies(${name} lt-accelerator-cpu)
