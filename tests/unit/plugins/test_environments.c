/* Cluster environment plugins (lightning, torchelastic, slurm, mpi), loaded
 * from the plugin dir exactly as the core loads them (through the registry, so
 * hooks a plugin leaves out take the core's defaults), driven by setenv. Every
 * case starts from an environment with all the variables any of them reads
 * removed, so the host's own SLURM or torchrun variables cannot leak in. */
#include <CUnit/Basic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cunit_run.h"
#include "config/config.h"
#include "common/ctx.h"
#include "registry/hook_defaults.h"
#include "lt/environment.h"
#include "registry/registry.h"

static const char *const ALL_VARS[] = {
    "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "NODE_RANK", "GROUP_RANK", "LOCAL_RANK",
    "LOCAL_WORLD_SIZE", "GROUP_WORLD_SIZE", "TORCHELASTIC_RUN_ID", "SLURM_NTASKS",
    "SLURM_JOB_NAME", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NODEID", "SLURM_NNODES",
    "SLURM_NODELIST", "SLURM_JOB_NODELIST", "SLURM_JOB_ID", "SLURM_NTASKS_PER_NODE",
    "SLURM_TASKS_PER_NODE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", "PMI_RANK", "PMI_SIZE",
    "MPI_LOCALRANKID", "MPI_LOCALNRANKS",
};

static void clear_env(void) {
    for (size_t i = 0; i < sizeof ALL_VARS / sizeof *ALL_VARS; i++) unsetenv(ALL_VARS[i]);
    lt_clear_error();
}

static void set(const char *name, const char *value) { setenv(name, value, 1); }

typedef struct {
    const char *name;
    const lt_environment_desc *d;
    lt_ctx ctx;
} env_plugin;

static env_plugin LIGHTNING = {.name = "lightning"}, TORCHELASTIC = {.name = "torchelastic"},
                  SLURM = {.name = "slurm"}, MPI = {.name = "mpi"};
static env_plugin *const PLUGINS[] = {&LIGHTNING, &TORCHELASTIC, &SLURM, &MPI};

static lt_registry *REGISTRY;

/* The resolved table, as the core would use it. */
static const lt_environment_desc *load(const char *name) {
    const lt_plugin_header *t = NULL;
    char err[1024];
    if (lt_registry_load(REGISTRY, LT_KIND_ENVIRONMENT, name, &t, err, sizeof err) != LT_OK) {
        fprintf(stderr, "load %s: %s\n", name, err);
        return NULL;
    }
    return (const lt_environment_desc *)t;
}

static int suite_init(void) {
    REGISTRY = lt_registry_new();
    if (!REGISTRY || lt_registry_add_dir(REGISTRY, LT_TEST_PLUGIN_DIR) != LT_OK) return -1;
    for (size_t i = 0; i < sizeof PLUGINS / sizeof *PLUGINS; i++) {
        env_plugin *p = PLUGINS[i];
        p->d = load(p->name);
        if (!p->d) return -1;
        lt_ctx_init(&p->ctx, LT_KIND_ENVIRONMENT, p->name, &p->d->hdr, NULL);
    }
    clear_env();
    return 0;
}

static int suite_clean(void) {
    lt_registry_free(REGISTRY);
    return 0;
}

/* Hook calls with the failing plugin's message printed, so a red test says why. */
#define CALL(p, hook, ...) call_report((p), #hook, (p)->d->hook(&(p)->ctx, __VA_ARGS__))
static lt_status call_report(env_plugin *p, const char *hook, lt_status s) {
    if (s != LT_OK) fprintf(stderr, "  [%s.%s -> %d: %s]\n", p->name, hook, s, lt_last_error(&p->ctx));
    return s;
}

