# The test loads the gpu accelerator from the build's plugin dir: build it
# first when this configuration builds it (LT_WITH_CUDA and a toolkit). Not
# built, the test says so and skips (exit 77).
if(TARGET lt-accelerator-gpu)
  add_dependencies(${name} lt-accelerator-gpu)
  target_compile_definitions(${name} PRIVATE LT_TEST_GPU_BUILT=1)
endif()
