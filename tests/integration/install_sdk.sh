#!/bin/bash
# The installed SDK, as an outside user gets it: `cmake --install` into a
# temporary prefix, which is then moved (an installed tree must not depend on
# where it was installed); examples/custom_strategy built from outside the
# tree against the moved prefix twice, with find_package(lt) and with
# pkg-config; then the moved ltrun trains 20 steps of the MLP on 2 ranks with
# that plugin (strategy ddp_logged, over the installed ddp), and a program
# linking the moved liblt trains with the built-in plugins it finds beside
# liblt. The installed tree must hold no example plugins. ~15 s on 2 cores;
# the training parts are skipped without /usr/share/datasets/fashion-mnist.
# Arguments: those of every integration test (common.sh), then the build
# dir, cmake and the C compiler.
source "$(dirname "$0")/common.sh"
IT_NAME=install_sdk
SRC=$3 BUILD=$6 CMAKE=${7:-cmake} CC=${8:-cc}
# lib, lib64 or lib/<multiarch>, as GNUInstallDirs chose at configure time
LIBDIR=$(sed -n 's/^CMAKE_INSTALL_LIBDIR:[A-Z]*=//p' "$BUILD/CMakeCache.txt")
LIBDIR=${LIBDIR:-lib}
DATA=/usr/share/datasets/fashion-mnist
IT_TMP=$(mktemp -d "${TMPDIR:-/tmp}/lt-$IT_NAME.XXXXXX")
IT_FAILS=0
IT_PIDS=()
trap it_cleanup EXIT
it_private_cache
unset LT_PLUGIN_PATH # only what the installed tree finds by itself
[ -e "$BUILD/CMakeCache.txt" ] || { echo "$IT_NAME: FAIL: $BUILD is not a CMake build dir (pass it as the 6th argument)"; exit 1; }
command -v pkg-config >/dev/null || { echo "$IT_NAME: FAIL: pkg-config is not installed (apt-get install pkg-config)"; exit 1; }

echo "$IT_NAME: cmake --install into a prefix, then move the prefix"
FIRST=$IT_TMP/first/prefix
"$CMAKE" --install "$BUILD" --prefix "$FIRST" >"$IT_TMP/install.out" 2>&1
RC=$?
check "cmake --install exits 0" [ "$RC" -eq 0 ]
[ "$RC" -eq 0 ] || show_tail "$IT_TMP/install.out"
mkdir -p "$IT_TMP/moved"
mv "$FIRST" "$IT_TMP/moved/prefix"
P=$IT_TMP/moved/prefix
for f in include/lt/lt.h include/lt/strategy.h lib/liblt.so lib/liblt.so.1 bin/ltrun \
         lib/cmake/lt/ltConfig.cmake lib/cmake/lt/ltConfigVersion.cmake lib/cmake/lt/ltTargets.cmake \
         lib/cmake/lt/LtPlugin.cmake lib/pkgconfig/lt.pc \
         lib/lt/abi-1/liblt-strategy-ddp.so lib/lt/abi-1/liblt-backend-gloo.so; do
    check "installed $f" [ -e "$P/$f" ]
done
RUNPATH=$(readelf -d "$P/bin/ltrun" 2>/dev/null | sed -n 's/.*R\(UN\)\{0,1\}PATH.*\[\(.*\)\]/\2/p')
check "bin/ltrun has the relative RUNPATH \$ORIGIN/../$LIBDIR (it has '$RUNPATH')" [ "$RUNPATH" = "\$ORIGIN/../$LIBDIR" ]
EXAMPLES=$(ls "$P/$LIBDIR/lt/abi-1" 2>/dev/null | grep -E 'fashion_mnist|ddp_logged|embed' | tr '\n' ' ')
check "no example installed as a plugin (${EXAMPLES:-none})" [ -z "$EXAMPLES" ]

