#!/bin/bash
# ltrun's own options, through the real binary: --version, --help,
# --list-plugins (and a missing --plugin-dir or LT_PLUGIN_PATH entry),
# --help-plugin, --print-config (values and their origins:
# the INI file with its line, an LT_* environment variable, a --set flag),
# --check (a valid config, a misspelt key with a suggestion, a bad value; a
# [model] key the model does not have, a model parameter its init refuses,
# a batch limit that is neither a fraction nor a count, a plugin parameter
# value its check_params refuses, also in a run, shm's and gloo's both
# across nodes; a backend name a one-process run does not use) and a config
# file that does not exist. Every refusal exits 2 (README, "Using
# ltrun"), which --help states. Nothing is trained; it takes ~1 s.
source "$(dirname "$0")/common.sh"
it_init ltrun_cli "$@"
INI=$SRC/examples/fashion_mnist/train.ini

cli() { # cli LABEL args...  -> RC; output in $IT_TMP/LABEL.out and .err (no tail: failing is often the point)
    local label=$1; shift
    "$LTRUN" "$@" >"$IT_TMP/$label.out" 2>"$IT_TMP/$label.err"
    RC=$?
}
# grep -E over LABEL's stdout and stderr together
says() { cat "$IT_TMP/$1.out" "$IT_TMP/$1.err" | grep -qE -- "$2"; }
one_line() { [ "$(cat "$IT_TMP/$1.out" "$IT_TMP/$1.err" | grep -c .)" -eq 1 ]; }

echo "ltrun_cli: --version"
cli version --version
check "--version exits 0" [ "$RC" -eq 0 ]
check "--version prints 'ltrun X.Y.Z'" says version '^ltrun [0-9]+\.[0-9]+\.[0-9]+'
abi=$(sed -n 's/^#define LT_ABI_MAJOR \([0-9]*\).*/\1/p' "$SRC/sdk/include/lt/abi.h").$(sed -n 's/^#define LT_ABI_MINOR \([0-9]*\).*/\1/p' "$SRC/sdk/include/lt/abi.h")
check "--version prints the plugin ABI $abi (sdk/include/lt/abi.h)" says version "plugin ABI ${abi//./\\.}\\b"
show_tail "$IT_TMP/version.out" 2

echo "ltrun_cli: --help"
cli help --help
check "--help exits 0" [ "$RC" -eq 0 ]
for opt in --strategy --devices --config --plugin-dir --set --check --print-config --list-plugins --help-plugin; do
    check "--help mentions $opt" says help "^ +$opt\b"
done
check "--help states the exit statuses 0, 2, 1" \
    bash -c "grep -qE '^ +0 +done' '$IT_TMP/help.out' && grep -qE '^ +2 +refused' '$IT_TMP/help.out' && grep -qE '^ +1 +any other failure' '$IT_TMP/help.out'"
check "--help: a rank killed by a signal is 1" says help "rank lost \(exited or killed by a"

echo "ltrun_cli: an unknown option"
cli bogus --bogus-option
check "--bogus-option exits 2 ($RC)" [ "$RC" -eq 2 ]
check "--bogus-option is named in the message" says bogus "^ltrun: error: unknown option '--bogus-option'"
cli positional train.ini
check "a bare train.ini: exits 2 and points at --config ($RC)" bash -c "[ $RC -eq 2 ] && grep -q \
    \"^ltrun: error: unknown option 'train.ini'; a config file is named with --config train.ini\$\" '$IT_TMP/positional.err'"

# LT_STATUS_FD is ltrun's own hand-off to its workers. Set by anything else
# (an inherited variable, a file too short for the slot), an error must
# still be printed, not written into that file.
head -c 100 /dev/zero >"$IT_TMP/short_slot"
( exec 3<>"$IT_TMP/short_slot"; LT_STATUS_FD=3 LOCAL_RANK=0 "$LTRUN" --config "$IT_TMP/none.ini" ) \
    >"$IT_TMP/slotenv.out" 2>"$IT_TMP/slotenv.err"
RC=$?
check "a stray LT_STATUS_FD: the error is printed, exit 2 ($RC)" bash -c \
    "[ $RC -eq 2 ] && grep -q \"^ltrun: error: cannot open config file\" '$IT_TMP/slotenv.err'"

echo "ltrun_cli: --list-plugins"
cli list --list-plugins --plugin-dir "$PLUGINS"
check "--list-plugins exits 0" [ "$RC" -eq 0 ]
check "--list-plugins prints its header" says list '^KIND +NAME +VERSION +BASE +PATH'
listed() { # listed KIND NAME [BASE]: a row "KIND NAME VERSION BASE PATH" whose path is in $PLUGINS
    grep -qE "^$1 +$2 +[0-9]+\.[0-9]+\.[0-9]+ +${3:-[^ ]+} +$PLUGINS/liblt-$1-$2\.so\$" "$IT_TMP/list.out"
}
for kp in accelerator:cpu strategy:single_device strategy:ddp precision:32-true precision:64-true \
          environment:lightning backend:gloo module:fashion_mnist_mlp module:fashion_mnist_cnn; do
    check "--list-plugins lists ${kp%%:*} ${kp#*:}" listed "${kp%%:*}" "${kp#*:}"
