# stubs: see _tensor.pyx
