# test_idx writes its own gzip files (truncated, corrupt) and reads the real
# ones raw to compare, so it needs zlib itself, not just through liblt.
target_link_libraries(${name} PRIVATE ZLIB::ZLIB)