done
check "--list-plugins lists strategy ddp_spawn with base ddp" listed strategy ddp_spawn ddp
check "--list-plugins lists ddp with no base" listed strategy ddp -
check "--list-plugins does not list the test plugins (mismatch_probe)" bash -c "! grep -q mismatch_probe '$IT_TMP/list.out'"
cli listnodir --list-plugins --plugin-dir "$IT_TMP/no-such-dir"
check "--list-plugins --plugin-dir <missing> exits 2 ($RC)" [ "$RC" -eq 2 ]
check "the message names the directory, in one line" bash -c "grep -q \"plugin-dir '$IT_TMP/no-such-dir'\" '$IT_TMP/listnodir.err' && [ \$(grep -c . '$IT_TMP/listnodir.err') -eq 1 ]"
# An LT_PLUGIN_PATH entry is judged as a --plugin-dir is (a missing one was
# skipped without a word); empty entries are skipped, as they always were.
NODIR_WHY="LT_PLUGIN_PATH entry '$IT_TMP/no-such-dir': No such file or directory; name an existing \
directory of liblt-<kind>-<name>\.so plugins, or remove the entry from LT_PLUGIN_PATH\$"
LT_PLUGIN_PATH="$PLUGINS:$IT_TMP/no-such-dir" cli pathnodir --list-plugins
check "LT_PLUGIN_PATH=<missing> --list-plugins exits 2 ($RC)" [ "$RC" -eq 2 ]
check "pathnodir: one line" one_line pathnodir
check "pathnodir: names the variable, the entry and the fix" says pathnodir "^ltrun: error: $NODIR_WHY"
LT_PLUGIN_PATH="$IT_TMP/no-such-dir" cli pathnodir2 --config "$INI" --plugin-dir "$PLUGINS" --check
check "LT_PLUGIN_PATH=<missing> --check exits 2 ($RC)" [ "$RC" -eq 2 ]
check "pathnodir2: one line" one_line pathnodir2
check "pathnodir2: the same words" says pathnodir2 "^ltrun: error: $NODIR_WHY"
show_tail "$IT_TMP/pathnodir2.err" 1
LT_PLUGIN_PATH="::$PLUGINS:" cli pathempty --list-plugins
check "LT_PLUGIN_PATH with empty entries: --list-plugins exits 0 ($RC)" [ "$RC" -eq 0 ]
check "pathempty: lists the plugins of the one entry" \
    says pathempty "^strategy +ddp .*$PLUGINS/liblt-strategy-ddp\.so\$"

echo "ltrun_cli: --help-plugin"
cli helpddp --help-plugin ddp --plugin-dir "$PLUGINS"
check "--help-plugin ddp exits 0" [ "$RC" -eq 0 ]
check "--help-plugin ddp names the plugin" says helpddp "^strategy 'ddp' [0-9.]+ \($PLUGINS/liblt-strategy-ddp\.so\)"
check "--help-plugin ddp: bucket_cap_mb, float, default 25" says helpddp '^ +bucket_cap_mb +float +default 25\b'
check "--help-plugin ddp: first_bucket_mb" says helpddp '^ +first_bucket_mb +float +default 1\b'
check "--help-plugin ddp: comm_hook, allreduce | fp16 | bf16" says helpddp '^ +comm_hook +string +default allreduce +allreduce \| fp16 \| bf16'
check "--help-plugin ddp: overlap, string, default auto" says helpddp '^ +overlap +string +default auto\b'
cli helpmlp --help-plugin fashion_mnist_mlp --plugin-dir "$PLUGINS"
check "--help-plugin fashion_mnist_mlp: hidden, int, default 512" says helpmlp '^ +hidden +int +default 512\b'
cli helpnone --help-plugin no_such_plugin --plugin-dir "$PLUGINS"
check "--help-plugin no_such_plugin exits 2 ($RC)" [ "$RC" -eq 2 ]
check "--help-plugin no_such_plugin names it" says helpnone "no plugin named 'no_such_plugin'"

