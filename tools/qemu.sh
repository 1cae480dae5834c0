#!/usr/bin/env bash
# Tests on other CPUs: cross-build pyggml with clang-19 and run the op-level pytest suite under
# qemu-user, on a Debian 12 x86-64 machine (as root).
#
#   riscv64  RVV 1.0 kernels (chosen at run time) and the scalar build
#   aarch64  the NEON kernels (AArch64's baseline ISA)
#
# The builds use OpenMP (libomp from the sysroot), so the threaded paths run under emulation too.
#
#   1. host packages: clang-19, lld-19, llvm-19, qemu-user-static (apt, only when missing)
#   2. a sysroot with Python 3.13, numpy and pytest unpacked from Debian trixie packages of the
#      architecture through a private apt state (the system's apt sources are never touched);
#      cached in .cache/ARCH/ and rebuilt only when the package list changes
#   3. host build tools (meson, ninja, Cython) in a venv under .cache/ARCH/
#   4. cross builds, each meson setup/compile/install --destdir with cross/ARCH-*.ini
#   5. pytest under qemu (stages), PYGGML_QEMU_JOBS (default: the cores) stages at a time:
#      riscv64 rvv128, rvv256  the RVV build (cross/riscv64-rvv.ini) at VLEN 128 and 256,
#                      tail/mask-agnostic lanes filled with ones (rvv_ta_all_1s, rvv_ma_all_1s), so
#                      a missing _tu policy shows as NaN
#      riscv64 rvv-nov the RVV build on a CPU without V: scalar kernels, no SIGILL
#      riscv64 zvfhmin the build with cross/riscv64-zvfhmin.ini added, row primitives only (the only
#                      code that differs); qemu 7.2 runs the e16 conversions once Zfh is on
#      riscv64 scalar  the -Dsimd=none build (cross/riscv64-scalar.ini) on a CPU without V
#      aarch64 neon    the NEON build (cross/aarch64-neon.ini: ARMv8.0-A, the widening-multiply dots)
#      aarch64 dotprod the build with cross/aarch64-dotprod.ini added (vdotq), on qemu's max CPU,
#                      the quantized dot products only (the only code that differs)
#
# Usage: bash tools/qemu.sh ARCH [extra pytest args]      e.g. bash tools/qemu.sh aarch64 -k binary
# Env:   PYGGML_QEMU_STAGES  stages to run (default: all of ARCH's; PYGGML_RISCV64_STAGES also works
#        for riscv64); PYGGML_QEMU_JOBS  stages run side by side (default: nproc)
set -euo pipefail

ARCH=${1:-}
case $ARCH in
    riscv64) DEB_ARCH=riscv64; STAGES=${PYGGML_QEMU_STAGES:-${PYGGML_RISCV64_STAGES:-"rvv128 rvv256 rvv-nov zvfhmin scalar"}} ;;
    aarch64) DEB_ARCH=arm64; STAGES=${PYGGML_QEMU_STAGES:-"neon dotprod"} ;;
    *) echo "usage: bash tools/qemu.sh riscv64|aarch64 [pytest args]" >&2; exit 2 ;;
esac
shift
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=$ROOT/.cache/$ARCH            # cross/$ARCH-*.ini and cross/qemu-python expect the sysroot here
SYSROOT=$CACHE/rootfs
PYTHON=$ROOT/cross/$ARCH-python     # a link to cross/qemu-python
mkdir -p "$CACHE"
TRIXIE_PKGS="python3.13 python3-numpy python3-pytest libpython3.13-dev libpython3-dev libgcc-14-dev libc6-dev libomp-19-dev"
HOST_TOOLS="meson>=1.2 ninja Cython>=3.0"
T0=$SECONDS

log() { printf '\n== %s: %s (%ds)\n' "$ARCH" "$*" $((SECONDS - T0)); }
quiet() { "$@" >"$CACHE/last.log" 2>&1 || { cat "$CACHE/last.log"; return 1; }; }  # output only on failure

