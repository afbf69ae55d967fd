# The test inspects and forges headers with the same JSON library liblt uses.
target_link_libraries(${name} PRIVATE PkgConfig::JANSSON)
