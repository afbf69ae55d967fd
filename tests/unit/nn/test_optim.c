/* The optimizers (core/nn/optim.c over the cpu accelerator's kernels) against
 * numbers worked out by hand from PyTorch's update rules, the learning-rate
 * schedules, gradient-norm clipping, and config validation. */
#include <CUnit/Basic.h>
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cunit_run.h"
#include "common/ctx.h"
#include "cpu_plugin.h"
#include "nn/optim.h"


static const lt_accelerator_desc *g_acc;
static const lt_kernels *K;
static lt_ctx g_ctx;

static int suite_init(void) { return cpu_plugin_open(&g_acc, &g_ctx, &K); }

static int suite_clean(void) {
    if (g_acc) g_acc->teardown(&g_ctx);
    return 0;
}

/* The config the trainer builds from its defaults: sgd, lr 0.1, no schedule. */
static lt_optim_config base_cfg(const char *name) {
    lt_optim_config c;
    memset(&c, 0, sizeof c);
    c.struct_size = sizeof c;
    snprintf(c.name, sizeof c.name, "%s", name);
    c.lr = 0.1;
    c.beta1 = 0.9;
    c.beta2 = 0.999;
    c.eps = 1e-8;
    snprintf(c.scheduler, sizeof c.scheduler, "none");
    c.step_size = 1;
    c.gamma = 0.1;
    return c;
}

/* Three steps on a 3-element vector: p0 = [1, -2, 0.5] and these gradients. */
static const double P0[3] = {1.0, -2.0, 0.5};
static const double G[3][3] = {{0.1, -0.2, 0.3}, {0.4, 0.0, -0.5}, {-0.3, 0.2, 0.1}};

static bool near(double got, double want, double rtol) {
    return fabs(got - want) <= rtol * (fabs(want) + 1e-300) || got == want;
}

/* Runs lt_optim_step three times and compares p after each with want[step]. */
static void run_steps(const char *what, const lt_optim_config *c, lt_dtype t,
                      const double want[3][3], double rtol) {
    char err[256];
    CU_ASSERT_EQUAL_FATAL(lt_optim_validate(c, err, sizeof err), LT_OK);
    lt_optimizer o;
    CU_ASSERT_EQUAL_FATAL(lt_optim_init(&o, c, 3, t, g_acc, &g_ctx, K), LT_OK);
    void *p = NULL, *g = NULL;
    size_t es = lt_dtype_size(t);
    CU_ASSERT_FATAL(g_acc->alloc(&g_ctx, 3 * es, &p) == LT_OK && g_acc->alloc(&g_ctx, 3 * es, &g) == LT_OK);
    K->cast(&g_ctx, t, p, LT_F64, P0, 3); /* cpu: device memory is host memory */
    int bad = 0;
    for (int s = 0; s < 3; s++) {
        K->cast(&g_ctx, t, g, LT_F64, G[s], 3);
        lt_optim_step(&o, p, g, K, &g_ctx, 0);
        double got[3];
        K->cast(&g_ctx, LT_F64, got, t, p, 3);
        CU_ASSERT_EQUAL_FATAL(g_acc->synchronize(&g_ctx), LT_OK);
        for (int i = 0; i < 3; i++) {
            if (near(got[i], want[s][i], rtol)) continue;
            printf("\n  %s (%s) step %d p[%d]: got %.17g, want %.17g", what, lt_dtype_name(t),
                   s + 1, i, got[i], want[s][i]);
            bad++;
        }
    }
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_EQUAL(o.step, 3);
    g_acc->free(&g_ctx, p);
    g_acc->free(&g_ctx, g);
    lt_optim_free(&o, g_acc, &g_ctx);
}

static void both_dtypes(const char *what, const lt_optim_config *c, const double want[3][3]) {
    run_steps(what, c, LT_F64, want, 1e-14);
    run_steps(what, c, LT_F32, want, 2e-6);
}

/* ---- SGD ---------------------------------------------------------------- */