echo "ltrun_cli: --print-config and origins"
LT_TRAINER__MAX_EPOCHS=7 cli pc --config "$INI" --plugin-dir "$PLUGINS" --set optimizer.lr=0.2 --seed 3 --print-config
check "--print-config exits 0" [ "$RC" -eq 0 ]
MOM_LINE=$(grep -n '^momentum *=' "$INI" | cut -d: -f1)
HID_LINE=$(grep -n '^hidden *=' "$INI" | cut -d: -f1)
check "momentum 0.9 from the file, line $MOM_LINE" says pc "^optimizer\.momentum = 0\.9  \($INI:$MOM_LINE\)\$"
check "hidden 512 from the file, line $HID_LINE" says pc "^model\.hidden = 512  \($INI:$HID_LINE\)\$"
check "max_epochs 7 from env LT_TRAINER__MAX_EPOCHS (the file says 3)" says pc '^trainer\.max_epochs = 7  \(env LT_TRAINER__MAX_EPOCHS\)$'
check "lr 0.2 from --set (the file says 0.05)" says pc '^optimizer\.lr = 0\.2  \(--set\)$'
check "seed 3 from --seed (the file says 42)" says pc '^trainer\.seed = 3  \(--seed\)$'
check "an unset key shows its default (trainer.max_steps = -1)" says pc '^trainer\.max_steps = -1  \(default\)$'
# the flag beats the environment, which beats the file
LT_OPTIMIZER__LR=0.3 cli pc2 --config "$INI" --plugin-dir "$PLUGINS" --set optimizer.lr=0.2 --print-config
check "--set beats LT_OPTIMIZER__LR" says pc2 '^optimizer\.lr = 0\.2  \(--set\)$'
LT_OPTIMIZER__LR=0.3 cli pc3 --config "$INI" --plugin-dir "$PLUGINS" --print-config
check "LT_OPTIMIZER__LR beats the file" says pc3 '^optimizer\.lr = 0\.3  \(env LT_OPTIMIZER__LR\)$'

echo "ltrun_cli: --check"
cli check --config "$INI" --plugin-dir "$PLUGINS" --check
check "--check of the example exits 0" [ "$RC" -eq 0 ]
check "--check says the configuration is valid" says check '^ltrun: configuration valid'
check "--check names the plugins it loaded" says check 'strategy single_device, precision 32-true.*model fashion_mnist_mlp'
cli checkddp --config "$INI" --plugin-dir "$PLUGINS" --check --strategy ddp --devices 2
check "--check with ddp x 2 exits 0" [ "$RC" -eq 0 ]
check "--check with ddp on one host loads strategy ddp and backend shm (auto)" says checkddp 'strategy ddp,.*backend shm'
cli checkgloo --config "$INI" --plugin-dir "$PLUGINS" --check --strategy ddp --devices 2 --set strategy.process_group_backend=gloo
check "--check with an explicit gloo keeps gloo" says checkgloo 'strategy ddp,.*backend gloo'
cli check2n --config "$INI" --plugin-dir "$PLUGINS" --check --strategy ddp --devices 2 --num-nodes 2 --master-addr 127.0.0.1 --master-port 29999
check "--check with ddp on 2 nodes loads backend gloo (auto)" says check2n 'strategy ddp,.*backend gloo'
cli typo --config "$INI" --plugin-dir "$PLUGINS" --check --set trainer.max_epochz=3
check "--check with trainer.max_epochz exits 2 ($RC)" [ "$RC" -eq 2 ]
check "the message names max_epochz and suggests max_epochs" says typo "unknown key 'max_epochz'.*did you mean 'max_epochs'"
show_tail "$IT_TMP/typo.err" 1
cli baddev --config "$INI" --plugin-dir "$PLUGINS" --check --set trainer.devices=foo
check "--check with trainer.devices=foo exits 2 ($RC)" [ "$RC" -eq 2 ]
check "the message is one line" one_line baddev
check "the message names trainer.devices and the value" says baddev '^ltrun: error: trainer\.devices.*foo'
show_tail "$IT_TMP/baddev.err" 1

# [model] takes the loaded model's parameters only, from any source; each
# misspelt one used to be kept while the model trained with the default.
echo "ltrun_cli: --check of [model] keys"
refused() { # refused LABEL ERE: exit 2, one line, stderr matches ERE
    check "$1: exits 2 ($RC)" [ "$RC" -eq 2 ]
    check "$1: one line" one_line "$1"
    check "$1: says '$2'" says "$1" "$2"
    show_tail "$IT_TMP/$1.err" 1
}
TYPO_INI=$IT_TMP/typo.ini
sed 's/^hidden *=/hiden =/' "$INI" >"$TYPO_INI"
TYPO_LINE=$(grep -n '^hiden =' "$TYPO_INI" | cut -d: -f1)
cli mtypo --config "$TYPO_INI" --plugin-dir "$PLUGINS" --check
refused mtypo \
    "^ltrun: error: unknown key 'hiden' in \[model\] \($TYPO_INI:$TYPO_LINE\); did you mean 'hidden'\?\$"
