# The environment plugins are dlopen'ed from the plugin dir: build them first.
add_dependencies(${name} lt-environment-lightning lt-environment-torchelastic lt-environment-slurm
                 lt-environment-mpi)
