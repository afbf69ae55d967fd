/* liblt-strategy-dataentry.so: variables where functions belong. Its
 * lt_plugin_entry_v1 is an int, so the loader must refuse the file rather
 * than call it; a hook override naming not_a_function must be refused too.
 * No lt header: LT_PLUGIN_EXPORT would make the entry point a function. */
__attribute__((visibility("default"))) int lt_plugin_entry_v1 = 5;
__attribute__((visibility("default"))) int not_a_function = 1;
