/* The launch info of a trainer (dist/launch.h's lt_launch_info), read from
 * the config with the other options in lt_trainer_new; ltrun asks for it to
 * start workers, ddp_spawn to fork them. */
#ifndef LT_TRAINER_LAUNCH_INFO_H
#define LT_TRAINER_LAUNCH_INFO_H

#include "lt/trainer.h"
#include "dist/launch.h"

/* Fills out; whether workers start here is asked of the environment plugin
 * now. LT_ERR_INVALID (message in lt_last_error) when the node rank or the
 * port cannot work for a launch lt makes itself. */
lt_status lt_trainer_launch_info(const lt_trainer *t, lt_launch_info *out);

#endif
