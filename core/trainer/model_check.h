/* `ltrun --check` builds the module once without weights, so what its init
 * refuses (model.hidden = 0, model.dropout = -1) fails the check as a bad
 * core key does, and opens the checkpoint a run would load. For ltrun; not part of the public API. */
#ifndef LT_MODEL_CHECK_H
#define LT_MODEL_CHECK_H

#include "lt/trainer.h"

/* LT_OK without a module (model.name unset: fit says so). On a refusal,
 * lt_trainer_error(t) names the module, its message and where the
 * parameters the user set came from, as a worker's refusal does
 * (lt_run_init_failed). Call it only in a process that trains nothing
 * afterwards: a module may count the inits of its process (one per dp
 * replica, lt/module.h), and this would be one more. */
lt_status lt_trainer_check_model(lt_trainer *t);

/* --check's look at --ckpt-path (NULL: none): "last"/"best" resolved as the
 * run would (fit: a missing last starts fresh), the file opened and its
 * header and lt metadata read, and its tensors matched against the
 * parameters the module's init declares (sizes, the precision's dtype),
 * refused in one line as the run would. */
lt_status lt_trainer_check_ckpt(lt_trainer *t, const char *path, bool fit);

/* --check's look at data.dir: the four Fashion-MNIST files there (gzip or
 * plain), refused as the run would refuse a missing one or a data.dir that
 * is not a directory. Their contents are the run's to judge (reading them
 * is most of a start). LT_OK for a module with setup_data. */
lt_status lt_trainer_check_data(lt_trainer *t);

#endif
