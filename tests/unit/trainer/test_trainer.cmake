# Loads the plugins of a cpu run from the plugin dir: build them first.
add_dependencies(${name} lt-accelerator-cpu lt-strategy-single_device lt-precision-32-true
                 lt-precision-64-true lt-module-fashion_mnist_mlp lt-environment-lightning)
# environment auto-detection scores a third-party environment from tests/plugins
add_dependencies(${name} tp-env tp-envfuture tp-multi)
