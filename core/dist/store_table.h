/* The rendezvous store server's key-value table: byte-string keys to
 * byte-string values, a chained hash table. Used by the server thread only,
 * so it takes no locks. Internal to liblt. */
#ifndef LT_STORE_TABLE_H
#define LT_STORE_TABLE_H

#include <stddef.h>
#include <stdint.h>

typedef struct lt_store_table lt_store_table;

lt_store_table *lt_store_table_new(void);
void lt_store_table_free(lt_store_table *t);

/* The value of key, or NULL when absent (*vlen untouched then). The pointer is
 * valid until the key is next changed. A present key may have an empty value. */
const uint8_t *lt_store_table_get(const lt_store_table *t, const void *key, size_t klen,
                                  size_t *vlen);
/* Copies key and value in. Returns 0, or -1 when out of memory (table unchanged). */
int lt_store_table_set(lt_store_table *t, const void *key, size_t klen, const void *val,
                       size_t vlen);
/* Returns 1 when the key existed. */
int lt_store_table_delete(lt_store_table *t, const void *key, size_t klen);

#endif