static void test_sgd_plain(void) {
    /* p -= 0.1 g */
    static const double want[3][3] = {
        {1 - 0.01, -2 + 0.02, 0.5 - 0.03},      /* 0.99, -1.98, 0.47 */
        {0.99 - 0.04, -1.98, 0.47 + 0.05},      /* 0.95, -1.98, 0.52 */
        {0.95 + 0.03, -1.98 - 0.02, 0.52 - 0.01}, /* 0.98, -2.00, 0.51 */
    };
    lt_optim_config c = base_cfg("sgd");
    both_dtypes("sgd", &c, want);
}

static void test_sgd_momentum(void) {
    /* buf1 = g1 (PyTorch: no dampening on the first step); buf = 0.9 buf + g */
    static const double want[3][3] = {
        {0.99, -1.98, 0.47},
        /* buf2 = [0.49, -0.18, -0.23] */
        {0.99 - 0.049, -1.98 + 0.018, 0.47 + 0.023},      /* 0.941, -1.962, 0.493 */
        /* buf3 = [0.141, 0.038, -0.107] */
        {0.941 - 0.0141, -1.962 - 0.0038, 0.493 + 0.0107}, /* 0.9269, -1.9658, 0.5037 */
    };
    lt_optim_config c = base_cfg("sgd");
    c.momentum = 0.9;
    both_dtypes("sgd momentum", &c, want);
}

static void test_sgd_dampening(void) {
    /* buf1 = g1; buf = 0.9 buf + (1 - 0.5) g */
    static const double want[3][3] = {
        {0.99, -1.98, 0.47},
        /* buf2 = [0.09 + 0.2, -0.18 + 0, 0.27 - 0.25] = [0.29, -0.18, 0.02] */
        {0.99 - 0.029, -1.98 + 0.018, 0.47 - 0.002},        /* 0.961, -1.962, 0.468 */
        /* buf3 = [0.261 - 0.15, -0.162 + 0.1, 0.018 + 0.05] = [0.111, -0.062, 0.068] */
        {0.961 - 0.0111, -1.962 + 0.0062, 0.468 - 0.0068}, /* 0.9499, -1.9558, 0.4612 */
    };
    lt_optim_config c = base_cfg("sgd");
    c.momentum = 0.9;
    c.dampening = 0.5;
    both_dtypes("sgd dampening", &c, want);
}

static void test_sgd_nesterov(void) {
    /* buf as with momentum; the step uses g + 0.9 buf */
    static const double want[3][3] = {
        /* d1 = g1 + 0.9 g1 = [0.19, -0.38, 0.57] */
        {1 - 0.019, -2 + 0.038, 0.5 - 0.057},               /* 0.981, -1.962, 0.443 */
        /* buf2 = [0.49, -0.18, -0.23]; d2 = [0.841, -0.162, -0.707] */
        {0.981 - 0.0841, -1.962 + 0.0162, 0.443 + 0.0707},  /* 0.8969, -1.9458, 0.5137 */
        /* buf3 = [0.141, 0.038, -0.107]; d3 = [-0.1731, 0.2342, 0.0037] */
        {0.8969 + 0.01731, -1.9458 - 0.02342, 0.5137 - 0.00037}, /* 0.91421, -1.96922, 0.51333 */
    };
    lt_optim_config c = base_cfg("sgd");
    c.momentum = 0.9;
    c.nesterov = 1;
    both_dtypes("sgd nesterov", &c, want);
}

static void test_sgd_weight_decay(void) {
    /* d = g + 0.01 p (coupled L2), then momentum 0.9 */
    static const double want[3][3] = {
        /* d1 = [0.11, -0.22, 0.305] */
        {0.989, -1.978, 0.4695},
        /* d2 = [0.40989, -0.01978, -0.495305]; buf2 = [0.50889, -0.21778, -0.220805] */
        {0.989 - 0.050889, -1.978 + 0.021778, 0.4695 + 0.0220805}, /* 0.938111, -1.956222, 0.4915805 */
        /* d3 = [-0.29061889, 0.18043778, 0.104915805];
         * buf3 = [0.16738211, -0.01556422, -0.093808695] */
        {0.938111 - 0.016738211, -1.956222 + 0.001556422, 0.4915805 + 0.0093808695},
    };
    lt_optim_config c = base_cfg("sgd");
    c.momentum = 0.9;
    c.weight_decay = 0.01;
    both_dtypes("sgd weight decay", &c, want);
}

