# Compiles the cpu accelerator's cast loops (both forms) and its 16-bit GEMM
# kernels (every path) in, to call them directly, and dlopens the plugin for
# its cast and gemm kernels. -O3 as the plugin builds them, and so the half.h
# reference loops vectorise: the f32 sweep covers all 2^32 patterns.
target_sources(${name} PRIVATE ${CMAKE_SOURCE_DIR}/plugins/accelerators/cpu/cast_simd.c
  ${CMAKE_SOURCE_DIR}/plugins/accelerators/cpu/gemm_lowp_avx2.c
  ${CMAKE_SOURCE_DIR}/plugins/accelerators/cpu/gemm_lowp_dot.c
  ${CMAKE_SOURCE_DIR}/plugins/accelerators/cpu/gemm_lowp_yt.c)
target_include_directories(${name} PRIVATE ${CMAKE_SOURCE_DIR}/plugins/accelerators/cpu
  ${CMAKE_SOURCE_DIR}/plugins)
target_compile_options(${name} PRIVATE -O3)
add_dependencies(${name} lt-accelerator-cpu)
