# test_registry: the plugin loader (core/registry*.c). (test_loader is the data loader.)
# The registry is internal to liblt (hidden symbols), so the test compiles
# its sources in; the plugins it opens are built by tests/plugins.
target_sources(${name} PRIVATE
  ${CMAKE_SOURCE_DIR}/core/hooks.c
  ${CMAKE_SOURCE_DIR}/core/hooks_defaults.c
  ${CMAKE_SOURCE_DIR}/core/registry.c
  ${CMAKE_SOURCE_DIR}/core/registry_check.c
  ${CMAKE_SOURCE_DIR}/core/registry_find.c
  ${CMAKE_SOURCE_DIR}/core/registry_override.c
  ${CMAKE_SOURCE_DIR}/core/registry_resolve.c
  ${CMAKE_SOURCE_DIR}/core/registry_scan.c)
add_dependencies(${name} tp-base tp-child tp-mine tp-old tp-multi tp-badmagic tp-abi2
  tp-abinew tp-huge tp-oddkind tp-tiny tp-wrongname tp-incomplete tp-noentry tp-orphan
  tp-cyca tp-cycb)