cli mtypo_set --config "$INI" --plugin-dir "$PLUGINS" --check --set model.hiden=3
refused mtypo_set "^ltrun: error: unknown key 'hiden' in \[model\] \(--set\); did you mean 'hidden'\?\$"
LT_MODEL__HIDEN=3 cli mtypo_env --config "$INI" --plugin-dir "$PLUGINS" --check
refused mtypo_env "unknown key 'hiden' in \[model\] \(env LT_MODEL__HIDEN\); did you mean 'hidden'\?\$"
cli mtypo_cnn --config "$INI" --plugin-dir "$PLUGINS" --check --model fashion_mnist_cnn \
    --set model.chanels=8
refused mtypo_cnn "unknown key 'chanels' in \[model\] \(--set\); did you mean 'channels'\?\$"
cli mcnn --config "$INI" --plugin-dir "$PLUGINS" --check --model fashion_mnist_cnn \
    --set model.channels=8
check "--model fashion_mnist_cnn over train.ini (its hidden is the CNN's too) exits 0 ($RC)" \
    [ "$RC" -eq 0 ]

# What a model's init refuses is refused by --check (it builds the model
# without weights); a run refuses it when it builds the model, and both say
# where the values came from.
echo "ltrun_cli: --check of model parameters"
cli mdrop --config "$INI" --plugin-dir "$PLUGINS" --check --set model.dropout=-1
refused mdrop "^ltrun: error: model 'fashion_mnist_mlp': init failed: .*model\.dropout = -1: need .*\
0 <= dropout < 1; parameters set: .*model\.dropout = -1 \(--set\)\$"
for m in fashion_mnist_mlp fashion_mnist_cnn; do
    cli "mhid_$m" --config "$INI" --plugin-dir "$PLUGINS" --check --model $m --set model.hidden=0
    refused "mhid_$m" "^ltrun: error: model '$m': init failed: .*model\.hidden = 0.*: need .*\
hidden >= 1.*; parameters set: model\.hidden = 0 \(--set\)"
done
LT_MODEL__HIDDEN=-4 cli mhid_run --config "$INI" --plugin-dir "$PLUGINS" --max-steps 1 \
    --default-root-dir "$IT_TMP/mhid_run"
check "mhid_run: a run exits 2 ($RC)" [ "$RC" -eq 2 ]
check "mhid_run: says the value, the need and where it came from" says mhid_run "^ltrun: error: model \
'fashion_mnist_mlp': init failed: model\.hidden = -4.*: need hidden >= 1.*; parameters set: \
model\.hidden = -4 \(env LT_MODEL__HIDDEN\)\$"
show_tail "$IT_TMP/mhid_run.err" 1

# Lightning's limit_*_batches: a fraction in [0, 1] or a whole count (1e20:
# all batches, test_trainer); 2.5 is neither.
echo "ltrun_cli: --check of trainer.limit_*_batches"
cli lim_half --config "$INI" --plugin-dir "$PLUGINS" --check --set trainer.limit_train_batches=2.5
refused lim_half "^ltrun: error: trainer\.limit_train_batches = 2\.5 \(--set\) is above 1 and not a \
whole number; use a fraction in \[0, 1\] or a whole number of batches\$"
cli lim_nan --config "$INI" --plugin-dir "$PLUGINS" --check --set trainer.limit_val_batches=nan
refused lim_nan "trainer\.limit_val_batches = 'nan' \(--set\) is not a finite number"

# An empty plugin name used to reach the registry as a missing argument
# ("lt_registry_load: registry, plugin name and output are required").
echo "ltrun_cli: --check of empty plugin names"
for f in strategy precision accelerator; do
    cli "empty_$f" --config "$INI" --plugin-dir "$PLUGINS" --check --$f ""
    refused "empty_$f" "^ltrun: error: trainer\.$f = '' \(--$f\) is empty; use (auto or )?one of \
[a-z0-9_, -]+ \(ltrun --list-plugins shows what is installed\)\$"
done
check "empty_strategy: lists ddp and single_device" \
    says empty_strategy "one of .*\bddp\b.*\bsingle_device\b"
check "empty_precision: lists 32-true, and no auto" \
    bash -c "grep -q 'use one of .*32-true' '$IT_TMP/empty_precision.err'"
check "empty_accelerator: lists cpu" says empty_accelerator "use auto or one of .*\bcpu\b"
LT_TRAINER__STRATEGY= cli empty_env --config "$INI" --plugin-dir "$PLUGINS" --check
refused empty_env \
    "^ltrun: error: trainer\.strategy = '' \(env LT_TRAINER__STRATEGY\) is empty; use auto or one of "

echo "ltrun_cli: a config file that does not exist"
cli nofile --config /nonexistent.ini --plugin-dir "$PLUGINS" --check
check "--config /nonexistent.ini --check exits 2 ($RC)" [ "$RC" -eq 2 ]
check "the message names /nonexistent.ini" says nofile "/nonexistent\.ini"
cli nofile2 --config /nonexistent.ini --plugin-dir "$PLUGINS" --max-steps 1 --default-root-dir "$IT_TMP/nofile2"
check "--config /nonexistent.ini (training) exits 2 ($RC)" [ "$RC" -eq 2 ]
check "the message names /nonexistent.ini" says nofile2 "cannot open config file '/nonexistent\.ini'"
check "nothing was trained" [ ! -e "$IT_TMP/nofile2" ]
show_tail "$IT_TMP/nofile2.err" 1

