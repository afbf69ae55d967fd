# cublas_lazy.c compiled into the test itself, with the gpu plugin's
# definitions, when this configuration builds the gpu plugin; else the test
# skips (exit 77).
if(TARGET lt-accelerator-gpu)
  add_dependencies(${name} lt-accelerator-gpu)
  target_sources(${name} PRIVATE ${CMAKE_SOURCE_DIR}/plugins/accelerators/gpu/cublas_lazy.c)
  target_include_directories(${name} PRIVATE ${CMAKE_SOURCE_DIR}/plugins/accelerators/gpu
                             ${LT_GPU_CUDA_INCLUDE_DIRS})
  target_compile_definitions(${name} PRIVATE LT_TEST_GPU_BUILT=1 ${LT_GPU_CUBLAS_DEFS})
endif()
