"""The registry of architectures: GGUF general.architecture -> its Decoder class.

    pyggml.models.register("myarch", MyDecoder)      # a Decoder subclass with its hparams_class
    pyggml.models.architecture("qwen3")              # -> pyggml.models.qwen3.Qwen3
    pyggml.models.read_hparams(gguf_file)            # that architecture's typed, validated HParams

pyggml registers llama, qwen2, qwen2vl, qwen3, qwen3moe, gemma2, gemma3, phi3 and gpt-oss (pyggml/models/<arch>.py); a user's own module adds
one with register() and models.load then runs its files. See docs/models.md, "Porting an architecture".
"""
from pyggml.gguf import GGUFError
from pyggml.models.blocks import Decoder, HParams

ARCHS = {}


def register(name, cls):
    """Run GGUF files whose general.architecture is `name` with Decoder subclass `cls` (its
    hparams_class reads their hyper-parameters). Registering a name again replaces it."""
    if not (isinstance(cls, type) and issubclass(cls, Decoder)):
        raise TypeError(f"pyggml.models.register: {name!r}: expected a subclass of pyggml.models.Decoder, got {cls!r}")
    if not (isinstance(cls.hparams_class, type) and issubclass(cls.hparams_class, HParams)):
        raise TypeError(f"pyggml.models.register: {name!r}: {cls.__name__}.hparams_class must be a subclass of "
                        f"pyggml.models.HParams, got {cls.hparams_class!r}")
    if not isinstance(name, str) or not name:
        raise TypeError(f"pyggml.models.register: the name must be a non-empty string, got {name!r}")
    ARCHS[name] = cls
    return cls


def architecture(name, source=""):
    """The Decoder class registered as `name`; ValueError naming the source file and the supported ones."""
    cls = ARCHS.get(name)
    if cls is None:
        where = f"{source}: " if source else ""
        raise ValueError(f"pyggml.models: {where}unsupported architecture {name!r}; supported: {', '.join(ARCHS)}")
    return cls


def read_hparams(f):
    """The validated hyper-parameters (its architecture's HParams) of GGUFFile f; GGUFError for a file
    without a registered general.architecture or with values the architecture cannot run."""
    if f.arch is None:
        raise GGUFError(f"{f.path}: the metadata has no 'general.architecture'")
    if f.arch not in ARCHS:
        raise GGUFError(f"{f.path}: architecture {f.arch!r} is not supported; supported: {', '.join(ARCHS)} "
                        f"(pyggml.models.register adds one)")
    return ARCHS[f.arch].hparams_class.from_gguf(f)
