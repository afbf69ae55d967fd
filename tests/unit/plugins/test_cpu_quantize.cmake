# The test dlopens the cpu accelerator from the plugin dir: build it first.
# Its reference uses plugins/common/half.h, the plugin's own 16-bit
# rounding, and is built like quantize.c without fused multiply-adds, so
# that both compute the same bits.
add_dependencies(${name} lt-accelerator-cpu)
target_include_directories(${name} PRIVATE ${CMAKE_SOURCE_DIR}/plugins)
target_compile_options(${name} PRIVATE -ffp-contract=off)
