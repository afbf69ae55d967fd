/* bagua's qadam: Bagua's QAdam (Adam with 8-bit momentum communication).
 *
 * For the first warmup_steps optimizer steps it is plain data-parallel
 * AdamW: ddp averages the gradients, the core's optimizer updates the
 * parameters and both moments. From then on the second moment v is frozen
 * and gradients are not communicated; each step
 *   m = beta1 m + (1 - beta1) g            (this rank's own gradient)
 *   m = average of m over ranks            (bytegrad's 8-bit exchange)
 *   p = p (1 - lr wd) - lr / (1 - beta1^t) m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
 * (the accelerator's qadam_step kernel). m and v are the configured
 * optimizer's own state, so checkpoints save and restore them as AdamW's,
 * and resuming is exact. Weight decay is AdamW's, decoupled, where Bagua's
 * QAdamOptimizer adds it to the gradient; with weight_decay 0 they agree.
 * Unlike Bagua, each element's step is capped at the largest Adam itself
 * takes, (1 - beta1) / sqrt(1 - beta2) learning rates, and an element
 * whose frozen v is 0 does not move (qadam_step in lt/accelerator.h):
 * a weight of a pixel that was almost always blank during the warm-up has
 * a tiny frozen v, and its first real gradients would make it jump by
 * m / eps. Without the cap the Fashion-MNIST MLP turned NaN ~250 steps
 * after a 600-step warm-up, even with uncompressed momentum. */
#include <strings.h>
#include "bagua_internal.h"

lt_status qadam_setup(lt_ctx *ctx, lt_run *run, bagua *b) {
    lt_optimizer_view o = {.struct_size = sizeof o};
    LT_CHECK(lt_run_optimizer(run, &o));
    if (strcasecmp(o.name, "adamw")) {
        lt_set_error(ctx, "strategy.algorithm = qadam compresses Adam's momentum, so it needs optimizer.name = adamw, "
                     "not %s", o.name);
        return LT_ERR_INVALID;
    }
    const lt_kernels *k = lt_run_kernels(run);
    if (!LT_KERNELS_HAS(k, qadam_step)) {
        lt_set_error(ctx, "strategy.algorithm = qadam needs the accelerator's qadam_step kernel (ABI 1.5), which it "
                     "lacks; use gradient_allreduce with adamw");
        return LT_ERR_UNSUPPORTED;
    }
    return bytegrad_setup(ctx, &b->bg, run, b->flat.count, o.dtype, b->chunk);
}

lt_status qadam_step(lt_ctx *ctx, lt_run *run, bagua *b) {
    lt_optimizer_view o = {.struct_size = sizeof o};
    LT_CHECK(lt_run_optimizer(run, &o));
    void *g;
    LT_CHECK(lt_run_master_grads(run, &g));
    const lt_kernels *k = lt_run_kernels(run);
    lt_ctx *kc = lt_run_kernel_ctx(run);
    void *m = o.state[0], *v = o.state[1];
    k->axpby(kc, o.dtype, (int64_t)o.count, 1.0 - o.beta1, g, o.beta1, m);
    LT_CHECK(lt_run_synchronize(run));
    lt_pg *pg;
    LT_CHECK(bagua_group(ctx, run, &pg));
    LT_CHECK(bytegrad_reduce(ctx, &b->bg, run, pg, m));
    lt_adamw_args a = {o.lr, o.beta1, o.beta2, o.eps, o.weight_decay, o.step + 1};
    k->qadam_step(kc, o.dtype, b->flat.params, m, v, (int64_t)o.count, &a);
    return lt_run_synchronize(run);
}
