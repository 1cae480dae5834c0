"""pyggml.tokenizer: the tokenizer of a GGUF vocabulary (SPM and byte-level BPE) against the
tokenizer it was converted from, streaming, and the absence of the optional libraries."""
import sys

import numpy as np
import pytest

pytest.importorskip("gguf")
pytest.importorskip("tokenizers")
pytest.importorskip("transformers")
pytest.importorskip("torch")

from hf_models import bpe_tokenizer, hf_model, spm_tokenizer

import pyggml.convert as C
import pyggml.gguf as G
import pyggml.tokenizer as T

SAMPLES = ["hello world, this is a test", "The quick brown fox: 12345 67!", "  two  spaces\tand\nnewline ",
           "héllo wörld 你好", "жук ёж", "<|im_start|>user hi<|im_end|>", ""]


@pytest.fixture(scope="module")
def bpe(tmp_path_factory):
    d = tmp_path_factory.mktemp("bpe")
    tok = bpe_tokenizer(d / "tok", vocab_size=300)
    C.convert_hf(hf_model("qwen2vl", vocab_size=320), d / "m.gguf", "f16", tokenizer=tok)
    return tok, G.load(d / "m.gguf").tokenizer()


@pytest.fixture(scope="module")
def spm(tmp_path_factory):
    pytest.importorskip("sentencepiece")
    d = tmp_path_factory.mktemp("spm")
    sp = spm_tokenizer(d / "tok", vocab_size=320)
    C.convert_hf(hf_model("llama-gqa", vocab_size=320), d / "m.gguf", "f16", tokenizer=d / "tok")
    return sp, G.load(d / "m.gguf").tokenizer()


def stream_text(tok, ids, special=False):
    s = tok.stream(special)
    return "".join(s.push(i) for i in ids) + s.flush()


@pytest.mark.parametrize("text", SAMPLES)
def test_bpe_matches_the_hf_tokenizer(bpe, text):
    hf, tok = bpe
    assert tok.kind == "gpt2" and tok.n_vocab == 320
    ids = tok.encode(text)
    assert ids == hf.encode(text, add_special_tokens=False)        # no BOS: qwen2 adds none
    assert tok.decode(ids, special=True) == text
    assert stream_text(tok, ids, special=True) == text


def test_bpe_special_tokens(bpe):
    hf, tok = bpe
    ids = tok.encode("<|im_start|>hi<|im_end|>")
    assert ids[0] == hf.convert_tokens_to_ids("<|im_start|>") and ids[-1] == hf.convert_tokens_to_ids("<|im_end|>")
    assert tok.decode(ids) == "hi" and stream_text(tok, ids) == "hi"
    assert tok.eos_id == hf.convert_tokens_to_ids("<|endoftext|>")
    assert tok.bos_id == 1 and not tok.add_bos                     # config.json's id; BPE adds no BOS


@pytest.mark.parametrize("text", SAMPLES[:-2])
def test_spm_matches_sentencepiece(spm, text):
    sp, tok = spm
    assert tok.kind == "llama" and (tok.bos_id, tok.eos_id) == (1, 2)
    ids = tok.encode(text)
    assert ids == [1, *sp.encode(text)]                              # BOS first, as llama.cpp for SPM
    assert tok.encode(text, add_bos=False) == sp.encode(text)
    assert tok.decode(ids) == sp.decode(sp.encode(text))
    assert stream_text(tok, ids) == (" " + text if text else "")      # SPM's prefix space is a piece


def test_spm_byte_tokens_stream(spm):
    _, tok = spm
    ids = tok.encode("жук", add_bos=False)
    assert tok.tokens[ids[0]] == "\u2581" and all(3 <= i < 259 for i in ids[1:])   # unseen letters: bytes
    pieces = [tok.token_to_piece(i) for i in ids]
    assert "\ufffd" in "".join(pieces)                              # one byte alone is no character...
    assert stream_text(tok, ids) == " жук"                           # ...the stream joins them
    assert b"".join(tok.token_to_bytes(i) for i in ids) == " жук".encode()
    assert tok.token_to_bytes(1) == b"" and tok.token_to_bytes(1, special=True) == b"<s>"
    with pytest.raises(IndexError, match="token id 320 is outside the vocabulary of 320"):
        tok.token_to_bytes(320)


