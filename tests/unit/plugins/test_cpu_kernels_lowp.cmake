# The test dlopens the cpu accelerator from the plugin dir: build it first.
# It narrows its references with plugins/common/half.h, the plugin's own
# rounding.
add_dependencies(${name} lt-accelerator-cpu)
target_include_directories(${name} PRIVATE ${CMAKE_SOURCE_DIR}/plugins)
