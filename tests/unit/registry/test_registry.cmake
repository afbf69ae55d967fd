# test_registry: the plugin loader (core/registry/); test_batch_loader is the data
# loader. The plugins it opens are built by tests/plugins.
add_dependencies(${name} tp-base tp-child tp-mine tp-old tp-multi tp-badmagic tp-abi2
  tp-abinew tp-huge tp-oddkind tp-tiny tp-wrongname tp-incomplete tp-noentry tp-dataentry tp-orphan
  tp-cyca tp-cycb tp-incomplete2 tp-heir)