def test_byte_alphabet_is_gpt2s():
    from transformers.convert_slow_tokenizer import bytes_to_unicode
    assert T._byte_decoder() == {c: b for b, c in bytes_to_unicode().items()}


def test_without_vocabulary_or_library(tmp_path, monkeypatch, bpe):
    G.save(tmp_path / "n.gguf", {"w": np.zeros(4, np.float32)}, {"general.architecture": "llama"})
    assert G.load(tmp_path / "n.gguf").tokenizer() is None
    G.save(tmp_path / "b.gguf", {"w": np.zeros(4, np.float32)},
           {"general.architecture": "rwkv6", "tokenizer.ggml.model": "rwkv", "tokenizer.ggml.tokens": ["a", "b"]})
    with pytest.raises(ValueError, match="b.gguf: tokenizer.ggml.model 'rwkv' is not supported; supported: llama"):
        G.load(tmp_path / "b.gguf").tokenizer()
    monkeypatch.setitem(sys.modules, "tokenizers", None)             # import tokenizers fails
    assert G.load(tmp_path / "b.gguf").tokenizer() is None


def _mixed_texts(n=200, seed=0):
    """Random strings over letters, digits, spaces, newlines, CJK, accents and apostrophes."""
    rng = np.random.default_rng(seed)
    alphabet = list("abcXYZ019 '\n\t.,!") + ["  ", "'s", "你", "好", "é", "ж", "▁", "😀"]
    return ["".join(rng.choice(alphabet, rng.integers(0, 40))) for _ in range(n)]


@pytest.mark.parametrize("kind", ["bpe", "spm"])
def test_word_cache_gives_what_a_fresh_tokenizer_gives(request, kind, monkeypatch):
    """The BPE word cache (warm, cold, emptied when full) never changes the ids."""
    hf, tok = request.getfixturevalue(kind)
    texts = _mixed_texts()
    tok._word_ids.clear()
    first = [tok.encode(t) for t in texts]
    assert tok._word_ids                                         # the words were cached
    assert [tok.encode(t) for t in texts] == first               # warm
    monkeypatch.setattr(T, "_WORD_CACHE", 3)                      # emptied at almost every call
    assert [tok.encode(t) for t in texts] == first
    if kind == "bpe":
        assert first == [hf.encode(t, add_special_tokens=False) for t in texts]
    else:
        assert first == [hf.encode(t, add_bos=True) for t in texts]


def test_spm_words_equal_the_whole_fragment(spm, monkeypatch):
    """SPM text cut into words before each "▁" that follows another character: the same ids as
    merging over the whole fragment, and no cut when a token holds such a "▁"."""
    _, tok = spm
    assert tok._spm_words
    texts = _mixed_texts(seed=1)
    cut = [tok.encode(t) for t in texts]
    monkeypatch.setattr(tok, "_spm_words", False)
    assert [tok.encode(t) for t in texts] == cut
    assert T._SPM_CROSS.search("a\u2581b") and not T._SPM_CROSS.search("\u2581\u2581ab")


def test_single_regex_split_equals_the_span_split():
    """The one-regex pre-tokenizer's findall path gives the span-by-span split's words."""
    pre = T._PreTokenizer(T._pre_regexes("llama-bpe"))
    for text in _mixed_texts(seed=2) + ["\u3000x\u00a0 y", "a\u2029b"]:
        collapsed = T._collapse(text)
        spans = pre.splits[0].split(collapsed, [(0, len(text))])
        assert pre(text) == [text[s:e] for s, e in spans]