/* ---- AdamW ------------------------------------------------------------------- */

static void test_adamw(void) {
    /* lr 0.01, betas (0.9, 0.999), eps 1e-8, wd 0.1:
     *   p *= 1 - lr wd;  m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2
     *   p -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
     * Step 1: m^ = g and v^ = g^2, so p = 0.999 p - 0.01 g / (|g| + 1e-8):
     *   0.999 - 0.01 * 0.1/0.10000001 = 0.9890000001, -1.998 + 0.0099999995,
     *   0.4995 - 0.01 * 0.3/0.30000001 = 0.4895000003333... */
    static const double want[3][3] = {
        {0.98900000099999985, -1.9880000005, 0.4895000003333333},
        {0.97916723639651171, -1.9793114184320559, 0.49194611230947949},
        {0.9764209861415688, -1.9781907841055175, 0.49261025390846319},
    };
    lt_optim_config c = base_cfg("adamw");
    c.lr = 0.01;
    c.weight_decay = 0.1;
    both_dtypes("adamw", &c, want);
}

/* Without decay AdamW is Adam; step 1 moves every element by lr sign(g). */
static void test_adamw_no_decay(void) {
    static const double want[3][3] = {
        {0.99000000099999985, -1.9900000005, 0.4900000003333333},
        {0.98115623639751171, -1.9832994184325559, 0.49293561230981281},
        {0.97938915337896526, -1.9841580955244495, 0.49409170002110597},
    };
    lt_optim_config c = base_cfg("adamw");
    c.lr = 0.01;
    both_dtypes("adam (wd 0)", &c, want);
}

/* The schedule is applied inside lt_optim_step, by optimizer step count. */
static void test_step_uses_schedule(void) {
    /* lr 0.1, 0.05, 0.025 (step schedule every step, gamma 0.5) */
    static const double want[3][3] = {
        {0.99, -1.98, 0.47},
        {0.99 - 0.02, -1.98, 0.47 + 0.025},     /* 0.97, -1.98, 0.495 */
        {0.97 + 0.0075, -1.98 - 0.005, 0.495 - 0.0025},
    };
    lt_optim_config c = base_cfg("sgd");
    snprintf(c.scheduler, sizeof c.scheduler, "step");
    c.gamma = 0.5;
    c.interval_steps = 1;
    run_steps("sgd + step schedule", &c, LT_F64, want, 1e-14);
}

/* ---- schedules ----------------------------------------------------------------- */

static lt_optimizer sched(const char *name, int interval_steps, int64_t total, int64_t per_epoch) {
    lt_optimizer o;
    memset(&o, 0, sizeof o);
    o.cfg = base_cfg("sgd");
    snprintf(o.cfg.scheduler, sizeof o.cfg.scheduler, "%s", name);
    o.sched = lt_optim_sched_kind(name);
    o.cfg.interval_steps = interval_steps;
    o.total_steps = total;
    o.steps_per_epoch = per_epoch;
    return o;
}

#define LR_IS(o, step, epoch, want)                                                      \
    do {                                                                                 \
        double got_ = lt_optim_lr_at(&(o), step, epoch);                                 \
        if (!near(got_, want, 1e-14))                                                    \
            printf("\n  lr_at(step %d, epoch %d): got %.17g, want %.17g", step, epoch, got_, \
                   (double)(want));                                                      \
        CU_ASSERT(near(got_, want, 1e-14));                                              \
    } while (0)

static void test_lr_none(void) {
    lt_optimizer o = sched("none", 0, 100, 10);
    LR_IS(o, 0, 0, 0.1);
    LR_IS(o, 57, 5, 0.1);
}