# Each used to crash ltrun (SIGBUS, SIGSEGV) or blame a file that is there;
# each must be refused in one line naming the file, what is wrong and the
# fix: as --strategy under --check, in --list-plugins (exit 0, a "refused"
# line), by --help-plugin (exit 2), and as the object of a hook override.
echo "ltrun_cli: plugin files that cannot be loaded"
DATAENTRY=$(dirname "$IT_PLUGINS")/test-plugins/liblt-strategy-dataentry.so # ints, not functions
[ -e "$DATAENTRY" ] || { echo "ltrun_cli: FAIL: $DATAENTRY is missing (build tp-dataentry)"; exit 1; }
BAD=$IT_TMP/bad
mkdir -p "$BAD/cut" "$BAD/data" "$BAD/foreign"
head -c 2000 "$PLUGINS/liblt-strategy-ddp.so" >"$BAD/cut/liblt-strategy-foo.so"
cp "$DATAENTRY" "$BAD/data/liblt-strategy-foo.so"
# another machine in the ELF header's e_machine (bytes 18-19): aarch64, or x86_64 on aarch64
cp "$PLUGINS/liblt-strategy-ddp.so" "$BAD/foreign/liblt-strategy-foo.so"
if [ "$(od -An -tu2 -j18 -N2 "$PLUGINS/liblt-strategy-ddp.so" | tr -d ' ')" = 183 ]; then
    OTHER='\x3e\x00' OTHER_NAME='x86_64 \(ELF machine 62\)'
else
    OTHER='\xb7\x00' OTHER_NAME='aarch64 \(ELF machine 183\)'
fi
printf "$OTHER" | dd of="$BAD/foreign/liblt-strategy-foo.so" bs=1 seek=18 conv=notrunc status=none
WHY_cut='not a loadable plugin: file is truncated \(segment ends at byte [0-9]+ of 2000\); rebuild or reinstall it$'
WHY_data='its lt_plugin_entry_v1 symbol is a variable \(ELF symbol type OBJECT\), not a function; define it with LT_PLUGIN_EXPORT'
WHY_foreign="not a loadable plugin: built for $OTHER_NAME, and this is [a-z0-9_]+ \\([0-9]+\\); build it for this machine\$"
for b in cut data foreign; do
    why=WHY_$b
    file="$BAD/$b/liblt-strategy-foo.so"
    cli "check_$b" --config "$INI" --plugin-dir "$BAD/$b" --plugin-dir "$PLUGINS" --strategy foo --check
    check "$b: --strategy foo --check exits 2 ($RC)" [ "$RC" -eq 2 ]
    check "$b: --check says so in one line" one_line "check_$b"
    check "$b: --check names the file and the fix" says "check_$b" "^ltrun: error: trainer\.strategy: strategy 'foo' \($file\): ${!why}"
    show_tail "$IT_TMP/check_$b.err" 1
    cli "list_$b" --plugin-dir "$BAD/$b" --list-plugins
    check "$b: --list-plugins exits 0 ($RC)" [ "$RC" -eq 0 ]
    check "$b: --list-plugins lists it as refused, and why" says "list_$b" "^  refused $file: strategy 'foo' \($file\): ${!why}"
    cli "help_$b" --plugin-dir "$BAD/$b" --help-plugin foo
    check "$b: --help-plugin foo exits 2 ($RC)" [ "$RC" -eq 2 ]
    check "$b: --help-plugin foo says no plugin 'foo' loads" says "help_$b" "no plugin named 'foo' loads"
done
for b in cut foreign; do
    why=WHY_$b
    why=${!why}
    file="$BAD/$b/liblt-strategy-foo.so"
    cli "hook_$b" --config "$INI" --plugin-dir "$PLUGINS" --set "strategy.teardown=$file:some_fn" --check
    check "$b: a hook from it (--check) exits 2 ($RC)" [ "$RC" -eq 2 ]
    check "$b: the hook's refusal is one line" one_line "hook_$b"
    check "$b: the hook's refusal names the file and the fix" says "hook_$b" "^ltrun: error: strategy\.teardown = '$file:some_fn' \(--set\): .*: cannot load $file: ${why#not a loadable plugin: }"
    show_tail "$IT_TMP/hook_$b.err" 1
