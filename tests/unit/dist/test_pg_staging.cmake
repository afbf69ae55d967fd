# Loads the cpu accelerator and the gloo and shm backends from the plugin
# dir: build them first.
add_dependencies(${name} lt-accelerator-cpu)
foreach(backend gloo shm)
  if(TARGET lt-backend-${backend})
    add_dependencies(${name} lt-backend-${backend})
  endif()
endforeach()
