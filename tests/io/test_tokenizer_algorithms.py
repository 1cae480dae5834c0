"""pyggml.tokenizer's algorithms on small vocabularies written here (GGUF metadata through
pyggml.gguf.save), each expectation derived by hand from llama.cpp's rules (llama-vocab.cpp)."""
import numpy as np
import pytest

pytest.importorskip("tokenizers")
pytest.importorskip("regex")

import pyggml.gguf as G
import pyggml.tokenizer as T

NORMAL, UNKNOWN, CONTROL, USER, BYTE = 1, 2, 3, 4, 6


def load(tmp_path, meta, name="v.gguf"):
    meta = {"general.architecture": "llama", **{f"tokenizer.ggml.{k}": v for k, v in meta.items()}}
    G.save(tmp_path / name, {"w": np.zeros(4, np.float32)}, meta)
    return G.load(tmp_path / name).tokenizer()


# -- SPM ---------------------------------------------------------------------------------------------


@pytest.fixture
def spm(tmp_path):
    pieces = {"▁": -5.0, "a": -6.0, "b": -6.0, "c": -6.0, "ab": -1.0, "bc": -0.5, "▁a": -2.0, "abc": -3.0}
    tokens = ["<unk>", "<s>", "</s>", *(f"<0x{b:02X}>" for b in range(256)), *pieces, "<ctl>"]
    types = [UNKNOWN, CONTROL, CONTROL, *[BYTE] * 256, *[NORMAL] * len(pieces), CONTROL]
    scores = [0.0, 0.0, 0.0, *[0.0] * 256, *pieces.values(), 0.0]
    return load(tmp_path, {"model": "llama", "tokens": tokens, "token_type": types, "scores": scores,
                           "bos_token_id": 1, "eos_token_id": 2, "unknown_token_id": 0})


def test_spm_merges_the_best_scoring_pair_first(spm):
    ids = spm.token_to_id
    # " abc" -> ▁ a b c; bc (-0.5) beats ab (-1) and ▁a (-2); then ▁a (-2); "▁abc" is no token
    assert spm.encode("abc", add_special=False) == [ids["▁a"], ids["bc"]]
    assert spm.encode("abc") == [1, ids["▁a"], ids["bc"]]                  # BOS with add_special
    # a character without a token falls back to its UTF-8 bytes as <0xXX> tokens
    assert spm.encode("é", add_special=False) == [ids["▁"], 3 + 0xC3, 3 + 0xA9]
    # after a special token the text gets the space prefix again
    assert spm.encode("<ctl>abc", add_special=False) == [ids["<ctl>"], ids["▁a"], ids["bc"]]
    assert spm.encode("<ctl>abc", add_special=False, parse_special=False)[:3] == [ids["▁"], 3 + ord("<"), ids["c"]]


def test_spm_detokenize(spm):
    ids = spm.encode("abc é")
    assert spm.detokenize(ids[1:]) == b"abc \xc3\xa9"                     # the prefix space is removed...
    assert spm.detokenize(ids) == b" abc \xc3\xa9"                        # ...by the first token only (BOS here)
    assert spm.detokenize(ids, remove_special=True) == b" abc \xc3\xa9"   # ...and not after a removed BOS
    assert spm.detokenize(ids, unparse_special=True) == b"<s> abc \xc3\xa9"
    assert spm.decode(ids) == "abc é" and spm.token_to_piece(1) == "" and spm.token_to_piece(1, True) == "<s>"


# -- byte-level BPE ----------------------------------------------------------------------------------


def test_bpe_merges_by_rank(tmp_path):
    alphabet = T._byte_alphabet()
    tokens = [alphabet[b] for b in range(256)] + ["he", "Ġt", "Ġthe", "<|end|>"]
    tok = load(tmp_path, {"model": "gpt2", "pre": "gpt-2", "tokens": tokens,
                          "token_type": [NORMAL] * 259 + [CONTROL], "merges": ["h e", "Ġ t", "Ġt he"]})
    # "the" -> t h e -> t he; " the" -> Ġ t h e -> Ġ t he -> Ġt he -> Ġthe (ranks 0, 1, 2)
    assert tok.encode("the the") == [ord("t"), 256, 258]
    assert tok.encode("the<|end|>") == [ord("t"), 256, 259]
    assert tok.encode("é") == [0xC3, 0xA9]   # one token per byte
    assert tok.detokenize(tok.encode("the the é")) == "the the é".encode()
    assert tok.detokenize([0x20, ord("a"), 0x20, 0x2E]) == b" a."  # clean_spaces: " ." -> "."