done
cli hook_data --config "$INI" --plugin-dir "$PLUGINS" --set "strategy.teardown=$DATAENTRY:not_a_function" --check
check "data: a hook naming a variable (--check) exits 2 ($RC)" [ "$RC" -eq 2 ]
check "data: the hook's refusal is one line" one_line hook_data
check "data: the hook's refusal names the symbol, the file and the fix" says hook_data "^ltrun: error: strategy\.teardown = .*: 'not_a_function' in $DATAENTRY is a variable \(ELF symbol type OBJECT\), not a function; name a function"
show_tail "$IT_TMP/hook_data.err" 1

# One key through two spellings with two values is a contradiction (the same
# spelling repeated is an override, last wins); so are --validate and --test.
echo "ltrun_cli: contradictory flags"
contradiction() { # contradiction LABEL NEEDLE args...
    local label=$1 needle=$2; shift 2
    cli "$label" --config "$INI" --plugin-dir "$PLUGINS" "$@" --check
    check "$label: exits 2 ($RC)" [ "$RC" -eq 2 ]
    check "$label: one line" one_line "$label"
    check "$label: says '$needle'" says "$label" "$needle"
}
# torchrun's fixed-size form: --nnodes N --rdzv-endpoint HOST:PORT names node
# 0's store (it was ignored, and the job refused for want of --master-port).
cli rdzv_fixed --config "$INI" --plugin-dir "$PLUGINS" --strategy ddp --nnodes 2 \
    --rdzv-endpoint 127.0.0.1:29444 --check
check "rdzv_fixed: --nnodes 2 --rdzv-endpoint HOST:PORT is a valid fixed job ($RC)" [ "$RC" -eq 0 ]
contradiction rdzv_both "^ltrun: error: launcher\.rdzv_endpoint = '127\.0\.0\.1:29444' \(--rdzv-endpoint\) \
and launcher\.master_port \(--master-port\) both name node 0's rendezvous; give one of them\$" \
    --strategy ddp --nnodes 2 --rdzv-endpoint 127.0.0.1:29444 --master-port 5000
contradiction nproc "^ltrun: error: trainer\.devices is given twice on the command line, as --devices 2 and --nproc-per-node 3; keep one$" \
    --devices 2 --nproc-per-node 3
contradiction nnodes "trainer\.num_nodes is given twice on the command line, as --nnodes 2 and --num-nodes 3" \
    --nnodes 2 --num-nodes 3
contradiction setdev "as --set trainer\.devices=3 and --devices 2; keep one" --set trainer.devices=3 --devices 2
contradiction valtest "^ltrun: error: --validate and --test contradict each other" --validate --test
cli override --config "$INI" --plugin-dir "$PLUGINS" --devices 2 --devices 1 --check
check "override: the same flag twice, last wins: exits 0 ($RC)" [ "$RC" -eq 0 ]
check "override: with 1 device" says override "cpu \(1 device\)"
cli agree --config "$INI" --plugin-dir "$PLUGINS" --devices 2 --nproc-per-node 2 --strategy ddp --check
check "agree: two spellings, one value: exits 0 ($RC)" [ "$RC" -eq 0 ]

# --check judges what a run would refuse before training: the launch
# (node rank, elastic node counts, rendezvous endpoint) and the checkpoint.
echo "ltrun_cli: --check on launch settings and --ckpt-path"
printf 'junk' >"$IT_TMP/junk.safetensors"
contradiction noderank "launcher\.node_rank = 5 must be in \[0, 2\)" --strategy ddp --num-nodes 2 --node-rank 5
contradiction nnodes41 "launcher\.nnodes = '4:1' \(--nnodes\): expected MIN:MAX" --strategy ddp --nnodes 4:1
contradiction rdzvport "launcher\.rdzv_endpoint = '127\.0\.0\.1:99999'" --strategy ddp --nnodes 1:2 \
    --rdzv-endpoint 127.0.0.1:99999
contradiction nockpt "--ckpt-path: checkpoint /nonexistent\.safetensors: cannot open" --ckpt-path /nonexistent.safetensors
cli junkckpt --config "$INI" --plugin-dir "$PLUGINS" --ckpt-path "$IT_TMP/junk.safetensors" --check
check "junkckpt: a corrupt file exits 1, as the run would ($RC)" [ "$RC" -eq 1 ]
check "junkckpt: one line" one_line junkckpt
check "junkckpt: names the file" says junkckpt "--ckpt-path: checkpoint $IT_TMP/junk\.safetensors"
cli lastfresh --config "$INI" --plugin-dir "$PLUGINS" --default-root-dir "$IT_TMP/none" --ckpt-path last --check
check "lastfresh: --ckpt-path last with nothing saved yet is fine for a fit ($RC)" [ "$RC" -eq 0 ]

# A plugin's own parameter values (check_params, ABI 1.9): what its setup
# would refuse on every rank, --check refuses once, in the plugin's words.
echo "ltrun_cli: --check of plugin parameter values"
contradiction p_hook "^ltrun: error: strategy 'ddp': strategy\.comm_hook = 'bogus': use allreduce, fp16 or bf16$" \
    --strategy ddp --devices 2 --set strategy.comm_hook=bogus