#define EXPECT_INT(p, hook, want)                                                                \
    do {                                                                                         \
        int v_ = -12345;                                                                         \
        CU_ASSERT_EQUAL_FATAL(CALL(p, hook, &v_), LT_OK);                                        \
        if (v_ != (want)) fprintf(stderr, "  [%s.%s = %d, want %d]\n", (p)->name, #hook, v_, (want)); \
        CU_ASSERT_EQUAL(v_, (want));                                                             \
    } while (0)

#define EXPECT_BOOL(p, hook, want)                                                               \
    do {                                                                                         \
        bool v_ = !(want);                                                                       \
        CU_ASSERT_EQUAL_FATAL(CALL(p, hook, &v_), LT_OK);                                        \
        CU_ASSERT_EQUAL(v_, (want));                                                             \
    } while (0)

/* An error of LT_ERR_INVALID whose message contains `needle` (the variable). */
static void expect_message(env_plugin *p, const char *hook, lt_status s, const char *needle, int line) {
    const char *msg = lt_last_error(&p->ctx);
    bool ok = s == LT_ERR_INVALID && strstr(msg, needle);
    if (!ok)
        fprintf(stderr, "  [line %d: %s.%s -> %d '%s', want LT_ERR_INVALID naming '%s']\n", line,
                p->name, hook, s, msg, needle);
    CU_ASSERT(ok);
}
#define EXPECT_ERR(p, hook, needle)                                                              \
    do {                                                                                         \
        int v_ = -12345;                                                                         \
        lt_clear_error();                                                                        \
        expect_message((p), #hook, (p)->d->hook(&(p)->ctx, &v_), (needle), __LINE__);           \
        CU_ASSERT_EQUAL(v_, -12345); /* nothing written on failure */                            \
    } while (0)

static void expect_addr(env_plugin *p, const char *want, int line) {
    char buf[256] = "unset";
    lt_status s = CALL(p, main_address, buf, sizeof buf);
    if (s != LT_OK || strcmp(buf, want))
        fprintf(stderr, "  [line %d: %s.main_address = '%s', want '%s']\n", line, p->name, buf, want);
    CU_ASSERT(s == LT_OK && !strcmp(buf, want));
}
#define EXPECT_ADDR(p, want) expect_addr((p), (want), __LINE__)

static void expect_addr_err(env_plugin *p, const char *needle, int line) {
    char buf[256];
    lt_clear_error();
    expect_message(p, "main_address", p->d->main_address(&p->ctx, buf, sizeof buf), needle, line);
}
#define EXPECT_ADDR_ERR(p, needle) expect_addr_err((p), (needle), __LINE__)

/* ---- descriptors ---- */

static void test_descriptors(void) {
    for (size_t i = 0; i < sizeof PLUGINS / sizeof *PLUGINS; i++) {
        const lt_environment_desc *d = PLUGINS[i]->d;
        CU_ASSERT_EQUAL(d->hdr.magic, LT_PLUGIN_MAGIC);
        CU_ASSERT_EQUAL(d->hdr.abi_major, LT_ABI_MAJOR);
        CU_ASSERT_EQUAL(d->hdr.struct_size, sizeof(lt_environment_desc));
        CU_ASSERT_PTR_NULL(d->hdr.base);
        CU_ASSERT_STRING_EQUAL(d->hdr.version, "1.0.0");
        CU_ASSERT_PTR_NOT_NULL(d->hdr.description);
        CU_ASSERT(d->score && d->creates_processes_externally && d->main_address && d->main_port &&
                  d->world_size && d->global_rank && d->local_rank && d->node_rank &&
                  d->local_world_size);
    }
    /* lightning has no local world size of its own: the core's default stands in. */
    CU_ASSERT(LIGHTNING.d->local_world_size == lt_default_env_local_world_size);
    CU_ASSERT(TORCHELASTIC.d->local_world_size != lt_default_env_local_world_size);
    CU_ASSERT(SLURM.d->local_world_size != lt_default_env_local_world_size);
    CU_ASSERT(MPI.d->local_world_size != lt_default_env_local_world_size);
}

/* With nothing set only the fallback claims the process. */
static void test_scores_without_vars(void) {
    clear_env();
    EXPECT_INT(&LIGHTNING, score, 1);
    EXPECT_INT(&TORCHELASTIC, score, 0);
    EXPECT_INT(&SLURM, score, 0);
    EXPECT_INT(&MPI, score, 0);
}

/* The innermost launcher outranks the ones around it, all outrank the fallback. */
static void test_score_order(void) {
    clear_env();
    set("SLURM_NTASKS", "2");
    set("OMPI_COMM_WORLD_SIZE", "2");
    set("TORCHELASTIC_RUN_ID", "job");
    int te, sl, mp, li;
    CU_ASSERT_EQUAL_FATAL(CALL(&TORCHELASTIC, score, &te), LT_OK);
    CU_ASSERT_EQUAL_FATAL(CALL(&SLURM, score, &sl), LT_OK);
    CU_ASSERT_EQUAL_FATAL(CALL(&MPI, score, &mp), LT_OK);
    CU_ASSERT_EQUAL_FATAL(CALL(&LIGHTNING, score, &li), LT_OK);
    CU_ASSERT(te > sl && sl > mp && mp > li && li == 1);
}

/* ---- lightning ---- */

static void test_lightning_defaults(void) {
    clear_env();
    EXPECT_BOOL(&LIGHTNING, creates_processes_externally, false);
    EXPECT_ADDR(&LIGHTNING, "127.0.0.1");
    EXPECT_INT(&LIGHTNING, world_size, 1);
    EXPECT_INT(&LIGHTNING, global_rank, 0);
    EXPECT_INT(&LIGHTNING, local_rank, 0);
    EXPECT_INT(&LIGHTNING, node_rank, 0);
    EXPECT_INT(&LIGHTNING, local_world_size, 1);
    /* No MASTER_PORT: a free port, picked once and kept. */
    int a = 0, b = 0;
    CU_ASSERT_EQUAL_FATAL(CALL(&LIGHTNING, main_port, &a), LT_OK);
    CU_ASSERT_EQUAL_FATAL(CALL(&LIGHTNING, main_port, &b), LT_OK);
    CU_ASSERT(a > 0 && a <= 65535);
    CU_ASSERT_EQUAL(a, b);
}

static void test_lightning_vars(void) {
    clear_env();
    set("MASTER_ADDR", "10.1.2.3");
    set("MASTER_PORT", "29501");
    set("WORLD_SIZE", "8");
    set("RANK", "5");
    set("NODE_RANK", "1");
    set("LOCAL_RANK", "1");
    EXPECT_INT(&LIGHTNING, score, 1);
    EXPECT_BOOL(&LIGHTNING, creates_processes_externally, true);
    EXPECT_ADDR(&LIGHTNING, "10.1.2.3");
    EXPECT_INT(&LIGHTNING, main_port, 29501);
    EXPECT_INT(&LIGHTNING, world_size, 8);
    EXPECT_INT(&LIGHTNING, global_rank, 5);
    EXPECT_INT(&LIGHTNING, local_rank, 1);
    EXPECT_INT(&LIGHTNING, node_rank, 1);
    /* The core's default without a config: one node, all of the world local. */
    EXPECT_INT(&LIGHTNING, local_world_size, 8);
    /* GROUP_RANK stands in for NODE_RANK, which wins when both are set. */
    set("GROUP_RANK", "3");
    EXPECT_INT(&LIGHTNING, node_rank, 1);
    unsetenv("NODE_RANK");
    EXPECT_INT(&LIGHTNING, node_rank, 3);
    /* LOCAL_WORLD_SIZE is torchrun's (see torchelastic); lightning leaves the
     * count to the core, which divides by trainer.num_nodes. */
    set("LOCAL_WORLD_SIZE", "4");
    EXPECT_INT(&LIGHTNING, local_world_size, 8);
}

static void test_lightning_invalid(void) {
    clear_env();
    set("RANK", "x");
    EXPECT_ERR(&LIGHTNING, global_rank, "RANK='x' is not an integer; the launcher should set RANK");
    set("RANK", "-1");
    EXPECT_ERR(&LIGHTNING, global_rank, "RANK='-1' is negative");
    set("RANK", "");
    EXPECT_ERR(&LIGHTNING, global_rank, "RANK=''");
    set("RANK", " 1");
    EXPECT_ERR(&LIGHTNING, global_rank, "RANK=' 1'");
    set("RANK", "99999999999999999999999");
    EXPECT_ERR(&LIGHTNING, global_rank, "RANK='9999");
    set("RANK", "1"); /* world defaults to 1 */
    EXPECT_ERR(&LIGHTNING, global_rank, "RANK=1 is not below WORLD_SIZE=1");
    set("WORLD_SIZE", "4");
    set("RANK", "4");
    EXPECT_ERR(&LIGHTNING, global_rank, "RANK=4 is not below WORLD_SIZE=4");
    set("WORLD_SIZE", "0");
    EXPECT_ERR(&LIGHTNING, world_size, "WORLD_SIZE='0'");
    set("WORLD_SIZE", "4");
    set("LOCAL_RANK", "4");
    EXPECT_ERR(&LIGHTNING, local_rank, "LOCAL_RANK=4 is not below WORLD_SIZE=4");
    set("LOCAL_RANK", "1x");
    EXPECT_ERR(&LIGHTNING, local_rank, "LOCAL_RANK='1x'");
    set("NODE_RANK", "-3");
    EXPECT_ERR(&LIGHTNING, node_rank, "NODE_RANK='-3'");
    unsetenv("NODE_RANK");
    set("GROUP_RANK", "g");
    EXPECT_ERR(&LIGHTNING, node_rank, "GROUP_RANK='g'");
    set("MASTER_PORT", "70000");
    EXPECT_ERR(&LIGHTNING, main_port, "MASTER_PORT='70000' is out of range (1..65535)");
    set("MASTER_PORT", "0");
    EXPECT_ERR(&LIGHTNING, main_port, "MASTER_PORT='0'");
    set("MASTER_PORT", "http");
    EXPECT_ERR(&LIGHTNING, main_port, "MASTER_PORT='http'");
    set("MASTER_ADDR", "");
    EXPECT_ADDR_ERR(&LIGHTNING, "MASTER_ADDR is empty");
    set("MASTER_ADDR", "host 1");
    EXPECT_ADDR_ERR(&LIGHTNING, "MASTER_ADDR='host 1'");
    /* An address longer than the caller's buffer is refused, not cut. */
    set("MASTER_ADDR", "a-rather-long-host-name.example.org");
    char small[8];
    CU_ASSERT_EQUAL(LIGHTNING.d->main_address(&LIGHTNING.ctx, small, sizeof small), LT_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(lt_last_error(&LIGHTNING.ctx), "MASTER_ADDR"));
}

/* ---- the core's default local_world_size (lightning leaves the hook out) ---- */

/* A lightning context reading `cfg` (NULL: none). */
static env_plugin lightning_with(const lt_config *cfg) {
    env_plugin p = {.name = "lightning", .d = LIGHTNING.d};
    lt_ctx_init(&p.ctx, LT_KIND_ENVIRONMENT, p.name, &p.d->hdr, cfg);
    return p;
}

static lt_config *config_with_nodes(const char *nodes) {
    char err[256];
    lt_config *cfg = lt_config_new();
    CU_ASSERT_PTR_NOT_NULL_FATAL(cfg);
    CU_ASSERT_EQUAL_FATAL(lt_config_set(cfg, "trainer", "num_nodes", nodes, LT_SRC_FLAG,
                                        "--num-nodes", err, sizeof err), LT_OK);
    return cfg;
}

/* world_size / trainer.num_nodes, as lt/environment.h promises. */
static void test_default_local_world_size(void) {
    lt_config *cfg = config_with_nodes("2");
    env_plugin p = lightning_with(cfg);
    clear_env();
    set("WORLD_SIZE", "8");
    EXPECT_INT(&p, local_world_size, 4);
    set("LOCAL_RANK", "3");
    EXPECT_INT(&p, local_rank, 3);
    lt_config_free(cfg);
    /* A config that leaves num_nodes at its default, and no config: one node. */
    cfg = lt_config_new();
    CU_ASSERT_PTR_NOT_NULL_FATAL(cfg);
    p = lightning_with(cfg);
    EXPECT_INT(&p, local_world_size, 8);
    lt_config_free(cfg);
    p = lightning_with(NULL);
    EXPECT_INT(&p, local_world_size, 8);
    cfg = config_with_nodes("8");
    p = lightning_with(cfg);
    EXPECT_INT(&p, local_world_size, 1);
    lt_config_free(cfg);
}

static void test_default_local_world_size_invalid(void) {
    lt_config *cfg = config_with_nodes("2");
    env_plugin p = lightning_with(cfg);
    clear_env();
    set("WORLD_SIZE", "5");
    EXPECT_ERR(&p, local_world_size,
               "world size 5 is not a multiple of trainer.num_nodes = 2 (--num-nodes)");
    EXPECT_ERR(&p, local_world_size, "set trainer.num_nodes"); /* and says what to do */
    /* The environment's own error comes through unchanged. */
    set("WORLD_SIZE", "x");
    EXPECT_ERR(&p, local_world_size, "WORLD_SIZE='x' is not an integer");
    lt_config_free(cfg);
    /* A config that was never validated may hold anything. */
    set("WORLD_SIZE", "4");
    cfg = config_with_nodes("two");
    p = lightning_with(cfg);
    EXPECT_ERR(&p, local_world_size, "trainer.num_nodes = 'two' (--num-nodes) is not an integer");
    lt_config_free(cfg);
    cfg = config_with_nodes("0");
    p = lightning_with(cfg);
    EXPECT_ERR(&p, local_world_size, "trainer.num_nodes = 0 (--num-nodes) is out of range (1..");
    lt_config_free(cfg);
    /* A context without its table is the caller's mistake, not the user's. */
    lt_ctx bare;
    lt_ctx_init(&bare, LT_KIND_ENVIRONMENT, "lightning", NULL, NULL);
    int v = -1;
    CU_ASSERT_EQUAL(lt_default_env_local_world_size(&bare, &v), LT_ERR_STATE);
    CU_ASSERT_EQUAL(v, -1);
}

/* ---- torchelastic ---- */

static void set_torchrun(void) {
    clear_env();
    set("TORCHELASTIC_RUN_ID", "abc");
    set("MASTER_ADDR", "node0");
    set("MASTER_PORT", "29400");
    set("WORLD_SIZE", "4");
    set("RANK", "3");
    set("LOCAL_RANK", "1");
    set("GROUP_RANK", "1");
    set("LOCAL_WORLD_SIZE", "2");
}

static void test_torchelastic_vars(void) {
    set_torchrun();
    EXPECT_INT(&TORCHELASTIC, score, 30);
    EXPECT_BOOL(&TORCHELASTIC, creates_processes_externally, true);
    EXPECT_ADDR(&TORCHELASTIC, "node0");
    EXPECT_INT(&TORCHELASTIC, main_port, 29401); /* torchrun's store holds MASTER_PORT itself */
    EXPECT_INT(&TORCHELASTIC, world_size, 4);
    EXPECT_INT(&TORCHELASTIC, global_rank, 3);
    EXPECT_INT(&TORCHELASTIC, local_rank, 1);
    EXPECT_INT(&TORCHELASTIC, node_rank, 1);
    EXPECT_INT(&TORCHELASTIC, local_world_size, 2);
    /* GROUP_RANK defaults to 0; LOCAL_WORLD_SIZE to world / GROUP_WORLD_SIZE. */
    unsetenv("GROUP_RANK");
    EXPECT_INT(&TORCHELASTIC, node_rank, 0);
    unsetenv("LOCAL_WORLD_SIZE");
    EXPECT_INT(&TORCHELASTIC, local_world_size, 4);
    set("GROUP_WORLD_SIZE", "2");
    EXPECT_INT(&TORCHELASTIC, local_world_size, 2);
}

static void test_torchelastic_invalid(void) {
    set_torchrun();
    unsetenv("RANK");
    EXPECT_ERR(&TORCHELASTIC, global_rank, "RANK is not set");
    set("RANK", "abc");
    EXPECT_ERR(&TORCHELASTIC, global_rank, "RANK='abc' is not an integer");
    set("RANK", "4");
    EXPECT_ERR(&TORCHELASTIC, global_rank, "RANK=4 is not below WORLD_SIZE=4");
    unsetenv("WORLD_SIZE");
    EXPECT_ERR(&TORCHELASTIC, world_size, "WORLD_SIZE is not set");
    set("WORLD_SIZE", "4");
    unsetenv("LOCAL_RANK");
    EXPECT_ERR(&TORCHELASTIC, local_rank, "LOCAL_RANK is not set");
    set("LOCAL_RANK", "2");
    EXPECT_ERR(&TORCHELASTIC, local_rank, "LOCAL_RANK=2 is not below LOCAL_WORLD_SIZE=2");
    set("GROUP_RANK", "2");
    set("GROUP_WORLD_SIZE", "2");
    EXPECT_ERR(&TORCHELASTIC, node_rank, "GROUP_RANK=2 is not below GROUP_WORLD_SIZE=2");
    unsetenv("LOCAL_WORLD_SIZE");
    set("GROUP_WORLD_SIZE", "3");
    EXPECT_ERR(&TORCHELASTIC, local_world_size, "GROUP_WORLD_SIZE=3");
    unsetenv("MASTER_ADDR");
    EXPECT_ADDR_ERR(&TORCHELASTIC, "MASTER_ADDR is not set");
    unsetenv("MASTER_PORT");
    EXPECT_ERR(&TORCHELASTIC, main_port, "MASTER_PORT is not set");
    set("MASTER_PORT", "-5");
    EXPECT_ERR(&TORCHELASTIC, main_port, "MASTER_PORT='-5'");
}

/* ---- slurm ---- */

static void set_srun(void) {
    clear_env();
    set("SLURM_NTASKS", "8");
    set("SLURM_PROCID", "5");
    set("SLURM_LOCALID", "1");
    set("SLURM_NODEID", "1");
    set("SLURM_NNODES", "2");
    set("SLURM_JOB_NAME", "train");
}

static void test_slurm_score(void) {
    clear_env();
    set("SLURM_NTASKS", "4");
    EXPECT_INT(&SLURM, score, 20);
    set("SLURM_JOB_NAME", "train");
    EXPECT_INT(&SLURM, score, 20);
    set("SLURM_JOB_NAME", "bash");
    EXPECT_INT(&SLURM, score, 0);
    set("SLURM_JOB_NAME", "interactive");
    EXPECT_INT(&SLURM, score, 0);
    unsetenv("SLURM_NTASKS");
    set("SLURM_JOB_NAME", "train");
    EXPECT_INT(&SLURM, score, 0);
}

static void test_slurm_vars(void) {
    set_srun();
    EXPECT_BOOL(&SLURM, creates_processes_externally, true);
    EXPECT_INT(&SLURM, world_size, 8);
    EXPECT_INT(&SLURM, global_rank, 5);
    EXPECT_INT(&SLURM, local_rank, 1);
    EXPECT_INT(&SLURM, node_rank, 1);
    EXPECT_INT(&SLURM, local_world_size, 4);
    EXPECT_ADDR(&SLURM, "127.0.0.1"); /* no node list at all */
}

static void test_slurm_hostlist(void) {
    static const char *const cases[][2] = {
        {"node[001-004,007],gpu5", "node001"},
        {"a,b", "a"},
        {"prefix[3]", "prefix3"},
        {"rack[1-2]-n[5-6]", "rack1-n5"},
        {"single", "single"},
        {"gpu[07,02-03]", "gpu07"},
        {"n[9-10]", "n9"},
        {"x[1],y[2-3]", "x1"},
        {"host-1.example.org", "host-1.example.org"},
    };
    set_srun();
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        set("SLURM_NODELIST", cases[i][0]);
        EXPECT_ADDR(&SLURM, cases[i][1]);
    }
    /* SLURM_JOB_NODELIST stands in for SLURM_NODELIST; MASTER_ADDR overrides both. */
    unsetenv("SLURM_NODELIST");
    set("SLURM_JOB_NODELIST", "cn[10-12]");
    EXPECT_ADDR(&SLURM, "cn10");
    set("SLURM_NODELIST", "sn[5-6]");
    EXPECT_ADDR(&SLURM, "sn5");
    set("MASTER_ADDR", "login1");
    EXPECT_ADDR(&SLURM, "login1");
}

static void test_slurm_hostlist_malformed(void) {
    static const char *const cases[][2] = {
        {"node[1-4", "'[' is never closed"},
        {"node1-4]", "']' without '['"},
        {"", "empty host name"},
        {"a,,b", "empty host name"},
        {"a,", "empty host name"},
        {"n[4-1]", "backwards"},
        {"n[a]", "expected a number"},
        {"n[1-]", "expected a number after '-'"},
        {"n[]", "expected a number"},
        {"n[1[2]]", "unexpected character"},
        {"n[1;2]", "unexpected character"},
        {"a b", "whitespace"},
        {"ok,bad[1", "never closed"}, /* a typo after the first host is caught too */
    };
    set_srun();
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        set("SLURM_NODELIST", cases[i][0]);
        EXPECT_ADDR_ERR(&SLURM, "SLURM_NODELIST");
        EXPECT_ADDR_ERR(&SLURM, cases[i][1]);
    }
    /* A host longer than the caller's buffer. */
    set("SLURM_NODELIST", "averyveryverylonghostname[1-2]");
    char small[8];
    CU_ASSERT_EQUAL(SLURM.d->main_address(&SLURM.ctx, small, sizeof small), LT_ERR_INVALID);
}

