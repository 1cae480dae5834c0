# stubs: see _graph.pyx
