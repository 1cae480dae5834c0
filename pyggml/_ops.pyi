# stubs: see _ops.pyx
