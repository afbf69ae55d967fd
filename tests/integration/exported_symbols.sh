#!/bin/bash
# liblt.so exports the public API and nothing else: every function or object
# in its dynamic symbol table must be declared in sdk/include/lt/*.h. The check
# is the compiler's: one C file includes every public header and takes the
# address of each exported symbol; an undeclared one is a compile error that
# names it. Then, for information only, the LT_API functions the headers
# declare that liblt does not export (a macro, or a plugin-side symbol, can
# explain one; a typo in a definition too). Takes well under a second.
# Usage: exported_symbols.sh LIBLT_SO SOURCE_DIR [CC]
set -u
LIB=$1 SRC=$2 CC=${3:-cc}
INC=$SRC/sdk/include
TMP=$(mktemp -d "${TMPDIR:-/tmp}/lt-exported_symbols.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
export LC_ALL=C
[ -e "$LIB" ] || { echo "exported_symbols: FAIL: $LIB is missing (build liblt first)"; exit 1; }

# Defined functions (T), objects (D B R) and weak or unique ones; not the
# absolute version-node symbols (A).
nm -D --defined-only "$LIB" | awk '$2 ~ /^[TtDdBbRrWwVVui]$/ { print $3 }' | sed 's/@.*//' \
    | sort -u >"$TMP/exported"
N=$(wc -l <"$TMP/exported")
echo "exported_symbols: $LIB exports $N function/object symbols"
[ "$N" -gt 0 ] || { echo "exported_symbols: FAIL: no symbols read from $LIB (nm -D failed?)"; exit 1; }

{
    for h in "$INC"/lt/*.h; do echo "#include \"lt/${h##*/}\""; done
    awk '{ printf "void *lt_check_%d = (void *)&%s;\n", NR, $1 }' "$TMP/exported"
} >"$TMP/check.c"
"$CC" -std=gnu11 -fsyntax-only -fmax-errors=0 -I "$INC" "$TMP/check.c" >"$TMP/cc.out" 2>&1
CC_RC=$?
sed -n "s/.*error: '\([A-Za-z_][A-Za-z0-9_]*\)' undeclared.*/\1/p" "$TMP/cc.out" | sort -u >"$TMP/offenders"
FAILS=0
if [ -s "$TMP/offenders" ]; then
    echo "  FAILED: $(wc -l <"$TMP/offenders") exported symbol(s) of liblt.so are not declared in sdk/include/lt/*.h"
    echo "  (give them hidden visibility: drop LT_API from the internal header or make them static):"
    sed 's/^/    /' "$TMP/offenders"
    FAILS=1
elif [ "$CC_RC" -ne 0 ]; then
    echo "  FAILED: the check file did not compile for another reason ($CC):"
    head -n 10 "$TMP/cc.out" | sed 's/^/    /'
    FAILS=1
else
    echo "  ok: every exported symbol is declared in sdk/include/lt/*.h"
fi

# Information: LT_API functions declared in the public headers but not exported.
grep -hv '^[[:space:]]*#' "$INC"/lt/*.h | tr '\n' ' ' | grep -o 'LT_API[^;{(]*(' \
    | sed 's/[[:space:]]*($//; s/.*[^A-Za-z0-9_]//' | sort -u >"$TMP/declared"
comm -23 "$TMP/declared" "$TMP/exported" >"$TMP/unexported"
echo "  info: $(wc -l <"$TMP/declared") LT_API functions declared; $(wc -l <"$TMP/unexported") not exported by liblt.so"
sed 's/^/    not exported: /' "$TMP/unexported"

if [ "$FAILS" -eq 0 ]; then echo "exported_symbols: PASS"; exit 0; fi
echo "exported_symbols: FAIL"
exit 1
