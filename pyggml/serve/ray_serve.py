"""pyggml serve --ray: the OpenAI-compatible app (pyggml.serve.Server) as a Ray Serve deployment,
several replicas of it behind Ray Serve's HTTP proxy, which balances the requests across them
(optional extra pyggml[ray]: ray[serve]). See docs/serving.md.

    import ray
    from ray import serve
    from pyggml.serve.ray_serve import deployment
    ray.init()                                  # or ray.init(address="auto") on a cluster's node
    serve.start(http_options={"host": "127.0.0.1", "port": 8080})
    serve.run(deployment("model.gguf", replicas=2, n_seq=4), name="pyggml", route_prefix="/")

Each replica is a Ray actor that loads the GGUF itself (the file must be at the same path on every
node a replica lands on) and holds one Server: its own BatchEngine, KV cache and engine thread. The
replica answers with the very ASGI app `pyggml serve` runs (serve.ingress forwards Ray's ASGI calls
to it), so the endpoints, errors and streaming are the same.
"""
import os

from ray import serve

from pyggml.serve.app import Server

__all__ = ["Replica", "deployment", "run"]


_server = None          # the Server of this process's replica (Replica.__init__ sets it)


class _Forward:
    """The ASGI app Ray Serve runs in a replica: its Server's app. Ray pickles the app given to
    serve.ingress when the class is defined (an object: Ray would call a function to build the app);
    this class goes by reference and finds the Server the replica's constructor built (a replica is
    a process of its own)."""

    async def __call__(self, scope, receive, send):
        if scope["type"] == "lifespan":       # nothing to start or stop here: the replica owns the Server
            while True:
                msg = await receive()
                await send({"type": msg["type"] + ".complete"})
                if msg["type"] == "lifespan.shutdown":
                    return
        await _server.app(scope, receive, send)


@serve.ingress(_Forward())
class Replica:
    """One replica: a Server over models.load(path, **load) with the Server options `options`
    (n_seq, api_key, name, n_batch), answering through _Forward."""

    def __init__(self, path, load, options):
        global _server
        from pyggml import models
        _server = Server(models.load(path, **load), **options)

    def __del__(self):
        if _server is not None:
            _server.close()


def deployment(path, replicas=1, n_seq=4, n_ctx=4096, n_threads=None, n_batch=512, kv_type=None, api_key=None,
               name=None, num_cpus=None, max_replicas_per_node=None, load_options=None):
    """The bound Ray Serve application of `replicas` replicas of the server over the GGUF at path,
    each with n_seq sequences in a cache of n_ctx cells and n_threads threads (default num_cpus,
    else 1). num_cpus: the CPUs Ray reserves per replica (default n_threads); max_replicas_per_node:
    at most that many on one node (1: one per node). A replica takes up to 2 * n_seq requests at
    once (its engine queues those beyond n_seq); Ray holds the rest and routes each to a replica
    with room. load_options: more keyword options of models.load (repack, mmap)."""
    import os
    if int(replicas) < 1:
        raise ValueError(f"deployment: replicas must be >= 1, got {replicas}")
    if n_threads is None:
        n_threads = max(1, int(num_cpus)) if num_cpus else 1
    if num_cpus is None:
        num_cpus = n_threads
    load = {**(load_options or {}), "n_ctx": n_ctx, "n_threads": int(n_threads), "n_batch": n_batch}
    if kv_type is not None:
        load["kv_type"] = kv_type
    options = {"n_seq": n_seq, "api_key": api_key, "name": name or os.path.basename(path), "n_batch": n_batch}
    kw = {"name": "pyggml", "num_replicas": int(replicas), "max_ongoing_requests": 2 * int(n_seq),
          "ray_actor_options": {"num_cpus": num_cpus}}
    if max_replicas_per_node is not None:
        kw["max_replicas_per_node"] = int(max_replicas_per_node)
    return serve.deployment(Replica, **kw).bind(os.path.abspath(path), load, options)


def run(app, host="127.0.0.1", port=8080, address=None):
    """Start Ray (a local cluster, or the one at address / $RAY_ADDRESS / started on this machine)
    and Serve's HTTP proxy on host:port, run app, and block until interrupted; then shut Serve down."""
    import time

    import ray
    if not ray.is_initialized():
        # Serve's HTTP proxy gets 3 readiness checks of 5 s by default; on a loaded machine a new
        # proxy can take longer to start and is killed. A local cluster started here inherits this.
        os.environ.setdefault("RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S", "30")
        ray.init(address=address)
    serve.start(http_options={"host": host, "port": int(port)})
    try:
        serve.run(app, name="pyggml", route_prefix="/")
        while True:
            time.sleep(3600)
    finally:
        serve.shutdown()
