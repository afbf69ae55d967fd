/* The public ABI's layout, pinned. Every public struct in sdk/include/lt has
 * its size and the offset of every field asserted here at compile time, with
 * the values of x86_64 (LP64, System V) as they stand at ABI 1.0.
 *
 * Changing a layout without bumping the ABI fails this build. If you change
 * one on purpose: appending fields or hooks at the end of a struct is a new
 * minor (bump LT_ABI_MINOR; the loader adapts plugins of older minors);
 * anything else (reordering, resizing, removing, inserting) is a new major
 * (bump LT_ABI_MAJOR; every plugin must be rebuilt). Then update the numbers
 * below. A struct added to the public headers gets its lines here too. */
#include <CUnit/Basic.h>
#include <string.h>
#include "cunit_run.h"
#include "lt/lt.h"
#include "lt/trainer.h"

#define SIZE(type, n) \
    _Static_assert(sizeof(type) == (n), "sizeof(" #type ") changed: bump the ABI (top of file)")
#define OFF(type, field, n)                                                                \
    _Static_assert(offsetof(type, field) == (n),                                           \
                   "offsetof(" #type ", " #field ") changed: bump the ABI (top of file)")

_Static_assert(LT_ABI_MAJOR == 1 && LT_ABI_MINOR == 9,
               "the ABI version changed: update the layouts below to the new version's");

#if defined(__x86_64__)
/* lt_param_spec */
SIZE(lt_param_spec, 32);
OFF(lt_param_spec, name, 0);
OFF(lt_param_spec, type, 8);
OFF(lt_param_spec, def, 16);
OFF(lt_param_spec, help, 24);

/* lt_plugin_header */
SIZE(lt_plugin_header, 64);
OFF(lt_plugin_header, magic, 0);
OFF(lt_plugin_header, abi_major, 4);
OFF(lt_plugin_header, abi_minor, 6);
OFF(lt_plugin_header, struct_size, 8);
OFF(lt_plugin_header, kind, 12);
OFF(lt_plugin_header, name, 16);
OFF(lt_plugin_header, base, 24);
OFF(lt_plugin_header, version, 32);
OFF(lt_plugin_header, description, 40);
OFF(lt_plugin_header, params, 48);
OFF(lt_plugin_header, super, 56);

/* lt_accelerator_desc */
SIZE(lt_accelerator_desc, 192);
OFF(lt_accelerator_desc, hdr, 0);
OFF(lt_accelerator_desc, is_available, 64);
OFF(lt_accelerator_desc, device_count, 72);
OFF(lt_accelerator_desc, setup, 80);
OFF(lt_accelerator_desc, teardown, 88);
OFF(lt_accelerator_desc, alloc, 96);
OFF(lt_accelerator_desc, free, 104);
OFF(lt_accelerator_desc, alloc_host, 112);
OFF(lt_accelerator_desc, free_host, 120);
OFF(lt_accelerator_desc, copy, 128);
OFF(lt_accelerator_desc, synchronize, 136);
OFF(lt_accelerator_desc, get_kernels, 144);
OFF(lt_accelerator_desc, memory_stats, 152);
OFF(lt_accelerator_desc, device_in_use, 160);
OFF(lt_accelerator_desc, device_name, 168);
OFF(lt_accelerator_desc, memory_is_host, 176); /* 1.1 */
OFF(lt_accelerator_desc, check_params, 184);   /* 1.9 */

/* lt_backend_desc */
SIZE(lt_backend_desc, 200);
OFF(lt_backend_desc, hdr, 0);
OFF(lt_backend_desc, create, 64);
OFF(lt_backend_desc, destroy, 72);
OFF(lt_backend_desc, allreduce, 80);
OFF(lt_backend_desc, broadcast, 88);
OFF(lt_backend_desc, allgather, 96);
OFF(lt_backend_desc, reduce_scatter, 104);
OFF(lt_backend_desc, send, 112);
OFF(lt_backend_desc, recv, 120);
OFF(lt_backend_desc, barrier, 128);
OFF(lt_backend_desc, wait, 136);
OFF(lt_backend_desc, free_work, 144);
OFF(lt_backend_desc, abort, 152);
OFF(lt_backend_desc, supports, 160);
OFF(lt_backend_desc, supports_memory, 168);
OFF(lt_backend_desc, mem_alloc, 176);
OFF(lt_backend_desc, mem_free, 184);
OFF(lt_backend_desc, check_params, 192); /* 1.9 */

/* lt_environment_desc */
SIZE(lt_environment_desc, 144);
OFF(lt_environment_desc, hdr, 0);
OFF(lt_environment_desc, score, 64);
OFF(lt_environment_desc, creates_processes_externally, 72);
OFF(lt_environment_desc, main_address, 80);
OFF(lt_environment_desc, main_port, 88);
OFF(lt_environment_desc, world_size, 96);
OFF(lt_environment_desc, global_rank, 104);
OFF(lt_environment_desc, local_rank, 112);
OFF(lt_environment_desc, node_rank, 120);
OFF(lt_environment_desc, local_world_size, 128);
OFF(lt_environment_desc, check_params, 136); /* 1.9 */

/* lt_strategy_desc */
SIZE(lt_strategy_desc, 232);
OFF(lt_strategy_desc, hdr, 0);
OFF(lt_strategy_desc, launch_kind, 64);
OFF(lt_strategy_desc, batch_multiplier, 72);
OFF(lt_strategy_desc, sampler_shard, 80);
OFF(lt_strategy_desc, setup_environment, 88);
OFF(lt_strategy_desc, init_dist_connection, 96);
OFF(lt_strategy_desc, configure_ddp, 104);
OFF(lt_strategy_desc, on_train_start, 112);
OFF(lt_strategy_desc, on_train_end, 120);
OFF(lt_strategy_desc, training_step, 128);
OFF(lt_strategy_desc, on_backward_start, 136);
OFF(lt_strategy_desc, on_grad_ready, 144);
OFF(lt_strategy_desc, before_optimizer_step, 152);
OFF(lt_strategy_desc, after_optimizer_step, 160);
OFF(lt_strategy_desc, reduce, 168);
OFF(lt_strategy_desc, all_gather, 176);
OFF(lt_strategy_desc, broadcast, 184);
OFF(lt_strategy_desc, barrier, 192);
OFF(lt_strategy_desc, teardown, 200);
OFF(lt_strategy_desc, eval_step, 208); /* 1.3 */
OFF(lt_strategy_desc, optimizer_step, 216); /* 1.5 */
OFF(lt_strategy_desc, check_params, 224);   /* 1.9 */

/* lt_precision_desc */
SIZE(lt_precision_desc, 136);
OFF(lt_precision_desc, hdr, 0);
OFF(lt_precision_desc, dtypes, 64);
OFF(lt_precision_desc, setup, 72);
OFF(lt_precision_desc, scale_loss, 80);
OFF(lt_precision_desc, unscale_and_check, 88);
OFF(lt_precision_desc, update, 96);
OFF(lt_precision_desc, save_state, 104);
OFF(lt_precision_desc, load_state, 112);
OFF(lt_precision_desc, teardown, 120); /* 1.4 */
OFF(lt_precision_desc, check_params, 128); /* 1.9 */

/* lt_module_desc */
SIZE(lt_module_desc, 152);
OFF(lt_module_desc, hdr, 0);
OFF(lt_module_desc, init, 64);
OFF(lt_module_desc, training_step, 72);
OFF(lt_module_desc, validation_step, 80);
OFF(lt_module_desc, test_step, 88);
OFF(lt_module_desc, training_step_end, 96);
OFF(lt_module_desc, configure_optimizers, 104);
OFF(lt_module_desc, setup_data, 112);
OFF(lt_module_desc, on_train_epoch_start, 120);
OFF(lt_module_desc, on_train_epoch_end, 128);
OFF(lt_module_desc, on_validation_epoch_end, 136);
OFF(lt_module_desc, teardown, 144);

/* lt_kernels */
SIZE(lt_kernels, 240);
OFF(lt_kernels, clamp, 200);        /* 1.2 */
OFF(lt_kernels, quantize_u8, 208);  /* 1.4 */
OFF(lt_kernels, dequantize_u8, 216);
OFF(lt_kernels, qadam_step, 224); /* 1.5 */
OFF(lt_kernels, sgd_step_mixed, 232); /* 1.8 */
OFF(lt_kernels, struct_size, 0);
OFF(lt_kernels, gemm, 8);
OFF(lt_kernels, fill, 16);
OFF(lt_kernels, axpby, 24);
OFF(lt_kernels, add_bias, 32);
OFF(lt_kernels, sum_rows, 40);
OFF(lt_kernels, act_fwd, 48);
OFF(lt_kernels, act_bwd, 56);
OFF(lt_kernels, dropout_fwd, 64);
OFF(lt_kernels, dropout_bwd, 72);
OFF(lt_kernels, xent_fwd, 80);
OFF(lt_kernels, xent_bwd, 88);
OFF(lt_kernels, mse_fwd, 96);
OFF(lt_kernels, mse_bwd, 104);
OFF(lt_kernels, count_correct, 112);
OFF(lt_kernels, cast, 120);
OFF(lt_kernels, sumsq, 128);
OFF(lt_kernels, all_finite, 136);
OFF(lt_kernels, sgd_step, 144);
OFF(lt_kernels, adamw_step, 152);
OFF(lt_kernels, rand_fill, 160);
OFF(lt_kernels, im2col, 168); /* 1.1 */
OFF(lt_kernels, col2im, 176);
OFF(lt_kernels, max_pool_fwd, 184);
OFF(lt_kernels, max_pool_bwd, 192);

/* lt_conv_geom (1.1) */
SIZE(lt_conv_geom, 88);
OFF(lt_conv_geom, c, 0);
OFF(lt_conv_geom, kh, 24);
OFF(lt_conv_geom, ph, 56);
OFF(lt_conv_geom, ow, 80);

/* lt_memory_stats */
SIZE(lt_memory_stats, 24);
OFF(lt_memory_stats, allocated_bytes, 0);
OFF(lt_memory_stats, peak_bytes, 8);
OFF(lt_memory_stats, total_bytes, 16);

/* lt_sgd_args */
SIZE(lt_sgd_args, 40);
OFF(lt_sgd_args, lr, 0);
OFF(lt_sgd_args, momentum, 8);
OFF(lt_sgd_args, dampening, 16);
OFF(lt_sgd_args, weight_decay, 24);
OFF(lt_sgd_args, nesterov, 32);
OFF(lt_sgd_args, first_step, 36);

/* lt_adamw_args */
SIZE(lt_adamw_args, 48);
OFF(lt_adamw_args, lr, 0);
OFF(lt_adamw_args, beta1, 8);
OFF(lt_adamw_args, beta2, 16);
OFF(lt_adamw_args, eps, 24);
OFF(lt_adamw_args, weight_decay, 32);
OFF(lt_adamw_args, step, 40);

/* lt_pg_options */
SIZE(lt_pg_options, 64);
OFF(lt_pg_options, struct_size, 0);
OFF(lt_pg_options, prefix, 8);
OFF(lt_pg_options, timeout_ms, 16);
OFF(lt_pg_options, mem_kind, 24);
OFF(lt_pg_options, device, 28);
OFF(lt_pg_options, iface, 32);
OFF(lt_pg_options, num_threads, 40);
OFF(lt_pg_options, connect_timeout_ms, 48);
OFF(lt_pg_options, main_address, 56); /* 1.1 */

/* lt_replica_params (1.3): an enum, values pinned */
_Static_assert(LT_REPLICA_PARAMS_AUTO == 0 && LT_REPLICA_PARAMS_SHARED == 1 && LT_REPLICA_PARAMS_COPIED == 2, "lt_replica_params values changed");
_Static_assert(LT_LAUNCH_NODE == 3, "lt_launch_kind values changed");

/* lt_param_view, lt_bucket_view (1.2) */
SIZE(lt_param_view, 72);
OFF(lt_param_view, name, 0);
OFF(lt_param_view, offset, 8);
OFF(lt_param_view, count, 16);
OFF(lt_param_view, index, 24);
OFF(lt_param_view, ndim, 28);
OFF(lt_param_view, shape, 32);
OFF(lt_param_view, dtype, 64);
SIZE(lt_bucket_view, 16);
OFF(lt_bucket_view, offset, 0);
OFF(lt_bucket_view, count, 8);

/* lt_optimizer_view (1.5) */
SIZE(lt_optimizer_view, 144);
OFF(lt_optimizer_view, struct_size, 0);
OFF(lt_optimizer_view, name, 8);
OFF(lt_optimizer_view, lr, 16);
OFF(lt_optimizer_view, step, 80);
OFF(lt_optimizer_view, state, 96);
OFF(lt_optimizer_view, count, 128);
OFF(lt_optimizer_view, dtype, 136);

/* lt_world */
SIZE(lt_world, 292);
OFF(lt_world, world_size, 0);
OFF(lt_world, global_rank, 4);
OFF(lt_world, local_rank, 8);
OFF(lt_world, local_world_size, 12);
OFF(lt_world, node_rank, 16);
OFF(lt_world, num_nodes, 20);
OFF(lt_world, num_devices, 24);
OFF(lt_world, device, 28);
OFF(lt_world, main_address, 32);
OFF(lt_world, main_port, 288);

/* lt_flat */
SIZE(lt_flat, 32);
OFF(lt_flat, params, 0);
OFF(lt_flat, grads, 8);
OFF(lt_flat, count, 16);
OFF(lt_flat, param_dtype, 24);
OFF(lt_flat, grad_dtype, 28);

/* lt_field_info */
SIZE(lt_field_info, 40);
OFF(lt_field_info, dtype, 0);
OFF(lt_field_info, ndim, 4);
OFF(lt_field_info, shape, 8);

/* lt_dataset_iface */
SIZE(lt_dataset_iface, 48);
OFF(lt_dataset_iface, struct_size, 0);
OFF(lt_dataset_iface, length, 8);
OFF(lt_dataset_iface, num_fields, 16);
OFF(lt_dataset_iface, field_info, 24);
OFF(lt_dataset_iface, get, 32);
OFF(lt_dataset_iface, destroy, 40);

/* lt_dataset */
SIZE(lt_dataset, 16);
OFF(lt_dataset, iface, 0);
OFF(lt_dataset, self, 8);

/* lt_optim_config */
SIZE(lt_optim_config, 144);
OFF(lt_optim_config, struct_size, 0);
OFF(lt_optim_config, name, 4);
OFF(lt_optim_config, lr, 24);
OFF(lt_optim_config, momentum, 32);
OFF(lt_optim_config, dampening, 40);
OFF(lt_optim_config, nesterov, 48);
OFF(lt_optim_config, weight_decay, 56);
OFF(lt_optim_config, beta1, 64);
OFF(lt_optim_config, beta2, 72);
OFF(lt_optim_config, eps, 80);
OFF(lt_optim_config, scheduler, 88);
OFF(lt_optim_config, step_size, 104);
OFF(lt_optim_config, gamma, 112);
OFF(lt_optim_config, warmup_steps, 120);
OFF(lt_optim_config, min_lr, 128);
OFF(lt_optim_config, interval_steps, 136);

/* lt_precision_dtypes */
SIZE(lt_precision_dtypes, 16);
OFF(lt_precision_dtypes, struct_size, 0);
OFF(lt_precision_dtypes, param, 4);
OFF(lt_precision_dtypes, compute, 8);
OFF(lt_precision_dtypes, grad, 12);

/* lt_trainer_args */
SIZE(lt_trainer_args, 56);
OFF(lt_trainer_args, struct_size, 0);
OFF(lt_trainer_args, config_path, 8);
OFF(lt_trainer_args, sets, 16);
OFF(lt_trainer_args, nsets, 24);
OFF(lt_trainer_args, set_origins, 32);
OFF(lt_trainer_args, plugin_dirs, 40);
OFF(lt_trainer_args, nplugin_dirs, 48);
OFF(lt_trainer_args, ignore_env, 52);
#else
#warning "test_abi_layout pins x86_64 layouts; on this target only the runtime checks run"
#endif

/* LT_HAS is what keeps a core from reading past an older plugin's struct. */
static void test_lt_has_truncated(void) {
    lt_strategy_desc d;
    memset(&d, 0, sizeof d);
    d.hdr.struct_size = (uint32_t)offsetof(lt_strategy_desc, on_train_start);
    CU_ASSERT_TRUE(LT_HAS(&d, launch_kind));
    CU_ASSERT_TRUE(LT_HAS(&d, configure_ddp)); /* the last hook before the cut */
    CU_ASSERT_FALSE(LT_HAS(&d, on_train_start));
    CU_ASSERT_FALSE(LT_HAS(&d, teardown));
    /* One byte short of a whole pointer is not room for it. */
    d.hdr.struct_size = (uint32_t)(offsetof(lt_strategy_desc, on_train_start) + sizeof(void *) - 1);
    CU_ASSERT_FALSE(LT_HAS(&d, on_train_start));
    d.hdr.struct_size = (uint32_t)sizeof d;
    CU_ASSERT_TRUE(LT_HAS(&d, teardown));
    lt_module_desc m;
    memset(&m, 0, sizeof m);
    m.hdr.struct_size = (uint32_t)sizeof(lt_plugin_header);
    CU_ASSERT_FALSE(LT_HAS(&m, init));
}

static lt_status stub(lt_ctx *ctx, int *out) {
    (void)ctx;
    *out = 0;
    return LT_OK;
}

/* LT_HEADER stamps what the loader checks: magic, this ABI, the full size. */
static void test_lt_header_fills(void) {
    static const lt_environment_desc *super;
    static const lt_environment_desc env = {
        LT_HEADER(LT_KIND_ENVIRONMENT, lt_environment_desc, "e", "base", "1", NULL, NULL, &super),
        .score = stub,
    };
    CU_ASSERT_EQUAL(env.hdr.magic, LT_PLUGIN_MAGIC);
    CU_ASSERT_EQUAL(env.hdr.abi_major, LT_ABI_MAJOR);
    CU_ASSERT_EQUAL(env.hdr.abi_minor, LT_ABI_MINOR);
    CU_ASSERT_EQUAL(env.hdr.struct_size, sizeof(lt_environment_desc));
    CU_ASSERT_EQUAL(env.hdr.kind, LT_KIND_ENVIRONMENT);
    CU_ASSERT_PTR_EQUAL(env.hdr.super, (const void **)&super);
    CU_ASSERT_TRUE(LT_HAS(&env, local_world_size));
    CU_ASSERT_EQUAL(memcmp(&env.hdr.magic, "LTp1", 4), 0); /* little-endian "LTp1" */
}

int main(void) {
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    CU_pSuite s = CU_add_suite("abi layout", NULL, NULL);
    CU_add_test(s, "LT_HAS on a truncated descriptor", test_lt_has_truncated);
    CU_add_test(s, "LT_HEADER fills the header", test_lt_header_fills);
    int rc = lt_cunit_run();
    return rc;
}
