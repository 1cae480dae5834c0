"""pyggml.tokenizer against llama.cpp (llama-cpp-python, vocab_only) on every vocabulary-only GGUF of
its source tree: the .inp/.out pairs beside them and thousands of generated adversarial strings per
vocabulary, with add_special and parse_special on and off; detokenization and token_to_piece too."""
import ctypes
import random

import pytest

pytestmark = [pytest.mark.llama_cpp, pytest.mark.slow]

llama_cpp = pytest.importorskip("llama_cpp")
pytest.importorskip("tokenizers")
pytest.importorskip("regex")

import pyggml.gguf as G
import pyggml.tokenizer as T
from pyggml.tokenizer import Tokenizer

VOCABS = ["aquila", "baichuan", "bert-bge", "command-r", "deepseek-coder", "deepseek-llm", "falcon", "gemma-4",
          "gpt-2", "gpt-neox", "llama-bpe", "llama-spm", "mpt", "nomic-bert-moe", "phi-3", "qwen2", "qwen35",
          "refact", "starcoder"]
N_STRINGS = 2000


class Oracle:
    """llama.cpp's llama_tokenize / llama_detokenize / llama_token_to_piece on a vocab-only model."""

    def __init__(self, path):
        self.llm = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
        self.vocab = llama_cpp.llama_model_get_vocab(self.llm._model.model)

    def tokenize(self, text, add_special, parse_special):
        b = text.encode()
        n = 2 * len(b) + 16
        buf = (llama_cpp.llama_token * n)()
        k = llama_cpp.llama_tokenize(self.vocab, b, len(b), buf, n, add_special, parse_special)
        assert k >= 0
        return list(buf[:k])

    def detokenize(self, ids, remove_special, unparse_special):
        arr = (llama_cpp.llama_token * max(1, len(ids)))(*ids)
        n = 64 + 64 * len(ids)
        buf = ctypes.create_string_buffer(n)
        k = llama_cpp.llama_detokenize(self.vocab, arr, len(ids), buf, n, remove_special, unparse_special)
        assert k >= 0
        return buf.raw[:k]

    def piece(self, tid, special):
        buf = ctypes.create_string_buffer(512)
        k = llama_cpp.llama_token_to_piece(self.vocab, tid, buf, 512, 0, special)
        assert k >= 0
        return buf.raw[:k]


_WORDS = ["Hello", "world", "the", "THE", "don't", "I'm", "we'LL", "they're", "it's", "'s", "'t", "'re", "'ve",
          "'m", "'ll", "'d", "'S", "'Re", "n't", "’s", "Cửa", "Việt", "½", "naïve", "café", "Straße", "İstanbul",
          "ǅemal", "ΑΒΓ", "жук", "ёж", "你好", "世界", "日本語", "한국어", "ไทย", "हिन्दी", "العربية", "עברית",
          "ქართული", "e\u0301", "a\u0308\u0323", "👍", "👨‍👩‍👧‍👦", "🇺🇸", "🏳️‍🌈", "✌🏽", "∑", "∞", "€", "$", "+",
          "<", "=", ">", "^", "`", "|", "~", "...", "…", "—", "«»", "「」", "(", ")", "[", "]", "{", "}", "#", "@",
          "%", "&", "*", "_", "/", "\\", "\"", "'", "?", "!", ".", ",", ";", ":", "▁", "▁▁", "<0x41>", "##ing",
          "<s>", "</s>", "[CLS]", "<unk>", "<pad>", "ℌ", "ﬁ", "Ⅻ", "①", "²", "٣", "߀", "𝟘", "\u200b", "\u200d",
          "\ufeff", "\u00ad", "\x00", "\x07", "\x1f", "\x7f", "\x85", "\ue000", "\U000f0000", "\U0010fffd",
          "\u0378", "\U0001fbff", "\u2fff", "\u31ef", "\U00011b00"]
_SPACES = [" ", "  ", "   ", "\t", "\n", "\n\n", "\r", "\r\n", " \n", "\n ", " \t ", "\u00a0", "\u3000", "\u2009",
           "\u2028", "\u1680", "\u202f", "\v", "\f", "\u0085", "        "]


