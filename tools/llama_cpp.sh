#!/usr/bin/env bash
# llama.cpp as the tests' and benchmarks' oracle: llama-cpp-python built from its source distribution
# on PyPI (pip compiles the vendored llama.cpp with CMake for this CPU), and that distribution's
# llama.cpp tree unpacked beside it for what the Python package does not install: its converter
# (convert_hf_to_gguf.py with its own gguf-py), its vocabulary-only GGUFs (models/ggml-vocab-*.gguf)
# and its chat templates (models/templates/). Nothing from it is committed.
#
# Usage: bash tools/llama_cpp.sh        prints the tree's path (the tests look there by default,
#                                       or where PYGGML_LLAMA_CPP points)
# Env:   LLAMA_CPP_PYTHON_VERSION       the version to build (default below)
set -euo pipefail
cd "$(dirname "$0")/.."
version=${LLAMA_CPP_PYTHON_VERSION:-0.3.36}
cache=.cache/llama-cpp-python
sdist=$cache/llama_cpp_python-$version.tar.gz
tree=$cache/llama_cpp_python-$version/vendor/llama.cpp
mkdir -p "$cache"
if [ ! -f "$sdist" ]; then
    python3 -m pip download -q --no-deps --no-binary llama-cpp-python -d "$cache" "llama-cpp-python==$version" >&2
fi
if [ ! -d "$tree" ]; then
    tar xzf "$sdist" -C "$cache"
fi
if ! python3 -c "import llama_cpp, sys; sys.exit(llama_cpp.__version__ != '$version')" 2>/dev/null; then
    echo "tools/llama_cpp.sh: building llama-cpp-python $version from source (several minutes)" >&2
    CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) python3 -m pip install -q --no-deps "$sdist" >&2
fi
echo "$PWD/$tree"
