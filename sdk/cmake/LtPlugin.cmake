# lt_add_plugin(<kind> <name> SOURCES ... [LIBS ...] [NO_INSTALL])
# Builds liblt-<kind>-<name>.so, linked to lt::lt, into LT_PLUGIN_BUILD_DIR
# (default: <build dir>/plugins; run it with ltrun --plugin-dir that dir).
# lt's own build sets LT_PLUGIN_INSTALL_DIR (lib/lt/abi-<major>), so
# `cmake --install` installs its built-in plugins there; an outside project
# installs nothing unless it sets LT_PLUGIN_INSTALL_DIR itself (for instance
# to LT_INSTALLED_PLUGIN_DIR, which find_package(lt) defines). NO_INSTALL
# never installs (examples, test plugins). Used for the built-in plugins and
# by third parties through find_package(lt), which includes this file.
function(lt_add_plugin kind name)
  cmake_parse_arguments(P "NO_INSTALL" "" "SOURCES;LIBS" ${ARGN})
  if(P_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "lt_add_plugin(${kind} ${name}): unknown arguments '${P_UNPARSED_ARGUMENTS}'; "
                        "use lt_add_plugin(<kind> <name> SOURCES <files> [LIBS <libs>] [NO_INSTALL])")
  endif()
  if(NOT TARGET lt::lt)
    message(FATAL_ERROR "lt_add_plugin(${kind} ${name}): no target lt::lt; call find_package(lt REQUIRED) first")
  endif()
  set(target "lt-${kind}-${name}")
  add_library(${target} MODULE ${P_SOURCES})
  target_link_libraries(${target} PRIVATE lt::lt ${P_LIBS})
  set(out "${LT_PLUGIN_BUILD_DIR}")
  if(NOT out)
    set(out "${CMAKE_BINARY_DIR}/plugins")
  endif()
  set_target_properties(${target} PROPERTIES
    PREFIX "" OUTPUT_NAME "liblt-${kind}-${name}"
    C_VISIBILITY_PRESET hidden CXX_VISIBILITY_PRESET hidden
    LIBRARY_OUTPUT_DIRECTORY "${out}")
  if(LT_PLUGIN_INSTALL_DIR AND NOT P_NO_INSTALL)
    install(TARGETS ${target} LIBRARY DESTINATION "${LT_PLUGIN_INSTALL_DIR}")
  endif()
endfunction()