/* "[1-2],b" is a legal list whose first host is just "1": not an error. */
static void test_slurm_hostlist_bare_bracket(void) {
    set_srun();
    set("SLURM_NODELIST", "[1-2],b");
    EXPECT_ADDR(&SLURM, "1");
}

static void test_slurm_port(void) {
    set_srun();
    EXPECT_INT(&SLURM, main_port, 12910); /* no job id: Lightning's fixed port */
    set("SLURM_JOB_ID", "1234567");
    EXPECT_INT(&SLURM, main_port, 15000 + 4567);
    set("SLURM_JOB_ID", "42");
    EXPECT_INT(&SLURM, main_port, 15042);
    set("SLURM_JOB_ID", "10000");
    EXPECT_INT(&SLURM, main_port, 15000);
    set("MASTER_PORT", "23456");
    EXPECT_INT(&SLURM, main_port, 23456);
    set("MASTER_PORT", "99999");
    EXPECT_ERR(&SLURM, main_port, "MASTER_PORT='99999'");
    unsetenv("MASTER_PORT");
    set("SLURM_JOB_ID", "12_3");
    EXPECT_ERR(&SLURM, main_port, "SLURM_JOB_ID='12_3'");
}

static void test_slurm_tasks_per_node(void) {
    set_srun();
    set("SLURM_NTASKS_PER_NODE", "4");
    EXPECT_INT(&SLURM, local_world_size, 4);
    set("SLURM_NTASKS_PER_NODE", "4(x2)");
    EXPECT_INT(&SLURM, local_world_size, 4);
    set("SLURM_NTASKS_PER_NODE", "4(x1),2"); /* one value for all nodes: the first */
    EXPECT_INT(&SLURM, local_world_size, 4);
    unsetenv("SLURM_NTASKS_PER_NODE");
    set("SLURM_TASKS_PER_NODE", "3(x2),2");
    set("SLURM_NODEID", "1");
    EXPECT_INT(&SLURM, local_world_size, 3);
    set("SLURM_NNODES", "3");
    set("SLURM_NODEID", "2");
    EXPECT_INT(&SLURM, local_world_size, 2);
    set("SLURM_NTASKS_PER_NODE", "5"); /* the explicit option wins */
    EXPECT_INT(&SLURM, local_world_size, 5);
    /* Malformed lists name the variable. */
    static const char *const bad[] = {"4(x", "(x2)", "4(2)", "4,", "0", "4(x0)", "a", "4 ", "4(x2)x"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        set("SLURM_NTASKS_PER_NODE", bad[i]);
        EXPECT_ERR(&SLURM, local_world_size, "SLURM_NTASKS_PER_NODE='");
    }
    unsetenv("SLURM_NTASKS_PER_NODE");
    set("SLURM_TASKS_PER_NODE", "2(x2)");
    EXPECT_ERR(&SLURM, local_world_size, "SLURM_TASKS_PER_NODE='2(x2)' has no entry for SLURM_NODEID=2");
    set("SLURM_TASKS_PER_NODE", "2(x");
    EXPECT_ERR(&SLURM, local_world_size, "SLURM_TASKS_PER_NODE='2(x'");
    /* No per-node list: the tasks must spread evenly over the nodes. */
    set_srun();
    set("SLURM_NTASKS", "5");
    set("SLURM_PROCID", "0");
    EXPECT_ERR(&SLURM, local_world_size, "SLURM_NTASKS=5 is not a multiple of SLURM_NNODES=2");
}