static void test_lr_step(void) {
    lt_optimizer o = sched("step", 0, 100, 10); /* every 2 epochs x 0.1 */
    o.cfg.step_size = 2;
    LR_IS(o, 0, 0, 0.1);
    LR_IS(o, 19, 1, 0.1);
    LR_IS(o, 20, 2, 0.1 * 0.1);
    LR_IS(o, 39, 3, 0.1 * 0.1);
    LR_IS(o, 40, 4, 0.1 * 0.1 * 0.1);
    o.cfg.interval_steps = 1; /* now counted in optimizer steps */
    LR_IS(o, 1, 4, 0.1);
    LR_IS(o, 2, 0, 0.1 * 0.1);
    LR_IS(o, 5, 0, 0.1 * 0.1 * 0.1);
}

static void test_lr_cosine(void) {
    /* min + (lr - min) (1 + cos(pi t / T)) / 2, floor after T */
    lt_optimizer o = sched("cosine", 1, 10, 5);
    o.cfg.min_lr = 0.001;
    LR_IS(o, 0, 0, 0.1);
    LR_IS(o, 5, 1, 0.001 + 0.099 * 0.5);             /* cos(pi/2) = 0 */
    LR_IS(o, 10, 2, 0.001);
    LR_IS(o, 15, 3, 0.001);
    LR_IS(o, 2, 0, 0.001 + 0.099 * 0.5 * (1 + cos(M_PI * 0.2)));
    /* by epoch: T = 10 steps / 5 per epoch = 2 epochs */
    o.cfg.interval_steps = 0;
    LR_IS(o, 7, 1, 0.001 + 0.099 * 0.5);
    LR_IS(o, 9, 0, 0.1);
    LR_IS(o, 12, 2, 0.001);
    /* unknown length: the schedule holds the base rate */
    o.total_steps = 0;
    LR_IS(o, 3, 1, 0.1);
}

static void test_lr_warmup(void) {
    /* linear warm-up over 4 steps: lr (step + 1) / 4, then the schedule */
    lt_optimizer o = sched("none", 1, 100, 10);
    o.cfg.warmup_steps = 4;
    LR_IS(o, 0, 0, 0.025);
    LR_IS(o, 1, 0, 0.05);
    LR_IS(o, 3, 0, 0.1);
    LR_IS(o, 4, 0, 0.1);
    LR_IS(o, 50, 5, 0.1);
    o = sched("cosine", 1, 10, 5); /* warm-up multiplies the cosine value */
    o.cfg.warmup_steps = 4;
    LR_IS(o, 1, 0, 0.5 * 0.1 * 0.5 * (1 + cos(M_PI * 0.1)));
    LR_IS(o, 5, 1, 0.1 * 0.5);
}

/* ---- clipping ----------------------------------------------------------------- */

static void clip_case(double max_norm, double want_scale) {
    double *g = NULL;
    CU_ASSERT_FATAL(g_acc->alloc(&g_ctx, 3 * sizeof *g, (void **)&g) == LT_OK);
    g[0] = 3, g[1] = -4, g[2] = 0; /* norm 5 */
    double norm = lt_clip_grad_norm(g, 3, LT_F64, max_norm, K, &g_ctx);
    CU_ASSERT_EQUAL_FATAL(g_acc->synchronize(&g_ctx), LT_OK);
    CU_ASSERT(near(norm, 5.0, 1e-15));
    bool ok = near(g[0], 3 * want_scale, 1e-15) && near(g[1], -4 * want_scale, 1e-15) && g[2] == 0;
    if (!ok) printf("\n  clip max_norm %g: got [%.17g, %.17g, %g], want scale %.17g", max_norm, g[0], g[1], g[2], want_scale);
    CU_ASSERT(ok);
    g_acc->free(&g_ctx, g);
}

static void test_clip(void) {
    clip_case(1.0, 1.0 / (5.0 + 1e-6));   /* coef = max_norm / (norm + 1e-6) */
    clip_case(2.5, 2.5 / (5.0 + 1e-6));
    clip_case(5.0, 5.0 / (5.0 + 1e-6));   /* coef just below 1: PyTorch scales too */
    clip_case(5.00001, 1.0);              /* coef >= 1: untouched */
    clip_case(100.0, 1.0);
}