echo "$IT_NAME: the moved ltrun finds its built-in plugins"
"$P/bin/ltrun" --list-plugins >"$IT_TMP/list.out" 2>&1
RC=$?
check "ltrun --list-plugins exits 0" [ "$RC" -eq 0 ]
check "lists strategy ddp from the moved prefix" \
    grep -qE "^strategy +ddp .* $P/$LIBDIR/lt/abi-1/liblt-strategy-ddp\.so$" "$IT_TMP/list.out"
check "lists backend gloo from the moved prefix" grep -qE "^backend +gloo .* $P/$LIBDIR/lt/abi-1/" "$IT_TMP/list.out"
check "lists nothing from the build tree" bash -c "! grep -qF '$BUILD' '$IT_TMP/list.out'"
check "lists no example plugin" bash -c "! grep -qE 'fashion_mnist|ddp_logged' '$IT_TMP/list.out'"
[ "$IT_FAILS" -eq 0 ] || show_tail "$IT_TMP/list.out" 14

echo "$IT_NAME: examples/custom_strategy built outside the tree, with find_package(lt)"
CS=$IT_TMP/cs-cmake
"$CMAKE" -S "$SRC/examples/custom_strategy" -B "$CS" -DCMAKE_PREFIX_PATH="$P" -DCMAKE_C_COMPILER="$CC" \
    >"$IT_TMP/cs-configure.out" 2>&1 && "$CMAKE" --build "$CS" >"$IT_TMP/cs-build.out" 2>&1
RC=$?
check "configures and builds (exit $RC)" [ "$RC" -eq 0 ]
if [ "$RC" -ne 0 ]; then show_tail "$IT_TMP/cs-configure.out"; show_tail "$IT_TMP/cs-build.out"; fi
check "found lt in the moved prefix" grep -qx "lt_DIR:PATH=$P/$LIBDIR/cmake/lt" "$CS/CMakeCache.txt"
check "built plugins/liblt-strategy-ddp_logged.so" [ -e "$CS/plugins/liblt-strategy-ddp_logged.so" ]
"$CMAKE" --install "$CS" --prefix "$IT_TMP/cs-installed" >"$IT_TMP/cs-install.out" 2>&1
RC=$?
check "its cmake --install runs (exit $RC)" [ "$RC" -eq 0 ]
check "its cmake --install installs nothing (not asked to)" \
    [ -z "$(find "$IT_TMP/cs-installed" -type f 2>/dev/null)" ]

echo "$IT_NAME: the same plugin built with pkg-config"
PC=$IT_TMP/cs-pc
mkdir -p "$PC"
FLAGS=$(PKG_CONFIG_PATH=$P/$LIBDIR/pkgconfig pkg-config --cflags --libs lt)
RC=$?
echo "  pkg-config --cflags --libs lt: $FLAGS"
check "pkg-config knows lt (exit $RC)" [ "$RC" -eq 0 ]
check "its paths are in the moved prefix" grep -qF -- "-I$P/" <<<"$FLAGS"
# shellcheck disable=SC2086 # FLAGS is a list of flags
"$CC" -shared -fPIC "$SRC/examples/custom_strategy/ddp_logged.c" $FLAGS -o "$PC/liblt-strategy-ddp_logged.so" \
    >"$IT_TMP/pc-build.out" 2>&1
RC=$?
check "cc ... \$(pkg-config --cflags --libs lt) builds it (exit $RC)" [ "$RC" -eq 0 ]
[ "$RC" -eq 0 ] || show_tail "$IT_TMP/pc-build.out"

if [ ! -e "$DATA/train-images-idx3-ubyte.gz" ]; then
    it_skip "the install and both plugin builds passed, but the training part needs Fashion-MNIST in $DATA (install dataset-fashion-mnist)"
fi
# The model comes from the build tree (examples are not installed), in a
# directory of its own so that every other plugin must come from the prefix.
MODELS=$IT_TMP/models
mkdir -p "$MODELS"
cp "$2/liblt-module-fashion_mnist_mlp.so" "$MODELS/" 2>/dev/null
check "the MLP module is built ($2/liblt-module-fashion_mnist_mlp.so)" [ -e "$MODELS/liblt-module-fashion_mnist_mlp.so" ]
SMALL=(--config "$SRC/examples/fashion_mnist/train.ini" --set model.hidden=64
       --set trainer.limit_val_batches=5 --set trainer.num_sanity_val_steps=0 --no-test
       --set trainer.enable_progress_bar=false --set launcher.rdzv_timeout_s=60 --set strategy.timeout_s=60)