static void test_slurm_invalid(void) {
    set_srun();
    set("SLURM_PROCID", "8");
    EXPECT_ERR(&SLURM, global_rank, "SLURM_PROCID=8 is not below SLURM_NTASKS=8");
    unsetenv("SLURM_PROCID");
    EXPECT_ERR(&SLURM, global_rank, "SLURM_PROCID is not set");
    set("SLURM_NTASKS", "x8");
    EXPECT_ERR(&SLURM, world_size, "SLURM_NTASKS='x8' is not an integer");
    set_srun();
    set("SLURM_LOCALID", "4");
    EXPECT_ERR(&SLURM, local_rank, "SLURM_LOCALID=4 is not below");
    set("SLURM_LOCALID", "-1");
    EXPECT_ERR(&SLURM, local_rank, "SLURM_LOCALID='-1' is negative");
    set("SLURM_NODEID", "2");
    EXPECT_ERR(&SLURM, node_rank, "SLURM_NODEID=2 is not below SLURM_NNODES=2");
    unsetenv("SLURM_NODEID");
    EXPECT_ERR(&SLURM, node_rank, "SLURM_NODEID is not set");
    set("SLURM_NNODES", "0");
    set("SLURM_NODEID", "0");
    EXPECT_ERR(&SLURM, node_rank, "SLURM_NNODES='0'");
}

