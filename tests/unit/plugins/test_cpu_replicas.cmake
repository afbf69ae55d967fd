# The test dlopens the cpu accelerator from the plugin dir: build it first.
add_dependencies(${name} lt-accelerator-cpu)
