# test_nccl dlopens the nccl plugin from the build's plugin dir: build it
# first. Its GPU scenarios allocate device buffers themselves: the CUDA
# runtime, linked statically as the gpu accelerator and the plugin link it.
if(TARGET lt-backend-nccl)
  add_dependencies(${name} lt-backend-nccl)
endif()
if(TARGET CUDA::cudart_static)
  target_link_libraries(${name} PRIVATE CUDA::cudart_static)
  target_compile_definitions(${name} PRIVATE LT_TEST_HAVE_CUDART=1)
endif()