/* ---- mpi ---- */

static void test_mpi_singleton(void) {
    clear_env();
    EXPECT_BOOL(&MPI, creates_processes_externally, true);
    EXPECT_INT(&MPI, world_size, 1);
    EXPECT_INT(&MPI, global_rank, 0);
    EXPECT_INT(&MPI, local_rank, 0);
    EXPECT_INT(&MPI, local_world_size, 1);
    EXPECT_INT(&MPI, node_rank, 0);
    EXPECT_ADDR(&MPI, "127.0.0.1");
    EXPECT_INT(&MPI, main_port, 29500);
}

static void set_open_mpi(void) {
    clear_env();
    set("OMPI_COMM_WORLD_RANK", "5");
    set("OMPI_COMM_WORLD_SIZE", "8");
    set("OMPI_COMM_WORLD_LOCAL_RANK", "1");
    set("OMPI_COMM_WORLD_LOCAL_SIZE", "4");
}

static void test_mpi_open_mpi(void) {
    set_open_mpi();
    EXPECT_INT(&MPI, score, 15);
    EXPECT_INT(&MPI, world_size, 8);
    EXPECT_INT(&MPI, global_rank, 5);
    EXPECT_INT(&MPI, local_rank, 1);
    EXPECT_INT(&MPI, local_world_size, 4);
    EXPECT_INT(&MPI, node_rank, 1);
    /* Across nodes the address must come from MASTER_ADDR. */
    EXPECT_ADDR_ERR(&MPI, "MASTER_ADDR is not set");
    set("MASTER_ADDR", "head");
    set("MASTER_PORT", "1234");
    EXPECT_ADDR(&MPI, "head");
    EXPECT_INT(&MPI, main_port, 1234);
    /* Open MPI's variables win over PMI_* when both are present. */
    set("PMI_RANK", "0");
    set("PMI_SIZE", "2");
    EXPECT_INT(&MPI, global_rank, 5);
    /* On one node 127.0.0.1 is right. */
    set_open_mpi();
    set("OMPI_COMM_WORLD_LOCAL_SIZE", "8");
    EXPECT_ADDR(&MPI, "127.0.0.1");
}