# ---- 1. host packages ----
need=()
command -v clang-19 >/dev/null || need+=(clang-19)
command -v ld.lld-19 >/dev/null || need+=(lld-19)
command -v llvm-ar-19 >/dev/null || need+=(llvm-19)
command -v "qemu-$ARCH-static" >/dev/null || need+=(qemu-user-static)
command -v pkg-config >/dev/null || need+=(pkgconf)
/usr/bin/python3 -c 'import ensurepip, venv' 2>/dev/null || need+=(python3-venv)
if ((${#need[@]})); then
    log "installing host packages: ${need[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        "${need[@]}" debian-archive-keyring ca-certificates >/dev/null
fi

# ---- 2. sysroot from Debian trixie ----
stamp="trixie $DEB_ARCH: $TRIXIE_PKGS"
if [[ ! -f $SYSROOT/.pyggml-sysroot || $(cat "$SYSROOT/.pyggml-sysroot") != "$stamp" ]]; then
    log "building the $ARCH sysroot from trixie $DEB_ARCH packages"
    apt_dir=$CACHE/apt
    rm -rf "$SYSROOT" "$apt_dir"
    mkdir -p "$apt_dir"/{lists/partial,cache/archives/partial,none,prefs.d} "$SYSROOT"
    : > "$apt_dir/empty-status"
    # the system's own mirror, trixie instead of bookworm (bookworm's keyring holds trixie's keys)
    uri=$(sed -n 's/^URIs:[[:space:]]*//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -n1)
    [[ -n $uri ]] || uri=$(awk '$1 == "deb" && $2 !~ /^\[/ {print $2; exit}' /etc/apt/sources.list 2>/dev/null)
    [[ -n $uri ]] || uri=http://deb.debian.org/debian
    echo "deb [arch=$DEB_ARCH signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $uri trixie main" \
        > "$apt_dir/sources.list"
    apt_opts=(-o APT::Architecture=$DEB_ARCH -o APT::Architectures::=$DEB_ARCH
              -o Dir::Etc::SourceList="$apt_dir/sources.list" -o Dir::Etc::SourceParts="$apt_dir/none"
              -o Dir::Etc::Preferences="$apt_dir/none/prefs" -o Dir::Etc::PreferencesParts="$apt_dir/prefs.d"
              -o Dir::State::Lists="$apt_dir/lists" -o Dir::State::status="$apt_dir/empty-status"
              -o Dir::Cache="$apt_dir/cache" -o Debug::NoLocking=1 -o APT::Sandbox::User=root)
    apt-get "${apt_opts[@]}" -qq update
    # an empty status file: apt downloads every dependency
    # shellcheck disable=SC2086
    quiet apt-get "${apt_opts[@]}" -y -d --no-install-recommends install $TRIXIE_PKGS
    for deb in "$apt_dir"/cache/archives/*.deb; do dpkg -x "$deb" "$SYSROOT"; done
    # dpkg -x runs no maintainer scripts: the merged-/usr links and numpy's BLAS alternatives
    for d in bin sbin lib; do [[ -e $SYSROOT/$d ]] || ln -s "usr/$d" "$SYSROOT/$d"; done
    libdir=$SYSROOT/usr/lib/$ARCH-linux-gnu
    for lib in libblas.so.3 liblapack.so.3; do
        [[ -e $libdir/$lib ]] || ln -s "$(cd "$libdir" && ls -d ./*/"$lib" | head -n1)" "$libdir/$lib"
    done
    # byte-compile once (every import would recompile otherwise); -j1: forkserver fails under qemu
    "$PYTHON" -m compileall -q -j1 "$SYSROOT/usr/lib/python3" \
        "$SYSROOT/usr/lib/python3.13" >/dev/null || true
    rm -rf "$apt_dir/cache/archives"
    echo "$stamp" > "$SYSROOT/.pyggml-sysroot"
fi

# ---- 3. host build tools ----
hostenv=$CACHE/hostenv
# (run the tools themselves: a venv moved with a copied tree keeps scripts with stale #! lines)
if ! { "$hostenv/bin/meson" --version && "$hostenv/bin/cython" --version; } >/dev/null 2>&1; then
    log "host build tools ($HOST_TOOLS)"
    rm -rf "$hostenv"
    /usr/bin/python3 -m venv "$hostenv"
    # shellcheck disable=SC2086
    quiet "$hostenv/bin/pip" install $HOST_TOOLS
fi
export PATH=$hostenv/bin:$PATH

# ---- 4. cross builds ----
build() {  # name cross-file... -> sets SITE to the installed package's directory
    local name=$1 bdir=$ROOT/build/$ARCH-$1 f; shift
    local cross=()
    for f in "$@"; do cross+=(--cross-file "$ROOT/cross/$ARCH-$f.ini"); done
    log "cross build $name"
    for f in "$@"; do   # a changed cross file: configure anew
        if [[ $ROOT/cross/$ARCH-$f.ini -nt $bdir/build.ninja ]]; then rm -rf "$bdir"; fi
    done
    if [[ ! -f $bdir/build.ninja ]]; then
        quiet meson setup "$bdir" "$ROOT" "${cross[@]}" -Dopenmp=enabled
    fi
    quiet meson compile -C "$bdir"
    rm -rf "$bdir/destdir"
    quiet meson install -C "$bdir" --destdir "$bdir/destdir"
    SITE=$(dirname "$(find "$bdir/destdir" -type d -name pyggml -path '*-packages/*' | head -n1)")
}

# every vector instruction of the RVV build must sit in the pg_rvv_* kernels (csrc/arch/riscv/*-rvv.c): V elsewhere
# (say, clang auto-vectorising Cython code) would kill the import on a CPU without V
check_v_confined() {  # build name
    local so bad
    for so in "$ROOT/build/$ARCH-$1"/pyggml/*.so; do
        bad=$(llvm-objdump-19 -d --no-show-raw-insn "$so" |
              awk '/^[0-9a-f]+ <.*>:$/ {f = $2} $2 ~ /^v/ && f !~ /^<pg_rvv_/ {print f}' | sort -u)
        if [[ -n $bad ]]; then
            echo "qemu.sh: V instructions outside the RVV kernels in $so:" $bad >&2
            exit 1
        fi
    done
}

# the dotprod build must use sdot (a compiler or flag change that drops it would test nothing new)
check_has_sdot() {  # build name
    if ! llvm-objdump-19 -d --no-show-raw-insn "$ROOT/build/$ARCH-$1"/pyggml/_graph*.so | grep -w sdot >/dev/null; then
        echo "qemu.sh: no sdot instruction in the $1 build" >&2
        exit 1
    fi
}

# ---- 5. tests under qemu ----
V_CPU=rv64,v=true,vext_spec=v1.0,rvv_ta_all_1s=true,rvv_ma_all_1s=true
run_tests() {  # name site cpu expect_simd expect_vlen pytest-args...
    local name=$1 site=$2 cpu=$3 simd=$4 vlen=$5; shift 5
    log "pytest $name (QEMU_CPU=$cpu)"
    # -P: no cwd on sys.path, so the source tree's pyggml/ cannot shadow the installed one;
    # passive OpenMP waits: emulated threads spinning at a barrier would starve the others
    QEMU_CPU=$cpu OMP_WAIT_POLICY=passive PYGGML_EMULATED=1 PYTHONPATH=$site PYGGML_EXPECT_SIMD=$simd PYGGML_EXPECT_VLEN=$vlen \
        "$PYTHON" -P -m pytest -p no:cacheprovider --basetemp="$CACHE/pytest-${name#*:}" "$@"
}

rvv_site='' zvfh_site='' scalar_site='' neon_site='' dotprod_site=''
stages=($ARCH:${STAGES// / $ARCH:})
for stage in "${stages[@]}"; do     # the builds first: each takes every core
    case $stage in
        riscv64:rvv128 | riscv64:rvv256 | riscv64:rvv-nov) [[ -n $rvv_site ]] || { build rvv rvv; check_v_confined rvv; rvv_site=$SITE; } ;;
        riscv64:zvfhmin) [[ -n $zvfh_site ]] || { build zvfhmin rvv zvfhmin; check_v_confined zvfhmin; zvfh_site=$SITE; } ;;
        riscv64:scalar) [[ -n $scalar_site ]] || { build scalar scalar; scalar_site=$SITE; } ;;
        aarch64:neon) [[ -n $neon_site ]] || { build neon neon; neon_site=$SITE; } ;;
        aarch64:dotprod) [[ -n $dotprod_site ]] || { build dotprod neon dotprod; check_has_sdot dotprod; dotprod_site=$SITE; } ;;
        *) echo "qemu.sh: unknown stage '$stage'" >&2; exit 2 ;;
    esac
done

# The stages then run side by side, as many at a time as there are cores: pytest under qemu keeps
# about one core busy. Each stage's output goes to its own log, printed whole when it ends.
jobs_max=${PYGGML_QEMU_JOBS:-$(nproc)}
running=() failed=()
finish() {  # wait for the oldest running stage, print its log
    local stage=${running[0]} pid=${running[1]}
    running=("${running[@]:2}")
    wait "$pid" || failed+=("$stage")
    cat "$CACHE/${stage#*:}.log"
}
for stage in "${stages[@]}"; do
    case $stage in
        riscv64:rvv128) args=("$rvv_site" "$V_CPU,vlen=128" rvv 128 "$ROOT/tests") ;;
        riscv64:rvv256) args=("$rvv_site" "$V_CPU,vlen=256" rvv 256 "$ROOT/tests") ;;
        riscv64:rvv-nov) args=("$rvv_site" rv64 scalar 0 "$ROOT/tests") ;;
        riscv64:zvfhmin) args=("$zvfh_site" "$V_CPU,vlen=256,Zfh=true" rvv 256
                               "$ROOT/tests/core/test_build.py" "$ROOT/tests/kernels/test_vec.py") ;;
        riscv64:scalar) args=("$scalar_site" rv64 scalar 0 "$ROOT/tests") ;;
        aarch64:neon) args=("$neon_site" cortex-a72 neon 128 "$ROOT/tests") ;;
        aarch64:dotprod) args=("$dotprod_site" max neon 128 "$ROOT/tests/core/test_build.py"
                               "$ROOT/tests/types/test_kquants.py" "$ROOT/tests/types/test_quants.py"
                               "$ROOT/tests/ops/test_mul_mat.py") ;;
    esac
    while ((${#running[@]} / 2 >= jobs_max)); do finish; done
    run_tests "$stage" "${args[@]}" "$@" >"$CACHE/${stage#*:}.log" 2>&1 &
    running+=("$stage" $!)
done
while ((${#running[@]})); do finish; done
if ((${#failed[@]})); then
    log "failed: ${failed[*]}"
    exit 1
fi
log "done"