/* Clipping by value against its definition, min(max(g, -v), v) element by
 * element, in both dtypes: values inside, on and beyond the bounds, signed
 * zero, infinities, and NaN (kept, as torch.clamp keeps it). */
static void clip_value_case(lt_dtype t) {
    const double in[] = {0.0, -0.0, 0.25, -0.25, 0.5, -0.5, 0.75, -3.0, 1e30, -INFINITY, INFINITY, NAN};
    enum { N = sizeof in / sizeof in[0] };
    size_t es = lt_dtype_size(t);
    void *g = NULL;
    CU_ASSERT_FATAL(g_acc->alloc(&g_ctx, N * es, &g) == LT_OK);
    for (int i = 0; i < N; i++) {
        if (t == LT_F32) ((float *)g)[i] = (float)in[i];
        else ((double *)g)[i] = in[i];
    }
    lt_clip_grad_value(g, N, t, 0.5, K, &g_ctx);
    CU_ASSERT_EQUAL_FATAL(g_acc->synchronize(&g_ctx), LT_OK);
    for (int i = 0; i < N; i++) {
        double got = t == LT_F32 ? ((float *)g)[i] : ((double *)g)[i];
        double want = isnan(in[i]) ? NAN : in[i] < -0.5 ? -0.5 : in[i] > 0.5 ? 0.5 : in[i];
        bool ok = isnan(want) ? isnan(got) : got == want;
        if (!ok) printf("\n  clip value 0.5 (%s): %g -> %g, want %g", lt_dtype_name(t), in[i], got, want);
        CU_ASSERT(ok);
    }
    g_acc->free(&g_ctx, g);
}

static void test_clip_value(void) {
    clip_value_case(LT_F32);
    clip_value_case(LT_F64);
}

/* ---- validation ------------------------------------------------------------------- */

static void expect_invalid(const char *what, const lt_optim_config *c, const char *key) {
    char err[512] = "";
    lt_status st = lt_optim_validate(c, err, sizeof err);
    bool ok = st == LT_ERR_INVALID && strstr(err, key) != NULL;
    printf("\n  %s -> %s", what, st == LT_OK ? "(accepted)" : err);
    if (!ok) printf("   [expected an error naming '%s']", key);
    CU_ASSERT(ok);
}

static void test_validate(void) {
    char err[512];
    lt_optim_config c = base_cfg("sgd");
    CU_ASSERT_EQUAL(lt_optim_validate(&c, err, sizeof err), LT_OK);
    c = base_cfg("AdamW"); /* names are case-insensitive */
    CU_ASSERT_EQUAL(lt_optim_validate(&c, err, sizeof err), LT_OK);

    c = base_cfg("adagrad");
    expect_invalid("name adagrad", &c, "optimizer.name");
    c = base_cfg("sgd"), c.lr = -1;
    expect_invalid("lr -1", &c, "optimizer.lr");
    c = base_cfg("sgd"), c.lr = NAN;
    expect_invalid("lr nan", &c, "optimizer.lr");
    c = base_cfg("sgd"), c.momentum = -0.5;
    expect_invalid("momentum -0.5", &c, "optimizer.momentum");
    c = base_cfg("sgd"), c.nesterov = 1;
    expect_invalid("nesterov without momentum", &c, "optimizer.nesterov");
    c = base_cfg("sgd"), c.nesterov = 1, c.momentum = 0.9, c.dampening = 0.1;
    expect_invalid("nesterov with dampening", &c, "optimizer.nesterov");
    c = base_cfg("sgd"), c.weight_decay = -0.1;
    expect_invalid("weight_decay -0.1", &c, "optimizer.weight_decay");
    c = base_cfg("adamw"), c.beta1 = 1.0;
    expect_invalid("beta1 1.0", &c, "optimizer.beta1");
    c = base_cfg("adamw"), c.beta2 = -0.1;
    expect_invalid("beta2 -0.1", &c, "beta2");
    c = base_cfg("adamw"), c.eps = -1e-8; /* torch.optim: "Invalid epsilon value" */
    expect_invalid("eps -1e-8", &c, "optimizer.eps");
    c = base_cfg("sgd"), snprintf(c.scheduler, sizeof c.scheduler, "linear");
    expect_invalid("scheduler linear", &c, "scheduler.name");
    c = base_cfg("sgd"), snprintf(c.scheduler, sizeof c.scheduler, "step"), c.step_size = 0;
    expect_invalid("step_size 0", &c, "scheduler.step_size");
    c = base_cfg("sgd"), snprintf(c.scheduler, sizeof c.scheduler, "step"), c.step_size = 2, c.gamma = -5;
    expect_invalid("gamma -5 flips the lr's sign", &c, "scheduler.gamma");
    c = base_cfg("sgd"), snprintf(c.scheduler, sizeof c.scheduler, "cosine"), c.min_lr = -0.1;
    expect_invalid("min_lr below 0", &c, "scheduler.min_lr");
    c = base_cfg("sgd"), snprintf(c.scheduler, sizeof c.scheduler, "cosine"), c.min_lr = 2 * c.lr;
    expect_invalid("min_lr above lr", &c, "scheduler.min_lr");
    c = base_cfg("sgd"), c.warmup_steps = -1;
    expect_invalid("warmup -1", &c, "scheduler.warmup_steps");
}