static void test_mpi_pmi(void) {
    clear_env();
    set("PMI_RANK", "3");
    set("PMI_SIZE", "4");
    EXPECT_INT(&MPI, score, 15);
    EXPECT_INT(&MPI, world_size, 4);
    EXPECT_INT(&MPI, global_rank, 3);
    EXPECT_INT(&MPI, local_rank, 0); /* no MPI_LOCALRANKID: alone on its node */
    EXPECT_INT(&MPI, local_world_size, 1);
    EXPECT_INT(&MPI, node_rank, 3);
    set("MPI_LOCALRANKID", "1");
    set("MPI_LOCALNRANKS", "2");
    EXPECT_INT(&MPI, local_rank, 1);
    EXPECT_INT(&MPI, local_world_size, 2);
    EXPECT_INT(&MPI, node_rank, 1);
}

static void test_mpi_invalid(void) {
    set_open_mpi();
    set("OMPI_COMM_WORLD_RANK", "8");
    EXPECT_ERR(&MPI, global_rank, "OMPI_COMM_WORLD_RANK=8 is not below OMPI_COMM_WORLD_SIZE=8");
    set("OMPI_COMM_WORLD_SIZE", "abc");
    EXPECT_ERR(&MPI, world_size, "OMPI_COMM_WORLD_SIZE='abc' is not an integer");
    set_open_mpi();
    set("OMPI_COMM_WORLD_LOCAL_RANK", "4");
    EXPECT_ERR(&MPI, local_rank, "OMPI_COMM_WORLD_LOCAL_RANK=4 is not below OMPI_COMM_WORLD_LOCAL_SIZE=4");
    set_open_mpi();
    unsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    EXPECT_ERR(&MPI, node_rank, "OMPI_COMM_WORLD_LOCAL_SIZE is not set");
    set_open_mpi();
    set("OMPI_COMM_WORLD_LOCAL_SIZE", "9");
    EXPECT_ERR(&MPI, local_world_size, "OMPI_COMM_WORLD_LOCAL_SIZE='9' is out of range (1..8)");
    clear_env();
    set("PMI_RANK", "-2");
    set("PMI_SIZE", "4");
    EXPECT_ERR(&MPI, global_rank, "PMI_RANK='-2' is negative");
    unsetenv("PMI_SIZE");
    set("PMI_RANK", "1");
    EXPECT_ERR(&MPI, global_rank, "PMI_SIZE is not set");
    set("PMI_SIZE", "4");
    set("MPI_LOCALRANKID", "1");
    EXPECT_ERR(&MPI, local_rank, "MPI_LOCALNRANKS is not set");
    set("MPI_LOCALNRANKS", "2");
    set("MASTER_PORT", "65536");
    EXPECT_ERR(&MPI, main_port, "MASTER_PORT='65536'");
}

