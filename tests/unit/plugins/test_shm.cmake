# test_shm dlopens the shm plugin from the build's plugin dir: build it first.
if(TARGET lt-backend-shm)
  add_dependencies(${name} lt-backend-shm)
endif()
