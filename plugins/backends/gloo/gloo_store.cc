/* lt_store -> gloo::rendezvous::Store (see gloo_store.h). */
#include "gloo_store.h"

#include <cstdlib>
#include <limits>

#include <gloo/common/error.h>

namespace ltgloo {

void StoreAdapter::fail(lt_status st) {
    status_ = st;
    throw gloo::IoException(lt_store_error(store_));
}

void StoreAdapter::set(const std::string &key, const std::vector<char> &data) {
    lt_status st = lt_store_set(store_, (prefix_ + key).c_str(), data.data(), data.size());
    if (st != LT_OK) fail(st);
}

std::vector<char> StoreAdapter::get(const std::string &key) {
    void *val = nullptr;
    size_t len = 0;
    lt_status st = lt_store_get(store_, (prefix_ + key).c_str(), &val, &len);
    if (st == LT_ERR_TIMEOUT) missing_ = key;
    if (st != LT_OK) fail(st);
    const char *p = static_cast<const char *>(val);
    std::vector<char> out(p, p + len);
    free(val);
    return out;
}

void StoreAdapter::wait(const std::vector<std::string> &keys) {
    wait(keys, gloo::rendezvous::Store::kDefaultTimeout);
}

void StoreAdapter::wait(const std::vector<std::string> &keys,
                        const std::chrono::milliseconds &timeout) {
    std::vector<std::string> full;
    std::vector<const char *> ptrs;
    full.reserve(keys.size());
    for (const auto &k : keys) full.push_back(prefix_ + k);
    for (const auto &k : full) ptrs.push_back(k.c_str());
    long long ms = timeout.count();
    if (ms <= 0 || ms > std::numeric_limits<int>::max()) ms = std::numeric_limits<int>::max();
    lt_status st = lt_store_wait(store_, ptrs.data(), ptrs.size(), (int)ms);
    if (st == LT_ERR_TIMEOUT) { /* which one is still missing, for the message */
        std::string why = lt_store_error(store_); /* before the lookups below replace it */
        for (size_t i = 0; i < keys.size() && missing_.empty(); i++) {
            void *v = nullptr;
            size_t len = 0;
            if (lt_store_try_get(store_, full[i].c_str(), &v, &len) == LT_OK) free(v);
            else missing_ = keys[i];
        }
        status_ = st;
        throw gloo::IoException(why);
    }
    if (st != LT_OK) fail(st);
}

} // namespace ltgloo