int main(void) {
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    CU_pSuite s = CU_add_suite("environments", suite_init, suite_clean);
    struct {
        const char *name;
        CU_TestFunc fn;
    } tests[] = {
        {"descriptors", test_descriptors},
        {"scores without vars", test_scores_without_vars},
        {"score order", test_score_order},
        {"lightning defaults", test_lightning_defaults},
        {"lightning vars", test_lightning_vars},
        {"lightning invalid", test_lightning_invalid},
        {"default local_world_size", test_default_local_world_size},
        {"default local_world_size invalid", test_default_local_world_size_invalid},
        {"torchelastic vars", test_torchelastic_vars},
        {"torchelastic invalid", test_torchelastic_invalid},
        {"slurm score", test_slurm_score},
        {"slurm vars", test_slurm_vars},
        {"slurm hostlist", test_slurm_hostlist},
        {"slurm hostlist malformed", test_slurm_hostlist_malformed},
        {"slurm hostlist bare bracket", test_slurm_hostlist_bare_bracket},
        {"slurm port", test_slurm_port},
        {"slurm tasks per node", test_slurm_tasks_per_node},
        {"slurm invalid", test_slurm_invalid},
        {"mpi singleton", test_mpi_singleton},
        {"mpi open mpi", test_mpi_open_mpi},
        {"mpi pmi", test_mpi_pmi},
        {"mpi invalid", test_mpi_invalid},
    };
    for (size_t i = 0; s && i < sizeof tests / sizeof *tests; i++)
        if (!CU_add_test(s, tests[i].name, tests[i].fn)) s = NULL;
    if (!s) {
        CU_cleanup_registry();
        return 1;
    }
    int rc = lt_cunit_run();
    return rc;
}