contradiction p_overlap "strategy\.overlap = 'maybe': use auto, true or false" \
    --strategy ddp --devices 2 --set strategy.overlap=maybe
contradiction p_bucket "strategy\.bucket_cap_mb = -3" --strategy ddp --devices 2 --set strategy.bucket_cap_mb=-3
contradiction p_spawn "strategy 'ddp_spawn': strategy\.comm_hook = 'x'" \
    --strategy ddp_spawn --devices 2 --set strategy.comm_hook=x
contradiction p_bagua "strategy 'bagua': strategy\.algorithm = 'bogus' is not a Bagua algorithm" \
    --strategy bagua --devices 2 --set strategy.algorithm=bogus
contradiction p_bagua_ddp "strategy 'bagua': strategy\.comm_hook = 'x'" \
    --strategy bagua --devices 2 --set strategy.comm_hook=x
contradiction p_isa "accelerator 'cpu': accelerator\.isa = 'sse': use auto, avx512, avx2, generic" \
    --set accelerator.isa=sse
contradiction p_bf16 "accelerator\.bf16_gemm = 'amx'" --set accelerator.bf16_gemm=amx
contradiction p_scale "precision '16-mixed': precision\.init_scale = -1: must be a finite number > 0" \
    --precision 16-mixed --set precision.init_scale=-1
contradiction p_slot "backend 'shm': backend\.slot_mb = 0: use 1\.\.1024" --strategy ddp --devices 2 \
    --set backend.slot_mb=0
contradiction p_rt "backend 'gloo': backend\.realtime = 'maybe': use auto, on or off" --strategy ddp --devices 2 \
    --set strategy.process_group_backend=gloo --set backend.realtime=maybe
# gloo takes shm's words too: across hosts one [backend] serves both
cli p_rt_bool --config "$INI" --plugin-dir "$PLUGINS" --strategy ddp --devices 2 \
    --set strategy.process_group_backend=gloo --set backend.realtime=false --check
check "p_rt_bool: gloo takes backend.realtime = false ($RC)" [ "$RC" -eq 0 ]
# auto across hosts with several ranks on each runs shm inside the node and
# gloo across (run_groups.c): both judge their values, not gloo's alone
# (backend.slot_mb used to be an unknown key there, backend.shm.slot_mb unjudged)
TWO_NODES=(--strategy ddp --devices 2 --num-nodes 2 --master-addr 127.0.0.1 --master-port 29999)
contradiction p_slot2n "^ltrun: error: backend 'shm': backend\.slot_mb = 0: use 1\.\.1024" \
    "${TWO_NODES[@]}" --set backend.slot_mb=0
contradiction p_slot2n_sec "^ltrun: error: backend 'shm': backend\.slot_mb = 2000: use 1\.\.1024" \
    "${TWO_NODES[@]}" --set backend.shm.slot_mb=2000
contradiction p_thr2n "^ltrun: error: backend 'gloo': backend\.num_threads = 0: use 1\.\.16" \
    "${TWO_NODES[@]}" --set backend.num_threads=0
cli p_good2n --config "$INI" --plugin-dir "$PLUGINS" "${TWO_NODES[@]}" --set backend.slot_mb=16 \
    --set backend.num_threads=2 --check
check "p_good2n: good values of both pass --check ($RC)" [ "$RC" -eq 0 ]
check "p_good2n: names both transports" says p_good2n 'backend gloo \(shm inside each node\)'
cli p_good --config "$INI" --plugin-dir "$PLUGINS" --strategy bagua --devices 2 --set strategy.algorithm=qadam \
    --set accelerator.isa=generic --set backend.slot_mb=16 --set backend.realtime=false --check
check "p_good: values each plugin takes pass --check ($RC)" [ "$RC" -eq 0 ]
# A plugin a section names while another of its kind runs ([backend.gloo]
# beside shm): its values are judged from that section alone.
contradiction p_named "^ltrun: error: config section \[backend\.gloo\]: backend 'gloo': \
backend\.num_threads = 0: use 1\.\.16" --strategy ddp --devices 2 --set backend.gloo.num_threads=0
cli p_named_good --config "$INI" --plugin-dir "$PLUGINS" --strategy ddp --devices 2 \
    --set backend.gloo.num_threads=4 --set backend.realtime=off --check
check "p_named_good: a good value there passes ($RC)" [ "$RC" -eq 0 ]
# A run, not --check: ltrun refuses before it starts a worker, so the
# message comes once, not once per rank, and no rank is reported lost.
cli p_run --config "$INI" --plugin-dir "$PLUGINS" --strategy ddp --devices 2 --max-epochs 1 \
    --default-root-dir "$IT_TMP/p_run" --set strategy.comm_hook=bogus