static void test_state_names(void) {
    lt_optimizer o;
    lt_optim_config c = base_cfg("sgd");
    c.momentum = 0.9;
    CU_ASSERT_EQUAL_FATAL(lt_optim_init(&o, &c, 3, LT_F64, g_acc, &g_ctx, K), LT_OK);
    CU_ASSERT_EQUAL(o.nstate, 1);
    CU_ASSERT_STRING_EQUAL(lt_optim_state_name(&o, 0), "momentum_buffer");
    lt_optim_free(&o, g_acc, &g_ctx);
    c = base_cfg("sgd"); /* plain sgd keeps no state */
    CU_ASSERT_EQUAL_FATAL(lt_optim_init(&o, &c, 3, LT_F64, g_acc, &g_ctx, K), LT_OK);
    CU_ASSERT_EQUAL(o.nstate, 0);
    lt_optim_free(&o, g_acc, &g_ctx);
    c = base_cfg("adamw");
    CU_ASSERT_EQUAL_FATAL(lt_optim_init(&o, &c, 3, LT_F64, g_acc, &g_ctx, K), LT_OK);
    CU_ASSERT_EQUAL(o.nstate, 2);
    CU_ASSERT_STRING_EQUAL(lt_optim_state_name(&o, 0), "exp_avg");
    CU_ASSERT_STRING_EQUAL(lt_optim_state_name(&o, 1), "exp_avg_sq");
    lt_optim_free(&o, g_acc, &g_ctx);
}

int main(void) {
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    CU_pSuite s = CU_add_suite("optim", suite_init, suite_clean);
    if (!s) return 1;
    CU_add_test(s, "sgd plain", test_sgd_plain);
    CU_add_test(s, "sgd momentum (buffer starts at grad)", test_sgd_momentum);
    CU_add_test(s, "sgd dampening", test_sgd_dampening);
    CU_add_test(s, "sgd nesterov", test_sgd_nesterov);
    CU_add_test(s, "sgd weight decay", test_sgd_weight_decay);
    CU_add_test(s, "adamw: bias correction, decoupled decay", test_adamw);
    CU_add_test(s, "adamw without decay", test_adamw_no_decay);
    CU_add_test(s, "optimizer step follows the schedule", test_step_uses_schedule);
    CU_add_test(s, "lr: none", test_lr_none);
    CU_add_test(s, "lr: step", test_lr_step);
    CU_add_test(s, "lr: cosine", test_lr_cosine);
    CU_add_test(s, "lr: warm-up", test_lr_warmup);
    CU_add_test(s, "clip_grad_norm", test_clip);
    CU_add_test(s, "clip_grad_value", test_clip_value);
    CU_add_test(s, "validate names the key", test_validate);
    CU_add_test(s, "optimizer state", test_state_names);
    int rc = lt_cunit_run();
    return rc;
}
