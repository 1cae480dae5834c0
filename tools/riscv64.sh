#!/usr/bin/env bash
# The riscv64 stages of tools/qemu.sh (kept under this name for the recipes that call it).
exec bash "$(dirname "${BASH_SOURCE[0]}")/qemu.sh" riscv64 "$@"
