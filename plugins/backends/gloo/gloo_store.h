/* Adapts the lt rendezvous store client (lt/store.h) to the
 * gloo::rendezvous::Store interface gloo's connectFullMesh uses, with every
 * key under a prefix. Failures throw gloo::IoException carrying the store's
 * message; status() tells the caller which lt_status it was. Used only on the
 * thread that creates the group (an lt_store client is single-threaded). */
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include <gloo/rendezvous/store.h>

#include "lt/store.h"

namespace ltgloo {

class StoreAdapter : public gloo::rendezvous::Store {
  public:
    StoreAdapter(lt_store *store, std::string prefix) : store_(store), prefix_(std::move(prefix)) {}

    void set(const std::string &key, const std::vector<char> &data) override;
    std::vector<char> get(const std::string &key) override;
    void wait(const std::vector<std::string> &keys) override;
    void wait(const std::vector<std::string> &keys,
              const std::chrono::milliseconds &timeout) override;

    /* The status of the last failed call (LT_OK when none failed). */
    lt_status status() const { return status_; }
    /* After a timeout: the first key (without the prefix) that was still
     * not there, "" when unknown. gloo's keys are the peers' ranks. */
    const std::string &missing() const { return missing_; }

  private:
    [[noreturn]] void fail(lt_status st);

    lt_store *store_;
    std::string prefix_;
    lt_status status_ = LT_OK;
    std::string missing_;
};

} // namespace ltgloo
