/* `ltrun --check` builds the module once without weights, so what its init
 * refuses (model.hidden = 0, model.dropout = -1) fails the check as a bad
 * core key does. For ltrun; not part of the public API. */
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

#endif
