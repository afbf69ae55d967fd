# lt_link_internal(<target>): for a program that calls the core's internal
# functions (ltrun, the unit tests, the benches). It gets the core's objects
# (lt_internal) linked in. Such a program also dlopens plugins, which link
# liblt.so and call lt_* functions; those calls must reach the program's copy
# (one thread-local error slot, one log level, one run), so:
#  - ENABLE_EXPORTS (-rdynamic): the program exports its LT_API functions and
#    the dynamic linker, which searches the program first, binds the plugins'
#    lt_* references to them;
#  - the program's own functions stay hidden (visibility preset), so
#    -rdynamic exports exactly the core's LT_API functions and nothing of
#    the program leaks into the plugins' symbol scope;
#  - liblt.so stays NEEDED (--no-as-needed although nothing in the program
#    uses it): a plugin built without an RPATH (pkg-config) then finds
#    liblt.so.1 already loaded instead of failing to open it.
function(lt_link_internal target)
  target_link_libraries(${target} PRIVATE lt_internal
                        "-Wl,--push-state,--no-as-needed" lt "-Wl,--pop-state")
  set_target_properties(${target} PROPERTIES ENABLE_EXPORTS ON
                        C_VISIBILITY_PRESET hidden CXX_VISIBILITY_PRESET hidden)
endfunction()
