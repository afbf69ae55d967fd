# test_gloo dlopens the gloo plugin from the build's plugin dir: build it first.
if(TARGET lt-backend-gloo)
  add_dependencies(test_gloo lt-backend-gloo)
endif()