check "p_run: exits 2 ($RC)" [ "$RC" -eq 2 ]
check "p_run: one line" one_line p_run
check "p_run: no worker started" bash -c "! grep -q 'starting 2 workers' '$IT_TMP/p_run.out' '$IT_TMP/p_run.err'"

# The same for the module's parameters and the checkpoint, which --check
# judges too: before this, each rank printed the refusal and ltrun added
# its report of the rank that exited.
cli m_run --config "$INI" --plugin-dir "$PLUGINS" --strategy ddp --devices 2 --max-epochs 1 \
    --default-root-dir "$IT_TMP/m_run" --set model.hidden=0
check "m_run: exits 2 ($RC)" [ "$RC" -eq 2 ]
check "m_run: one line" one_line m_run
check "m_run: the module's words" says m_run "^ltrun: error: model 'fashion_mnist_mlp': init failed: .*hidden"
check "m_run: no worker started" bash -c "! grep -q 'starting 2 workers' '$IT_TMP/m_run.out' '$IT_TMP/m_run.err'"
# data.dir too: an empty folder passed --check and was refused by each rank.
mkdir -p "$IT_TMP/nodata"
cli d_check --config "$INI" --plugin-dir "$PLUGINS" --check --data-dir "$IT_TMP/nodata"
check "d_check: --check refuses a data.dir without the files ($RC)" [ "$RC" -eq 2 ]
check "d_check: one line naming the file, both spellings, and the fix" says d_check \
    "^ltrun: error: data\.dir = $IT_TMP/nodata \(--data-dir\): $IT_TMP/nodata/train-images-idx3-ubyte\(\.gz\): not found; install dataset-fashion-mnist or set data\.dir\$"
cli d_run --config "$INI" --plugin-dir "$PLUGINS" --strategy ddp --devices 2 --max-epochs 1 \
    --default-root-dir "$IT_TMP/d_run" --data-dir "$IT_TMP/nodata"
check "d_run: a run exits 2, one line, no worker started ($RC)" bash -c "[ $RC -eq 2 ] && \
    [ \$(cat '$IT_TMP/d_run.out' '$IT_TMP/d_run.err' | grep -c .) -eq 1 ] && ! grep -q 'starting 2 workers' '$IT_TMP/d_run.out'"
cli c_run --config "$INI" --plugin-dir "$PLUGINS" --strategy ddp --devices 2 --max-epochs 1 \
    --default-root-dir "$IT_TMP/c_run" --ckpt-path "$IT_TMP/junk.safetensors"
check "c_run: a corrupt checkpoint exits 1, as --check ($RC)" [ "$RC" -eq 1 ]
check "c_run: one line" one_line c_run
check "c_run: no worker started" bash -c "! grep -q 'starting 2 workers' '$IT_TMP/c_run.out' '$IT_TMP/c_run.err'"

# A backend name is judged where no process group is made too (single_device
# and dp run one process): a typo passed until a run had more processes.
echo "ltrun_cli: strategy.process_group_backend in a one-process run"
PGB=strategy.process_group_backend
contradiction be_single "^ltrun: error: strategy\.process_group_backend = 'mpi' \(--set\), unused by \
this one-process run but judged for the next: backend 'mpi' not found; looked in: .* \(ltrun \
--list-plugins shows what is installed\)\$" --set $PGB=mpi
contradiction be_dp "strategy\.process_group_backend = 'glo'.*: backend 'glo' not found; .*did you mean 'gloo'" \
    --strategy dp --devices 2 --set $PGB=glo
contradiction be_empty "strategy\.process_group_backend = '' \(--set\) is empty; use auto or one of " \
    --set $PGB=
cli be_run --config "$INI" --plugin-dir "$PLUGINS" --max-steps 1 --set $PGB=mpi \
    --default-root-dir "$IT_TMP/be_run"
check "be_run: a run exits 2 ($RC)" [ "$RC" -eq 2 ]
check "be_run: one line" one_line be_run
check "be_run: the backend's words" says be_run "backend 'mpi' not found"
check "be_run: nothing was trained" [ ! -e "$IT_TMP/be_run" ]
cli be_good --config "$INI" --plugin-dir "$PLUGINS" --set $PGB=gloo --check
check "be_good: a backend that loads passes, unused, in one process ($RC)" [ "$RC" -eq 0 ]
# lt's own backend missing from this install (nccl without NCCL) is no typo:
# a config for several GPUs still trains in one process.
mkdir -p "$IT_TMP/nonccl"
for so in "$PLUGINS"/liblt-*.so; do
    case $so in *liblt-backend-nccl.so) ;; *) cp "$so" "$IT_TMP/nonccl/" ;; esac
done
cli be_absent --config "$INI" --plugin-dir "$IT_TMP/nonccl" --set $PGB=nccl --check
check "be_absent: nccl not installed, unused in one process: passes ($RC)" [ "$RC" -eq 0 ]
it_finish
