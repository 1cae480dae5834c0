#!/usr/bin/env bash
# llama.cpp as the tests' and benchmarks' oracle: llama-cpp-python built from its source distribution
# on PyPI (pip compiles the vendored llama.cpp with CMake for this CPU), and that distribution's
# llama.cpp tree unpacked beside it for what the Python package does not install: its converter
# (convert_hf_to_gguf.py with its own gguf-py), its vocabulary-only GGUFs (models/ggml-vocab-*.gguf)
# and its chat templates (models/templates/). Nothing from it is committed.
#
# Usage: bash tools/llama_cpp.sh        prints the tree's path (the tests look there by default,
#                                       or where PYGGML_LLAMA_CPP points)
#        bash tools/llama_cpp.sh --server   also builds that tree's llama-server with CMake (for this
#                                       CPU, without the web UI; a few minutes) and prints its path
# Env:   LLAMA_CPP_PYTHON_VERSION       the version to build (default below)
set -euo pipefail
cd "$(dirname "$0")/.."
version=${LLAMA_CPP_PYTHON_VERSION:-0.3.36}
cache=.cache/llama-cpp-python
sdist=$cache/llama_cpp_python-$version.tar.gz
tree=$cache/llama_cpp_python-$version/vendor/llama.cpp
mkdir -p "$cache"
# llama.cpp's AMX kernels (compiled where -march=native has AMX-INT8) load their tile configuration
# with gcc 12's _tile_loadconfig, whose asm names 8 of the config's 64 bytes as read: the compiler
# drops the stores that fill the rest, and ldtilecfg faults (#GP) at the first quantized matmul. On
# such a CPU with gcc <= 12, llama.cpp is built without its AMX kernels: its AVX-512 VNNI and
# repacked ones run, as on a CPU without AMX.
noamx=""
if grep -qw amx_int8 /proc/cpuinfo 2>/dev/null && [ "$(gcc -dumpversion 2>/dev/null | cut -d. -f1)" -le 12 ] 2>/dev/null; then
    noamx="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
fi
cmake_args=()
[ -z "$noamx" ] || cmake_args=("-DCMAKE_C_FLAGS=$noamx" "-DCMAKE_CXX_FLAGS=$noamx")
if [ ! -f "$sdist" ]; then
    python3 -m pip download -q --no-deps --no-binary llama-cpp-python -d "$cache" "llama-cpp-python==$version" >&2
fi
if [ ! -d "$tree" ]; then
    tar xzf "$sdist" -C "$cache"
fi
# the build's flags, recorded beside each build: a build made without them is made again
stamp=$cache/built-with
if ! python3 -c "import llama_cpp, sys; sys.exit(llama_cpp.__version__ != '$version')" 2>/dev/null \
        || [ "$(cat "$stamp" 2>/dev/null)" != "$version $noamx" ]; then
    echo "tools/llama_cpp.sh: building llama-cpp-python $version from source (several minutes)" >&2
    CMAKE_ARGS=${noamx:+"-DCMAKE_C_FLAGS='$noamx' -DCMAKE_CXX_FLAGS='$noamx'"} CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) \
        python3 -m pip install -q --no-deps --force-reinstall "$sdist" >&2
    echo "$version $noamx" > "$stamp"
fi
if [ "${1:-}" = "--server" ]; then
    build=$cache/llama-server-build
    if [ ! -x "$build/bin/llama-server" ] || [ "$(cat "$build/built-with" 2>/dev/null)" != "$version $noamx" ]; then
        echo "tools/llama_cpp.sh: building llama-server from $tree (a few minutes)" >&2
        cmake -S "$tree" -B "$build" -DCMAKE_BUILD_TYPE=Release -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TESTS=OFF \
            -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_CURL=OFF \
            -DLLAMA_OPENSSL=OFF -DGGML_NATIVE=ON "${cmake_args[@]}" >&2
        cmake --build "$build" --target llama-server -j "$(nproc)" >&2
        echo "$version $noamx" > "$build/built-with"
    fi
    echo "$PWD/$build/bin/llama-server"
    exit 0
fi
echo "$PWD/$tree"
