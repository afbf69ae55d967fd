# lt_add_plugin(<kind> <name> SOURCES ... [LIBS ...])
# Builds liblt-<kind>-<name>.so into the plugin dir of this build and installs it
# under lib/lt/abi-<major>/. Used for built-in plugins and by third parties
# (through find_package(lt) which includes this file).
function(lt_add_plugin kind name)
  cmake_parse_arguments(P "" "" "SOURCES;LIBS" ${ARGN})
  set(target "lt-${kind}-${name}")
  add_library(${target} MODULE ${P_SOURCES})
  if(TARGET lt)
    target_link_libraries(${target} PRIVATE lt ${P_LIBS})
  else()
    target_link_libraries(${target} PRIVATE lt::lt ${P_LIBS})
  endif()
  if(NOT DEFINED LT_PLUGIN_BUILD_DIR)
    set(LT_PLUGIN_BUILD_DIR "${CMAKE_BINARY_DIR}/plugins")
  endif()
  set_target_properties(${target} PROPERTIES
    PREFIX "" OUTPUT_NAME "liblt-${kind}-${name}"
    C_VISIBILITY_PRESET hidden CXX_VISIBILITY_PRESET hidden
    LIBRARY_OUTPUT_DIRECTORY "${LT_PLUGIN_BUILD_DIR}")
  if(DEFINED LT_PLUGIN_INSTALL_DIR)
    install(TARGETS ${target} LIBRARY DESTINATION "${LT_PLUGIN_INSTALL_DIR}")
  endif()
endfunction()
