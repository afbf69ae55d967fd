# test_ctx: the context's state slots and lt_ctx_original, the latter also
# over the registry's override records with the test plugins of tests/plugins.
add_dependencies(${name} tp-base tp-child tp-mine)
