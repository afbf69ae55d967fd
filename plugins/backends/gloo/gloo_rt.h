/* Real-time priority for the communication threads.
 *
 * Why: on a machine where every core also runs a training thread, a woken
 * communication thread otherwise waits for a CPU for most of each step
 * (measured: 3.5 ms of a 10 ms step at batch 64, 2 ranks on 2 cores; with
 * SCHED_FIFO the wait drops to 0.2 ms and throughput doubles). gloo's device
 * thread only try-locks a pair and its epoll is level-triggered, so a
 * real-time device thread spins against a normal thread holding a pair lock:
 * either every thread that touches gloo's pairs runs at the same real-time
 * priority, or none does. So the device thread and the workers are started
 * from inside an RtScope, and the caller's own short pair-lock sections
 * (posting send/recv) run inside one too. */
#ifndef LT_GLOO_RT_H
#define LT_GLOO_RT_H

#include <pthread.h>

namespace ltgloo {

/* Raises the calling thread to SCHED_FIFO priority 1 for its lifetime when
 * `want`; threads created meanwhile inherit it. Restores the old policy. */
class RtScope {
  public:
    explicit RtScope(bool want);
    ~RtScope();
    RtScope(const RtScope &) = delete;
    RtScope &operator=(const RtScope &) = delete;
    bool active() const { return active_; }

  private:
    bool active_ = false;
    int old_policy_ = 0;
    struct sched_param old_param_ {};
};

/* Whether this process may use SCHED_FIFO (CAP_SYS_NICE or RLIMIT_RTPRIO >= 1). */
bool rt_permitted();

} // namespace ltgloo

#endif
