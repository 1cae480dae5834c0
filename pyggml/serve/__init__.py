"""pyggml serve: an OpenAI-compatible HTTP server over continuous batching (optional extra
pyggml[server]: Starlette and uvicorn). See docs/serving.md.

    from pyggml import models, serve
    server = serve.Server(models.load("model.gguf", n_ctx=4096), n_seq=4)
    serve.run(server, host="127.0.0.1", port=8080)      # or any ASGI server on server.app
"""
from pyggml.serve.app import Server, render_chat
from pyggml.serve.protocol import ApiError

__all__ = ["ApiError", "Server", "render_chat", "run"]


def run(server, host="127.0.0.1", port=8080, log_level="info"):
    """Serve server.app with uvicorn until interrupted, then stop the engine."""
    import uvicorn
    try:
        uvicorn.run(server.app, host=host, port=port, log_level=log_level, timeout_graceful_shutdown=5)
    finally:
        server.close()