@pytest.mark.parametrize("pre, text, words", [
    ("llama-bpe", "Hello  world 12345's", ["Hello", " ", " world", " ", "123", "45", "'s"]),
    ("llama-bpe", "½3 x\n\n y", ["½3", " x", "\n\n", " y"]),              # ½ is \p{N}
    ("llama-bpe", "a\u3000\u3000b", ["a", "\u3000", "\u3000b"]),          # U+3000 is whitespace
    ("qwen2", "1234 don'T", ["1", "2", "3", "4", " don", "'T"]),
    ("gpt-2", "1234 don'T", ["1234", " don", "'", "T"]),                  # gpt-2's contractions are lower case
    ("starcoder", "ab12 c", ["ab", "1", "2", " c"]),
    ("deepseek-coder", "Ab1!?\nc", ["Ab", "1", "!?", "\n", "c"]),
])
def test_pre_tokenizers(pre, text, words):
    assert T._PreTokenizer(T._pre_regexes(pre))(text) == words


def test_unknown_pre_tokenizer(tmp_path):
    with pytest.raises(ValueError, match="tokenizer.ggml.pre 'nope' is not supported; supported: .*llama-bpe"):
        load(tmp_path, {"model": "gpt2", "pre": "nope", "tokens": ["a"], "token_type": [NORMAL], "merges": ["x y"]})


# -- WPM ---------------------------------------------------------------------------------------------


def test_wpm_greedy_longest_match(tmp_path):
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "▁hello", "▁wor", "ld", "▁world", "▁!", "▁x", "yz", "▁w"]
    tok = load(tmp_path, {"model": "bert", "tokens": tokens, "token_type": [CONTROL] * 4 + [NORMAL] * 8,
                          "bos_token_id": 2, "seperator_token_id": 3, "unknown_token_id": 1})
    # lower case, accents stripped, punctuation split off, each word from its ▁-prefixed longest match
    assert tok.encode("Hello Wörld!") == [2, 4, 7, 8, 3]
    assert tok.encode("xyz worldz", add_special=False) == [9, 10, 1]   # "▁worldz": no way to finish -> UNK
    assert tok.detokenize([4, 5, 6]) == b" hello world"


# -- UGM ---------------------------------------------------------------------------------------------


def test_ugm_viterbi(tmp_path):
    pieces = {"▁": -3.0, "▁he": -2.0, "llo": -2.0, "▁hello": -1.0, "h": -4.0, "e": -4.0, "l": -4.0, "o": -4.0}
    tokens = ["<pad>", "</s>", "<unk>", *pieces]
    tok = load(tmp_path, {"model": "t5", "tokens": tokens, "token_type": [CONTROL, CONTROL, UNKNOWN] + [NORMAL] * 8,
                          "scores": [0.0, 0.0, 0.0, *pieces.values()], "eos_token_id": 1, "unknown_token_id": 2,
                          "add_space_prefix": True, "remove_extra_whitespaces": True})
    # "▁hello" (-1) beats "▁he"+"llo" (-4); spaces merge into one ▁; unknown "zz" is one UNK
    assert tok.encode("hello", add_special=False) == [6]
    assert tok.encode("  hello   hello") == [6, 6, 1]                                # EOS with add_special
    assert tok.encode("hezz", add_special=False) == [4, 2]


# -- special tokens ----------------------------------------------------------------------------------


def test_special_tokens_lstrip_rstrip_and_parse_special(tmp_path):
    alphabet = T._byte_alphabet()
    tokens = [alphabet[b] for b in range(256)] + ["<|c|>", "<u>"]
    meta = {"model": "gpt2", "pre": "qwen2", "tokens": tokens, "token_type": [NORMAL] * 256 + [CONTROL, USER],
            "merges": ["x y"]}
    tok = load(tmp_path, meta)
    sp = 0x20
    assert tok.encode("a<|c|>b<u>") == [ord("a"), 256, ord("b"), 257]
    assert tok.encode("a<u>", parse_special=False) == [ord("a"), 257]      # user-defined: always matched
    assert len(tok.encode("<|c|>", parse_special=False)) == 5              # control: text unless parsed
    tok.attrs[256] |= T.A_LSTRIP | T.A_RSTRIP
    assert tok.encode("a  <|c|>  b") == [ord("a"), 256, ord("b")]
    tok.attrs[256] &= ~(T.A_LSTRIP | T.A_RSTRIP)
    assert tok.encode("a <|c|> b") == [ord("a"), sp, 256, sp, ord("b")]
    assert tok.detokenize([256, 257]) == b"<u>" and tok.detokenize([256], unparse_special=True) == b"<|c|>"
