"""Text to token ids and back from a GGUF file's vocabulary (tokenizer.ggml.* metadata).

    tok = pyggml.gguf.load("model.gguf").tokenizer()     # None without the optional libraries
    ids = tok.encode("Hello world")                      # BOS first when the vocabulary asks for it
    tok.decode(ids)
    stream = tok.stream()                                # for printing tokens as they are generated
    print(stream.push(next_id), end="")

The tokenizer is built by transformers' GGUF tokenizer support (transformers and tokenizers, optional:
pip install pyggml[tokenizer]) for SPM (`llama`) and byte-level BPE (`gpt2`) vocabularies: the file's
tokens, scores and merges (merges recovered from the scores for SPM), the pre-tokenizer named by
tokenizer.ggml.pre, and its control and user-defined tokens, which are matched whole in the text.
Token ids work without it: a model takes and returns ids; token_to_bytes() needs no library.
"""
import codecs
import re

__all__ = ["Tokenizer", "from_gguf"]

# GGUF tokenizer metadata -> the names transformers' GGUF tokenizer builder reads
_KEYS = {"model": "tokenizer_type", "pre": "pre_tokenizer_type", "tokens": "tokens", "scores": "scores",
         "token_type": "token_type", "merges": "merges", "bos_token_id": "bos_token_id",
         "eos_token_id": "eos_token_id", "unknown_token_id": "unk_token_id", "padding_token_id": "pad_token_id",
         "add_space_prefix": "add_prefix_space"}

_NORMAL, _CONTROL, _USER_DEFINED, _BYTE = 1, 3, 4, 6          # tokenizer.ggml.token_type values
_BYTE_TOKEN = re.compile(r"<0x([0-9A-Fa-f]{2})>")


def _builder():
    """transformers' convert_gguf_tokenizer(architecture, tokenizer_dict), or None if unavailable."""
    try:
        from transformers.integrations.gguf.gguf_tokenizer_mapping import convert_gguf_tokenizer
    except ImportError:
        try:
            from transformers.integrations.ggml import convert_gguf_tokenizer
        except ImportError:
            return None
    return convert_gguf_tokenizer


def _byte_decoder():
    """GPT-2's byte-level alphabet, reversed: character -> byte (printable bytes stand for
    themselves, the others for 256 + their rank)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars, extra = {}, 0
    for b in range(256):
        if b in printable:
            chars[chr(b)] = b
        else:
            chars[chr(256 + extra)] = b
            extra += 1
    return chars


def from_gguf(f):
    """A Tokenizer for the vocabulary of a GGUFFile, or None when the file has no vocabulary or the
    transformers/tokenizers libraries are not installed. ValueError for a vocabulary type that
    cannot be built (the message names the file and lists the supported types)."""
    md = f.metadata
    if "tokenizer.ggml.tokens" not in md:
        return None
    build = _builder()
    if build is None:
        return None
    spec = {name: md[f"tokenizer.ggml.{key}"] for key, name in _KEYS.items() if f"tokenizer.ggml.{key}" in md}
    kind = spec.get("tokenizer_type")
    if kind not in ("llama", "gpt2"):
        raise ValueError(f"{f.path}: tokenizer.ggml.model {kind!r} is not supported; supported: llama (SPM), "
                         f"gpt2 (byte-level BPE)")
    backend, _ = build(f.arch or "", spec)
    if kind == "llama":
        # llama.cpp's SPM tokenizer: a space before the text (add_space_prefix, default on) even when
        # it starts with one, spaces as U+2581, no splitting (the builder's Metaspace skips the prefix
        # before a leading space)
        from tokenizers import normalizers
        steps = [normalizers.Prepend("\u2581")] if md.get("tokenizer.ggml.add_space_prefix", True) else []
        backend.normalizer = normalizers.Sequence([*steps, normalizers.Replace(" ", "\u2581")])
        backend.pre_tokenizer = None
    # llama.cpp adds BOS when tokenizer.ggml.add_bos_token says so, by default for SPM only
    add_bos = md.get("tokenizer.ggml.add_bos_token", kind == "llama")
    return Tokenizer(backend, kind, md["tokenizer.ggml.tokens"], md.get("tokenizer.ggml.token_type"),
                     md.get("tokenizer.ggml.bos_token_id"), md.get("tokenizer.ggml.eos_token_id"), add_bos)


class Tokenizer:
    """encode/decode through a tokenizers.Tokenizer built from a GGUF vocabulary (from_gguf).
    Attributes: kind ("llama" or "gpt2"), n_vocab, bos_id, eos_id (None when absent), add_bos."""

    def __init__(self, backend, kind, tokens, types, bos_id, eos_id, add_bos):
        self.backend = backend
        self.kind = kind
        self.tokens = tokens
        self.types = types or [_NORMAL] * len(tokens)
        self.bos_id, self.eos_id = bos_id, eos_id
        self.add_bos = bool(add_bos) and bos_id is not None
        self._bytes = _byte_decoder() if kind == "gpt2" else None

    @property
    def n_vocab(self):
        return len(self.tokens)

    def encode(self, text, add_bos=True):
        """Token ids of `text` (control tokens written in the text are matched whole). With add_bos,
        BOS comes first when the vocabulary asks for it (tokenizer.ggml.add_bos_token, default True for
        SPM), as llama.cpp's tokenizer with add_special."""
        ids = self.backend.encode(text, add_special_tokens=False).ids
        return [self.bos_id, *ids] if add_bos and self.add_bos else ids

    def decode(self, ids, special=False):
        """The text of token ids; control tokens (BOS, EOS, ...) are left out unless special=True."""
        return self.backend.decode([int(i) for i in ids], skip_special_tokens=not special)

    def token_to_bytes(self, token_id, special=False):
        """The bytes token_id stands for, as llama.cpp's token_to_piece gives them: a byte token its
        byte, an SPM piece with its U+2581 as spaces, a byte-level BPE token decoded from GPT-2's
        alphabet, a user-defined token its text, a control token its text with special=True and
        nothing otherwise. IndexError outside the vocabulary."""
        if not 0 <= token_id < len(self.tokens):
            raise IndexError(f"token_to_bytes: token id {token_id} is outside the vocabulary of {len(self.tokens)}")
        text, kind = self.tokens[token_id], self.types[token_id]
        if kind == _CONTROL:
            return text.encode() if special else b""
        if kind == _USER_DEFINED:
            return text.encode()
        if self.kind == "llama":
            m = _BYTE_TOKEN.fullmatch(text) if kind == _BYTE else None
            return bytes([int(m.group(1), 16)]) if m else text.replace("\u2581", " ").encode()
        try:
            return bytes(self._bytes[c] for c in text)
        except KeyError:                     # not in the byte alphabet: a token stored as plain text
            return text.encode()

    def token_to_piece(self, token_id, special=False):
        """token_to_bytes as text (an incomplete UTF-8 sequence shows as U+FFFD; stream() joins them)."""
        return self.token_to_bytes(token_id, special).decode("utf-8", errors="replace")

    def stream(self, special=False):
        """A StreamDecoder: push(token_id) returns the text that token completes."""
        return StreamDecoder(self, special)


class StreamDecoder:
    """Text of tokens as they arrive: UTF-8 sequences split across tokens (byte tokens, byte-level
    BPE) are held until complete. push(token_id) -> str; flush() -> what is left."""

    def __init__(self, tokenizer, special=False):
        self.tokenizer, self.special = tokenizer, special
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def push(self, token_id):
        return self._utf8.decode(self.tokenizer.token_to_bytes(int(token_id), self.special))

    def flush(self):
        return self._utf8.decode(b"", final=True)