def _random_char(rng):
    """A random code point from a mix of ranges (no surrogates)."""
    lo, hi = rng.choice([(0x20, 0x7E), (0x0, 0x20), (0x80, 0x24F), (0x300, 0x36F), (0x370, 0x52F), (0x590, 0x6FF),
                         (0x900, 0xDFF), (0x1100, 0x11FF), (0x2000, 0x2BFF), (0x3000, 0x30FF), (0x4E00, 0x9FFF),
                         (0xAC00, 0xD7A3), (0xE000, 0xF8FF), (0xF900, 0xFFFD), (0x10000, 0x1FFFF),
                         (0x20000, 0x2FFFF), (0x30000, 0x10FFFF)])
    return chr(rng.randint(lo, hi))


def adversarial_strings(specials, n=N_STRINGS, seed=0):
    """n strings of words, digit runs, whitespace runs, random code points and special-token text."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        parts = []
        if rng.random() < 0.3:
            parts.append(rng.choice(_SPACES))
        for _ in range(rng.randint(1, 12)):
            r = rng.random()
            if r < 0.35:
                parts.append(rng.choice(_WORDS))
            elif r < 0.5:
                parts.append("".join(rng.choice("0123456789") for _ in range(rng.randint(1, 9))))
            elif r < 0.7:
                parts.append(rng.choice(_SPACES))
            elif r < 0.85:
                parts.append("".join(_random_char(rng) for _ in range(rng.randint(1, 4))))
            elif specials:
                parts.append(rng.choice(specials))
            if rng.random() < 0.5:
                parts.append(" ")
        if rng.random() < 0.3:
            parts.append(rng.choice(_SPACES))
        out.append("".join(parts))
    return out


@pytest.fixture(scope="module", params=VOCABS)
def pair(request, llama_cpp_src):
    path = llama_cpp_src / "models" / f"ggml-vocab-{request.param}.gguf"
    if not path.exists():
        pytest.skip(f"{path} is not in this llama.cpp tree")
    return request.param, path, Oracle(path), Tokenizer(G.load(path).metadata)


def _specials(tok):
    return [tok.tokens[i] for i, a in enumerate(tok.attrs) if a & (T.A_CONTROL | T.A_USER_DEFINED | T.A_UNKNOWN)][:300] + ["<|endoftext|>", "<s>", "</s>"]


def test_inp_out_pairs(pair):
    """llama.cpp's own tokenizer test pairs (tests/test-tokenizer-0): text -> ids, no BOS, specials parsed."""
    name, path, _, tok = pair
    inp, outp = path.with_suffix(".gguf.inp"), path.with_suffix(".gguf.out")
    if not inp.exists():
        pytest.skip(f"no .inp/.out pair for {name}")
    texts = inp.read_text(encoding="utf-8").split("\n__ggml_vocab_test__\n")
    expected = outp.read_text(encoding="utf-8").split("\n")
    for k, text in enumerate(texts):
        if k == len(texts) - 1:
            text = text.removesuffix("\n__ggml_vocab_test__\n").removesuffix("\n__ggml_vocab_test__")
        want = [int(x) for x in expected[k].split()]
        assert tok.encode(text, add_special=False, parse_special=False) == want, (name, text)


def test_adversarial_ids_and_text(pair):
    name, _, oracle, tok = pair
    bad = []
    for text in adversarial_strings(_specials(tok)):
        for add in (False, True):
            for parse in (False, True):
                want = oracle.tokenize(text, add, parse)
                got = tok.encode(text, add_special=add, parse_special=parse)
                if got != want:
                    bad.append(("ids", text, add, parse, want, got))
                    continue
                for remove, unparse in ((add, parse), (False, True), (True, False)):
                    want_text = oracle.detokenize(want, remove, unparse)
                    got_text = tok.detokenize(want, remove, unparse)
                    if got_text != want_text:
                        bad.append(("text", text, remove, unparse, want_text, got_text))
    assert not bad, f"{name}: {len(bad)} differences, first: {bad[:3]}"


def test_token_to_piece(pair):
    name, _, oracle, tok = pair
    rng = random.Random(1)
    ids = sorted({*range(min(tok.n_vocab, 400)), *rng.sample(range(tok.n_vocab), min(tok.n_vocab, 3000)),
                  *(i for i, a in enumerate(tok.attrs) if a & (T.A_CONTROL | T.A_USER_DEFINED | T.A_UNKNOWN | T.A_BYTE | T.A_UNUSED))})
    for special in (False, True):
        bad = [i for i in ids if tok.token_to_bytes(i, special) != oracle.piece(i, special)]
        assert not bad, f"{name}: token_to_piece(special={special}) differs for ids {bad[:10]}"
