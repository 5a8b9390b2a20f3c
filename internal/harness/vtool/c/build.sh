#!/usr/bin/env bash
# build.sh VERE OUTDIR: build vtool (vere's UDP drivers with a stub arvo) from
# this folder's vtool.c (the harness of ../shared/vere with --accept, see its
# head) and the vere sources of VERE/src (../shared/vere: VERE/build.sh's
# sources, flags, one patch and link line, offline), into OUTDIR. Needs gcc and
# the Debian -dev packages below; it does not install them (.ci/run does, as
# root) but names the missing ones and exits 4. internal/harness/vtool runs it
# once per C file and vere folder, into the user's cache directory.
set -euo pipefail

harness=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
[ $# -eq 2 ] || { echo "usage: build.sh VERE OUTDIR" >&2; exit 2; }
[ -d "$1/src/vere/pkg" ] || { echo "build.sh: no vere sources in $1/src" >&2; exit 2; }
here=$(cd "$1" && pwd)
mkdir -p "$2"
out=$(cd "$2" && pwd)

# ---- Debian packages (headers; libraries linked dynamically)
pkgs=(gcc libc6-dev libuv1-dev libgmp-dev libsigsegv-dev libunwind-dev libssl-dev
      zlib1g-dev libnatpmp-dev liblmdb-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "build.sh: missing Debian packages (install them as root): ${missing[*]}" >&2
  exit 4
fi

V=$here/src/vere
S=$here/src
obj=$out/obj
rm -rf "$obj" "$out/include" "$out/patched"
mkdir -p "$obj" "$out/include/lmdb" "$out/patched"

# vere includes "lmdb/lmdb.h"; Debian installs <lmdb.h>
echo '#include <lmdb.h>' >"$out/include/lmdb/lmdb.h"

# the one patch: gcc rejects a static definition after manage.h's extern declaration
sed 's/^static c3_w u3m_Ford_fresh_road_depth_w = 0;$/c3_w u3m_Ford_fresh_road_depth_w = 0;/' \
  "$V/pkg/noun/manage.c" >"$out/patched/manage.c"
grep -q '^c3_w u3m_Ford_fresh_road_depth_w = 0;$' "$out/patched/manage.c" \
  || { echo "build.sh: manage.c patch did not apply" >&2; exit 1; }

CFLAGS=(-std=gnu2x -O2 -g -fms-extensions -fno-omit-frame-pointer
  -DU3_OS_linux=1 -DU3_OS_ENDIAN_little=1 -DU3_OS_PROF=1 -DU3_GUARD_PAGE -DENT_GETENTROPY_UNISTD
  -DNDEBUG
  -Wno-unused -include stdbool.h -MD
  -I"$out/include" -I"$V/pkg" -I"$V/pkg/noun" -I"$V/pkg/c3" -I"$V/pkg/noun/platform/linux"
  -I"$V/pkg/vere" -I"$V/pkg/vere/ivory" -I"$V/pkg/vere/io" -I"$V/pkg/ur" -I"$V/pkg/ent"
  -I"$V/ext/murmur3/vendor" -I"$S/urcrypt/urcrypt" -I"$S/whereami/src")

noun=(allocate events hashtable imprison jets log palloc nock options retrieve ship
      serial trace urth vortex xtract zave)
jets=(a/add a/dec a/gth a/lth a/min a/sub b/flop b/lent b/weld c/bex c/cap c/cut c/dor
      c/gor c/mas c/mor c/peg c/po d/by_get d/by_put d/in_tap e/rub)
srcs=("$out/patched/manage.c")
for f in "${noun[@]}"; do srcs+=("$V/pkg/noun/$f.c"); done
for f in "${jets[@]}"; do srcs+=("$V/pkg/noun/jets/$f.c"); done
srcs+=("$V/pkg/c3/defs.c" "$V/pkg/ur/bitstream.c" "$V/pkg/ur/hashcons.c" "$V/pkg/ur/serial.c"
       "$V/pkg/ent/ent.c" "$V/pkg/vere/auto.c" "$V/pkg/vere/ward.c"
       "$V/pkg/vere/io/mesa.c" "$V/pkg/vere/io/ames.c" "$V/pkg/vere/io/lss.c"
       "$V/pkg/vere/io/ames/stun.c" "$V/pkg/vere/io/mesa/pact.c" "$V/pkg/vere/io/mesa/bitset.c"
       "$V/ext/murmur3/vendor/murmur3.c" "$S/whereami/src/whereami.c" "$harness/vtool.c")

# no path of this machine in the binary: source and output folders are mapped
# to . (the longer one last, as the last match wins), and gcc runs in OUTDIR
maps=$(printf '%s\n' "$here" "$out" "$harness" | awk '{print length, $0}' | sort -n | cut -d' ' -f2-)
while IFS= read -r m; do CFLAGS+=(-ffile-prefix-map="$m"=.); done <<<"$maps"


# compile in parallel; an object is named after its path below the source root
compile() {
  local src=$1 rel o
  rel=${src#"$out"/}; rel=${rel#"$here"/}; rel=${rel#"$harness"/}
  o=$obj/$(echo "${rel%.c}" | tr '/' '_').o
  (cd "$out" && gcc @"$out/cflags" -c "$src" -o "$o") 2>"$o.log" \
    || { echo "build.sh: $rel failed:" >&2; sed -n 1,20p "$o.log" >&2; return 1; }
}
printf '"%s"\n' "${CFLAGS[@]}" >"$out/cflags"
export -f compile; export here out obj harness
fail=0
printf '%s\n' "${srcs[@]}" | xargs -P "$(nproc)" -I{} bash -c 'compile "$1"' _ {} || fail=1
[ $fail -eq 0 ] || { echo "build.sh: compile failed" >&2; exit 1; }

gcc -o "$out/vtool" "$obj"/*.o \
  -Wl,--wrap=u3v_do -Wl,--wrap=u3v_wish -Wl,--wrap=uv_udp_send -Wl,--wrap=uv_udp_recv_start \
  -Wl,--wrap=uv_getaddrinfo -Wl,--wrap=uv_timer_start \
  -Wl,--wrap=u3_stun_find_xor_mapped_address \
  -luv -lgmp -lsigsegv -lunwind -lcrypto -lz -lm -lpthread 2>"$out/link.log" \
  || { cat "$out/link.log" >&2; echo "build.sh: link failed" >&2; exit 1; }

echo "build.sh: built $out/vtool ($(stat -c %s "$out/vtool") bytes, ${#srcs[@]} sources)"
