#include "gloo_rt.h"

#include <sched.h>

namespace ltgloo {

RtScope::RtScope(bool want) {
    if (!want) return;
    if (pthread_getschedparam(pthread_self(), &old_policy_, &old_param_) != 0) return;
    if (old_policy_ == SCHED_FIFO || old_policy_ == SCHED_RR) return; /* already real-time */
    struct sched_param p {};
    p.sched_priority = 1;
    active_ = pthread_setschedparam(pthread_self(), SCHED_FIFO, &p) == 0;
}

RtScope::~RtScope() {
    if (active_) pthread_setschedparam(pthread_self(), old_policy_, &old_param_);
}

bool rt_permitted() {
    RtScope probe(true);
    int policy;
    struct sched_param p;
    return probe.active() ||
           (pthread_getschedparam(pthread_self(), &policy, &p) == 0 && (policy == SCHED_FIFO || policy == SCHED_RR));
}

} // namespace ltgloo