LTRUN=$P/bin/ltrun
for how in cmake pc; do
    dir=$CS/plugins; [ $how = pc ] && dir=$PC
    echo "$IT_NAME: the moved ltrun trains 20 steps on 2 ranks with ddp_logged built with $how"
    "$LTRUN" --list-plugins --plugin-dir "$dir" --plugin-dir "$MODELS" >"$IT_TMP/list-$how.out" 2>&1
    check "ddp_logged is found in $dir" grep -qE "^strategy +ddp_logged +.* ddp +$dir/" "$IT_TMP/list-$how.out"
    check "its base ddp is the installed one" grep -qE "^strategy +ddp .* $P/$LIBDIR/lt/abi-1/" "$IT_TMP/list-$how.out"
    run_ltrun "train-$how" "${SMALL[@]}" --plugin-dir "$dir" --plugin-dir "$MODELS" --strategy ddp_logged \
        --devices 2 --set trainer.max_steps=20 --default-root-dir "$IT_TMP/run-$how"
    check "ltrun exits 0" [ "$RC" -eq 0 ]
    check "strategy ddp_logged ran" contains "$IT_TMP/train-$how.out" "strategy ddp_logged"
    for r in 0 1; do
        check "rank $r logged 'joined the process group'" \
            grep -q "rank $r of 2 joined the process group" "$IT_TMP/train-$how.out" "$IT_TMP/train-$how.err"
    done
    check "wrote checkpoints/last.safetensors" [ -s "$IT_TMP/run-$how/checkpoints/last.safetensors" ]
done

echo "$IT_NAME: a program linking the moved liblt finds the built-in plugins beside it"
cat >"$IT_TMP/embed.c" <<'EOF'
#include <stdio.h>
#include "lt/trainer.h"
int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: embed MODEL_DIR ROOT_DIR\n");
        return 2;
    }
    char root[4096];
    snprintf(root, sizeof root, "trainer.default_root_dir=%s", argv[2]);
    const char *dirs[] = {argv[1]}; /* the model only: the rest must be found beside liblt */
    const char *sets[] = {"model.name=fashion_mnist_mlp", "model.hidden=32", "trainer.max_steps=5",
                          "trainer.limit_val_batches=2", "trainer.num_sanity_val_steps=0",
                          "trainer.enable_progress_bar=false", root};
    lt_trainer_args a = {.struct_size = sizeof a, .sets = sets, .nsets = (int)(sizeof sets / sizeof *sets),
                         .plugin_dirs = dirs, .nplugin_dirs = 1};
    char err[2048];
    lt_trainer *t;
    if (lt_trainer_new(&a, &t, err, sizeof err) != LT_OK) {
        fprintf(stderr, "embed: %s\n", err);
        return 1;
    }
    lt_status st = lt_trainer_fit(t);
    if (st != LT_OK) fprintf(stderr, "embed: %s\n", lt_trainer_error(t));
    lt_trainer_free(t);
    return st == LT_OK ? 0 : 1;
}
EOF
# shellcheck disable=SC2086
"$CC" "$IT_TMP/embed.c" $FLAGS -Wl,-rpath,"$P/lib" -o "$IT_TMP/embed" >"$IT_TMP/embed-build.out" 2>&1
RC=$?
check "builds with pkg-config (exit $RC)" [ "$RC" -eq 0 ]
[ "$RC" -eq 0 ] || show_tail "$IT_TMP/embed-build.out"
"$IT_TMP/embed" "$MODELS" "$IT_TMP/run-embed" >"$IT_TMP/embed.out" 2>&1
RC=$?
check "it trains 5 steps (exit $RC)" [ "$RC" -eq 0 ]
[ "$RC" -eq 0 ] || show_tail "$IT_TMP/embed.out"
it_finish
