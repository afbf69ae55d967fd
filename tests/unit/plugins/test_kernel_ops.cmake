# The kernel conformance program (ggml's test-backend-ops for lt_kernels):
# its helpers, the accelerators it loads built first, and a second test that
# runs it on the gpu accelerator. That one exits 77 (skipped) where the gpu
# plugin is not built or finds no device, so it can never pass without a GPU.
target_sources(${name} PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/kernel_ops_ref.c
  ${CMAKE_CURRENT_LIST_DIR}/kernel_ops_harness.c)
# quantize_u8's reference must round each operation on its own, as the ABI
# words it (no fused multiply-add), and so must rand_fill's uniform one.
set_source_files_properties(${src} ${CMAKE_CURRENT_LIST_DIR}/kernel_ops_ref.c
  PROPERTIES COMPILE_OPTIONS -ffp-contract=off)
add_dependencies(${name} lt-accelerator-cpu)
if(TARGET lt-accelerator-gpu)
  add_dependencies(${name} lt-accelerator-gpu)
endif()
add_test(NAME ${name}_gpu COMMAND ${name} --accelerator gpu WORKING_DIRECTORY ${CMAKE_BINARY_DIR})
set_tests_properties(${name}_gpu PROPERTIES TIMEOUT 600 SKIP_RETURN_CODE 77)
