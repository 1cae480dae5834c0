"""Text to token ids and back from a GGUF file's vocabulary (tokenizer.ggml.* metadata), as llama.cpp.

    tok = pyggml.gguf.load("model.gguf").tokenizer()     # None without the optional libraries
    ids = tok.encode("Hello world")                      # BOS first when the vocabulary asks for it
    tok.decode(ids)
    stream = tok.stream()                                # for printing tokens as they are generated
    print(stream.push(next_id), end="")

Every vocabulary type of llama.cpp's llama-vocab.cpp that pyggml knows gives llama.cpp's ids: SPM
(`llama`), byte-level BPE (`gpt2`, with the pre-tokenizer named by tokenizer.ggml.pre), `gemma4`
(BPE over raw UTF-8 with U+2581 for spaces), WPM (`bert`) and UGM (`t5`). docs/tokenizer.md says how
each works and how a new `pre` type is added. BPE merges run in the `tokenizers` library; the
pre-tokenizer, the special-token split, SPM/WPM/UGM rules and detokenization are here. Unicode
categories come from the `regex` module (the same Unicode version as llama.cpp's tables).
Optional libraries: pip install pyggml[tokenizer] (tokenizers, regex).
"""
import codecs
import functools
import itertools
import re

import numpy as np

__all__ = ["PRE_TOKENIZERS", "Tokenizer", "from_gguf"]

# tokenizer.ggml.token_type values and llama.cpp's token attributes made from them
_UNDEFINED, _NORMAL, _UNKNOWN, _CONTROL, _USER_DEFINED, _UNUSED, _BYTE = 0, 1, 2, 3, 4, 5, 6
A_UNKNOWN, A_UNUSED, A_NORMAL, A_CONTROL, A_USER_DEFINED, A_BYTE = 1 << 0, 1 << 1, 1 << 2, 1 << 3, 1 << 4, 1 << 5
A_LSTRIP, A_RSTRIP = 1 << 7, 1 << 8
_TYPE_ATTR = {_UNKNOWN: A_UNKNOWN, _UNUSED: A_UNUSED, _NORMAL: A_NORMAL, _CONTROL: A_CONTROL,
              _USER_DEFINED: A_USER_DEFINED, _BYTE: A_BYTE}
_BYTE_TOKEN = re.compile(r"<0x([0-9A-Fa-f]{2})>")
_SPACE = "\u2581"                               # SPM's escaped space
_C_SPACE = " \t\n\v\f\r"                        # C isspace(), used around lstrip/rstrip tokens
_WORD_CACHE = 1 << 16                            # BPE words whose ids a Tokenizer remembers
_SPM_CROSS = re.compile("[^\u2581]\u2581")            # a token that would join two SPM words
_SPM_WORD = re.compile("\u2581*[^\u2581]+|\u2581+")   # an SPM word: spaces, then the rest up to a space

# ---------------------------------------------------------------------------------------------------
# Unicode: llama.cpp's per-code-point flags (unicode.h) and its "collapsed" text for regexes

F_UNDEFINED, F_NUMBER, F_LETTER, F_SEPARATOR, F_MARK, F_PUNCT, F_SYMBOL, F_CONTROL = (1 << i for i in range(8))
F_WHITESPACE = 1 << 8
_WHITESPACE = [*range(9, 14), 0x20, 0x85, 0xA0, 0x1680, *range(0x2000, 0x200B), 0x2028, 0x2029, 0x202F, 0x205F,
               0x3000]
# a collapsed text keeps ASCII and writes every other code point as one character of its class
_COLLAPSE = {F_NUMBER: 0xD1, F_LETTER: 0xD2, F_PUNCT: 0xD3, F_MARK: 0xD4, F_SYMBOL: 0xD5}
_CLASS_ASCII = {"N": "0-9", "L": "A-Za-z", "P": r"!-#%-*,-/:;?@\[-\]_\{\}", "M": "", "S": r"\$\+<->\^`\|~"}
_CLASS_CODE = {"N": 0xD1, "L": 0xD2, "P": 0xD3, "M": 0xD4, "S": 0xD5}


@functools.cache
def _flags():
    """uint16 flags of every code point (F_* bits): the general category from the `regex` module's
    Unicode data, and llama.cpp's whitespace set."""
    import regex
    everything = "".join(map(chr, range(0x110000)))
    flags = np.full(0x110000, F_UNDEFINED, np.uint16)
    for cat, bit in (("L", F_LETTER), ("N", F_NUMBER), ("M", F_MARK), ("P", F_PUNCT), ("S", F_SYMBOL),
                     ("Z", F_SEPARATOR), ("Cc", F_CONTROL), ("Cf", F_CONTROL), ("Co", F_CONTROL), ("Cs", F_CONTROL)):
        for m in regex.finditer(rf"\p{{{cat}}}+", everything):
            flags[m.start():m.end()] = bit
    flags[_WHITESPACE] |= F_WHITESPACE
    return flags


@functools.cache
def _collapse_table():
    """code point -> collapsed byte: ASCII itself, other whitespace 0x0B, a category its 0xD1..0xD5
    code, anything else 0xD0 (unicode_regex_split in unicode.cpp)."""
    flags = _flags()
    table = np.full(0x110000, 0xD0, np.uint8)
    for bit, code in _COLLAPSE.items():
        table[(flags & bit) != 0] = code
    table[(flags & F_WHITESPACE) != 0] = 0x0B
    table[:128] = np.arange(128)
    return table


def _codepoints(text):
    return np.frombuffer(text.encode("utf-32-le"), np.uint32)


def _collapse(text):
    return _collapse_table()[_codepoints(text)].tobytes().decode("latin-1")


def _regex_for_collapsed(expr):
    """A llama.cpp pre-tokenizer regex with \\p{..} categories, rewritten for the collapsed text as
    unicode.cpp does (a category becomes its collapsed code plus its ASCII members)."""
    out, inside, i = [], False, 0
    while i < len(expr):
        c = expr[i]
        if c == "[" and (i == 0 or expr[i - 1] != "\\"):
            inside = True
        elif c == "]" and inside and expr[i - 1] != "\\":
            inside = False
        m = re.match(r"\\p\{(L[ultmo]?|N|P|M|S)\}", expr[i:])
        if m:
            cat = m.group(1)[0]
            body = f"\\x{_CLASS_CODE[cat]:02x}" + _CLASS_ASCII[cat]
            out.append(body if inside else f"[{body}]")
            i += m.end()
            continue
        out.append(c)
        i += 1
    return "".join(out)


class _Split:
    """One regex of a pre-tokenizer: matches and the text between them become pieces (as
    unicode_regex_split_stl), each earlier piece split on its own."""

    def __init__(self, expr):
        self.collapsed = "\\p{" in expr
        if self.collapsed:
            if any(ord(c) > 127 for c in expr):
                raise ValueError(f"pre-tokenizer regex {expr!r} mixes categories and non-ASCII characters")
            expr = _regex_for_collapsed(expr)
        if expr.endswith("$") and not expr.endswith("\\$"):        # ECMAScript: end of input only
            expr = expr[:-1] + r"\Z"
        self.rx = re.compile(expr, re.ASCII)

    def split(self, text, pieces):
        out = []
        find = self.rx.finditer
        for start, end in pieces:
            at = start
            for m in find(text, start, end):
                s, e = m.span()
                if s > at:
                    out.append((at, s))
                out.append((s, e))
                at = e
            if at < end:
                out.append((at, end))
        return out


# tokenizer.ggml.pre -> llama.cpp's regexes for it (llm_tokenizer_bpe in llama-vocab.cpp); names that
# share a list are aliases there. A pre-tokenizer runs its regexes one after the other.
_CONTRACTIONS = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
_GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)"
_LLAMA3 = _CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
_QWEN2 = _CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
_QWEN35 = (_CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+"
           r"|\s+(?!\S)|\s+")
# deepseek-llm's letters, as escapes: some of these characters change under Unicode normalisation
_DEEPSEEK_LETTERS = (
    "A-Za-z\u00b5\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u01ba\u01bc-\u01bf\u01c4-\u0293\u0295-\u02af\u0370"
    "-\u0373\u0376\u0377\u037b-\u037d\u037f\u0386\u0388-\u038a\u038c\u038e-\u03a1\u03a3-\u03f5\u03f7-"
    "\u0481\u048a-\u052f\u0531-\u0556\u10a0-\u10c5\u13a0-\u13f5\u13f8-\u13fd\u1c90-\u1cba\u1cbd-"
    "\u1cbf\u1d00-\u1d2b\u1d6b-\u1d77\u1d79-\u1d9a\u1e00-\u1f15\u1f18-\u1f1d\u1f20-\u1f45\u1f48-"
    "\u1f4d\u1f50-\u1f57\u1f59\u1f5b\u1f5d\u1f5f-\u1f7d\u1f80-\u1fb4\u1fb6-\u1fbc\u1fbe\u1fc2-\u1fc4"
    "\u1fc6-\u1fcc\u1fd0-\u1fd3\u1fd6-\u1fdb\u1fe0-\u1fec\u1ff2-\u1ff4\u1ff6-\u1ffc\u2102\u2107\u210a"
    "-\u2113\u2115\u2119-\u211d\u2124\u2126\u2128\u212a-\u212d\u212f-\u2134\u2139\u213c-\u213f\u2145-"
    "\u2149\u214e\u2183\u2184\u2c00-\u2c7b\u2c7e-\u2ce4\u2ceb-\u2cee\u2cf2\u2cf3\ua640-\ua66d\ua680-"
    "\ua69b\ua722-\ua76f\ua771-\ua787\ua78b-\ua78e\uab70-\uabbf\ufb00-\ufb06\ufb13-\ufb17\uff21-"
    "\uff3a\uff41-\uff5a\U00010400-\U0001044f\U000104b0-\U000104d3\U000104d8-\U000104fb\U00010c80-"
    "\U00010cb2\U00010cc0-\U00010cf2\U000118a0-\U000118df\U0001e900-\U0001e943"
)
_DEFAULT = [r"[\p{P}\$\+<=>\^~\|]+", _GPT2, r"\p{N}+", "[0-9][0-9][0-9]"]
PRE_TOKENIZERS = {
    "default": _DEFAULT,
    "llama3": [_LLAMA3],
    "deepseek-llm": [r"[\r\n]", r"\s?[" + _DEEPSEEK_LETTERS + "]+", r"\s?[!-/:-~\uff01-\uff0f\uff1a-\uff5e\u2018-\u201f\u3000-\u3002]+", r"\s+$",
                     r"[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+", r"\p{N}+"],
    "deepseek-coder": [r"[\r\n]", r"\s?\p{L}+", r"\s?\p{P}+", r"[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+", r"\p{N}"],
    "falcon": [r"[\p{P}\$\+<=>\^~\|`]+", _GPT2, "[0-9][0-9][0-9]"],
    "starcoder": [r"\p{N}", _GPT2],
    "gpt-2": [_GPT2],
    "qwen2": [_QWEN2],
    "qwen35": [_QWEN35],
    "chatglm4": [_LLAMA3],
    "poro-chat": [r" ?[^(\s|.,!?…。，、।۔،)]+"],
    "viking": [r" ?[^(\s|.,!?…。，、।۔،)]+", r"\p{N}"],
    "seed-coder": [_CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+"],
    "minicpm5": [r"\p{N}{1,3}", _CONTRACTIONS
                 + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}+| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"],
    "gemma4": [r"[^\n]+|[\n]+"],
    # o200k (gpt-oss): tokenizer.json's upper/lower letter classes as llama.cpp rewrites them (a letter
    # not in a-z, a letter not in A-Z)
    "gpt-4o": [r"[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+" + _CONTRACTIONS + "?"
               r"|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*" + _CONTRACTIONS + "?"
               r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"],
}
_PRE_ALIASES = {
    "llama3": ["llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano",
               "dbrx", "smaug-bpe"],
    "starcoder": ["refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b", "mellum2"],
    "gpt-2": ["phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0", "mellum",
              "modern-bert", "mpt", "olmo", "jais", "trillion", "granite-docling", "jina-v1-en", "jina-v2-code",
              "roberta-bpe"],
    "qwen2": ["deepseek-r1-qwen", "kormo", "f2llmv2", "stablelm2", "hunyuan", "solar-open", "grok-2"],
    "poro-chat": ["bloom", "gpt3-finnish"],
    "gemma4": ["granite-embed-multi-311m"],
    "gpt-4o": ["minimax-m2"],
}
# llama.cpp settings per pre-tokenizer (llama_vocab::impl::load): ignore_merges (a word that is a
# token is taken whole), no clean_spaces (detokenize's " ." fix-ups, on for other BPE vocabularies),
# add_bos
_IGNORE_MERGES = {"minicpm5", "llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2",
                  "jina-v5-nano", "youtu", "glm4", "glm5", "tekken", "granite-embed-multi-97m"}
_NO_CLEAN_SPACES = {
    "deepseek-llm", "deepseek-coder", "deepseek-v3", "spark2_5", "youtu", "sarvam-moe", "command-r", "qwen2",
    "deepseek-r1-qwen", "kormo", "f2llmv2", "qwen35", "poro-chat", "viking", "tekken", "smollm", "chameleon", "gpt-4o",
    "llama4", "kanana2", "talkie", "granite-embed-multi-97m", "tiny_aya", "cohere2moe", "superbpe", "trillion",
    "granite-docling", "bailingmoe", "bailingmoe2", "llada-moe", "seed-coder", "hunyuan", "hunyuan-dense", "hy_v4",
    "joyai-llm", "kimi-k2", "ufakzeka", "grok-2", "afmoe", "laguna", "minimax-m2", "solar-open"}
_ADD_BOS = {"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano",
            "tekken", "chameleon"}


def _pre_regexes(pre):
    for name, aliases in _PRE_ALIASES.items():
        if pre in aliases:
            return PRE_TOKENIZERS[name]
    if pre not in PRE_TOKENIZERS:
        raise ValueError(f"tokenizer.ggml.pre {pre!r} is not supported; supported: "
                         f"{', '.join(sorted([*PRE_TOKENIZERS, *(a for v in _PRE_ALIASES.values() for a in v)]))}")
    return PRE_TOKENIZERS[pre]


class _PreTokenizer:
    """A BPE vocabulary's pre-tokenizer: text -> words (unicode_regex_split)."""

    def __init__(self, regexes):
        self.splits = [_Split(r) for r in regexes]
        self.need_collapse = any(s.collapsed for s in self.splits)

    def __call__(self, text):
        pieces = [(0, len(text))]
        collapsed = _collapse(text) if self.need_collapse else None
        plain = None
        for s in self.splits:
            if s.collapsed:
                src = collapsed
            else:
                if plain is None:           # non-ASCII whitespace as \v, as llama.cpp gives std::wregex
                    cps = _codepoints(text).copy()
                    cps[(cps > 127) & ((_flags()[cps] & F_WHITESPACE) != 0)] = 0x0B
                    plain = cps.tobytes().decode("utf-32-le")
                src = plain
            if len(self.splits) == 1 and not s.rx.groups:
                # one regex: its matches as strings; when they tile the text (no gaps: the usual
                # case), the words are the text cut at their lengths (src has text's code points),
                # or the matches themselves where src is the text (ASCII text)
                found = s.rx.findall(src)
                if src == text:
                    if sum(map(len, found)) == len(text):
                        return found
                else:
                    ends = list(itertools.accumulate(map(len, found)))
                    if not ends or ends[-1] == len(text):
                        return [text[a:b] for a, b in zip([0, *ends], ends)]
            pieces = s.split(src, pieces)
        return [text[s:e] for s, e in pieces]


# ---------------------------------------------------------------------------------------------------
# GPT-2's byte-level alphabet


@functools.cache
def _byte_alphabet():
    """byte -> character: printable bytes stand for themselves, the others for 256 + their rank."""
    printable = {*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)}
    chars, extra = {}, 0
    for b in range(256):
        if b in printable:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + extra)
            extra += 1
    return chars


# ---------------------------------------------------------------------------------------------------


def _lib(name):
    try:
        return __import__(name)
    except ImportError:
        return None


def from_gguf(f):
    """A Tokenizer for the vocabulary of a GGUFFile, or None when the file has no vocabulary or the
    optional libraries (tokenizers, regex) are not installed. ValueError for a vocabulary type or
    pre-tokenizer that pyggml does not implement (the message lists the supported ones)."""
    md = f.metadata
    if "tokenizer.ggml.tokens" not in md:
        return None
    if _lib("tokenizers") is None or _lib("regex") is None:
        return None
    try:
        return Tokenizer(md)
    except ValueError as e:
        raise ValueError(f"{f.path}: {e}") from None


class Tokenizer:
    """llama.cpp's tokenizer for a GGUF vocabulary, from its metadata dict (from_gguf).

    Attributes: kind (tokenizer.ggml.model: "llama", "gpt2", "gemma4", "bert", "t5"), pre (the BPE
    pre-tokenizer), n_vocab, tokens, attrs (llama.cpp's token attributes, A_* bits), bos_id, eos_id,
    sep_id, unk_id (None when absent), add_bos, add_eos, add_sep."""

    def __init__(self, md):
        def key(name, default=None):
            return md.get(f"tokenizer.ggml.{name}", default)

        kind = key("model")
        self.kind = kind
        self.tokens = list(key("tokens"))
        n = len(self.tokens)
        types = key("token_type") or [_NORMAL] * n
        self.scores = key("scores")
        if len(types) != n or (self.scores is not None and len(self.scores) != n):
            raise ValueError(f"tokenizer.ggml.token_type/scores have {len(types)}/{len(self.scores or [])} entries "
                             f"for {n} tokens")
        self.attrs = [_TYPE_ATTR.get(t, 0) for t in types]
        self.token_to_id = {t: i for i, t in enumerate(self.tokens)}
        defaults = {"llama": (1, 2, 0, None), "bert": (101, None, 100, 102)}.get(kind, (None, None, None, None))
        ids = []
        for name, default in zip(("bos_token_id", "eos_token_id", "unknown_token_id", "seperator_token_id"),
                                 defaults):
            if default is not None and default >= n:
                default = None
            v = key(name, default)
            ids.append(v if v is None or 0 <= v < n else default)
        self.bos_id, self.eos_id, self.unk_id, self.sep_id = ids
        self.pre = key("pre") or "default"
        self.add_space_prefix, self.escape_spaces, self.clean_spaces = False, False, False
        self.add_bos, self.add_eos, self.add_sep = False, False, False
        self.remove_extra_ws = False
        if kind == "llama":
            self.add_space_prefix, self.add_bos, self.escape_spaces = True, True, True
        elif kind in ("gpt2", "gemma4"):
            if kind == "gemma4":
                self.pre = "gemma4"
            self.clean_spaces = self.pre not in _NO_CLEAN_SPACES
            self.escape_spaces = self.pre in ("gemma4", "granite-embed-multi-311m")
            self.add_bos = self.pre in _ADD_BOS
            self.add_sep = self.pre in ("jina-v1-en", "jina-v2-code", "roberta-bpe")
        elif kind == "bert":
            self.clean_spaces, self.add_bos, self.add_sep = True, True, True
        elif kind == "t5":
            self.add_eos, self.escape_spaces = True, True
        else:
            raise ValueError(f"tokenizer.ggml.model {kind!r} is not supported; supported: llama (SPM), gpt2 (BPE), "
                             f"gemma4, bert (WPM), t5 (UGM)")
        self.add_space_prefix = key("add_space_prefix", self.add_space_prefix)
        self.remove_extra_ws = key("remove_extra_whitespaces", False)
        self.add_bos = key("add_bos_token", self.add_bos)
        self.add_eos = key("add_eos_token", self.add_eos)
        self.add_sep = key("add_sep_token", self.add_sep)
        if kind == "gemma4":
            self.add_bos = True
        self.lowercase = key("normalizer.lowercase", True)
        self.strip_accents = key("normalizer.strip_accents", self.lowercase)
        self._mark_special_by_text(md)
        # the special-token split: CONTROL, USER_DEFINED and UNKNOWN tokens, longest first
        special = [i for i, a in enumerate(self.attrs) if a & (A_CONTROL | A_USER_DEFINED | A_UNKNOWN)]
        special.sort(key=lambda i: -len(self.tokens[i].encode()))
        self._special = [(i, self.tokens[i]) for i in special if self.tokens[i]]
        self._special_starts = {tok[:2] for _, tok in self._special}
        self._pieces = [None] * n
        self._word_ids = {}
        if kind in ("gpt2", "gemma4"):
            self._pretok = _PreTokenizer(_pre_regexes(self.pre))
            self._bpe = self._build_bpe(key("merges") or [], byte_level=kind == "gpt2" and not self.escape_spaces)
        elif kind == "llama":
            self._bpe = self._build_spm()
            # words that no token crosses: cut before each "▁" that follows another character,
            # when no token has such a "▁" inside (then SPM's merges never join two words)
            self._spm_words = not any(_SPM_CROSS.search(t) for t in self.token_to_id)
        elif kind == "bert":
            self._max_len = max((len(t) for t in self.tokens), default=0)
        elif kind == "t5":
            self._build_ugm(key("precompiled_charsmap"))

    # -- special tokens ------------------------------------------------------------------------------

    _FORCED_CONTROL = ("<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
                       "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
                       "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
                       "<｜end▁of▁sentence｜>", "[e~[")
    _FIM = (("<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>", "<|code_prefix|>",
             "<|prefix|>"),
            ("<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>", "<|code_suffix|>",
             "<|suffix|>"),
            ("<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>", "<|code_middle|>",
             "<|middle|>"),
            ("<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"),
            ("<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"),
            ("<|file_sep|>",))

    def _mark_special_by_text(self, md):
        """llama.cpp's load-time fix-ups of token attributes by token text (llama_vocab::impl::load):
        end-of-generation and fill-in-the-middle tokens become CONTROL, and per-model lstrip/rstrip."""
        t2i = self.token_to_id

        def control(i):
            self.attrs[i] |= A_CONTROL
        for group in ((("<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
                        "<EOT>", "_<EOT>", "[EOT]", "<｜end▁of▁sentence｜>", "<end_of_utterance>"),), self._FIM):
            for names in group:
                found = [t2i[s] for s in names if s in t2i]
                if found:
                    control(min(found))
        if "<|eom_id|>" in t2i:
            control(t2i["<|eom_id|>"])
        for s in self._FORCED_CONTROL:
            if s in t2i:
                control(t2i[s])
        for s in ("<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"):
            if s in t2i:
                self.attrs[t2i[s]] = A_USER_DEFINED
        for i, a in enumerate(self.attrs):
            if a & A_CONTROL and "unused" in self.tokens[i]:
                self.attrs[i] |= A_UNUSED
        if "</s>" in t2i and ("<|tool_response>" in t2i or "<|plamo:eos|>" in t2i):
            self.attrs[t2i["</s>"]] = A_NORMAL
        name = str(md.get("general.name", "")).lower()
        arch = str(md.get("general.architecture", ""))
        if any(s in self.pre for s in ("jina-v2-de", "jina-v2-es", "jina-v2-code")) or \
                any(s in arch for s in ("nomic-bert-moe", "jina-bert-v3")):
            if "<mask>" in t2i:
                self.attrs[t2i["<mask>"]] |= A_LSTRIP
        elif "phi-3" in name or "phi3" in name:
            for i, a in enumerate(self.attrs):
                if a & (A_CONTROL | A_USER_DEFINED | A_UNKNOWN):
                    self.attrs[i] |= A_RSTRIP
            if "</s>" in t2i:
                self.attrs[t2i["</s>"]] |= A_RSTRIP
            for s in ("<unk>", "<s>", "<|endoftext|>"):
                if s in t2i:
                    self.attrs[t2i[s]] &= ~A_RSTRIP
        elif "modern-bert" in name and "[MASK]" in t2i:
            self.attrs[t2i["[MASK]"]] |= A_LSTRIP

    def _partition(self, text, parse_special):
        """text -> a list of str (raw text) and int (special token) fragments (tokenizer_st_partition)."""
        frags = [text] if text else []
        # a token whose first two characters are not in the text is not in it (one search per
        # distinct start instead of one per token: vocabularies have hundreds of "<|...|>" tokens)
        present = {p for p in self._special_starts if p in text}
        for tid, tok in self._special:
            attr = self.attrs[tid]
            if not parse_special and attr & (A_CONTROL | A_UNKNOWN):
                continue
            if tok[:2] not in present or not any(isinstance(f, str) and tok in f for f in frags):
                continue
            out = []
            for f in frags:
                if not isinstance(f, str) or tok not in f:
                    out.append(f)
                    continue
                rest = f
                while True:
                    at = rest.find(tok)
                    if at < 0:
                        if rest:
                            out.append(rest)
                        break
                    left = rest[:at]
                    if attr & A_LSTRIP:
                        left = left.rstrip(_C_SPACE)
                    if left:
                        out.append(left)
                    out.append(tid)
                    rest = rest[at + len(tok):]
                    if attr & A_RSTRIP:
                        rest = rest.lstrip(_C_SPACE)
                    if not rest:
                        break
            frags = out
        return frags

    # -- encode ----------------------------------------------------------------------------------------

    @property
    def n_vocab(self):
        return len(self.tokens)

    def encode(self, text, add_bos=True, parse_special=True, add_special=None):
        """Token ids of `text`, as llama_tokenize(text, add_special, parse_special).

        add_special (default: add_bos) adds what the vocabulary asks for: BOS (SPM, some BPE), EOS
        (T5), CLS/SEP (BERT). parse_special matches control tokens written in the text whole;
        user-defined tokens are always matched."""
        if not isinstance(text, str):
            raise TypeError(f"encode: text must be str, got {type(text).__name__}")
        add = add_bos if add_special is None else add_special
        out = []
        if add and (self.add_bos or self.kind == "bert"):
            if self.bos_id is None:
                raise ValueError("encode: the vocabulary asks for BOS but has no tokenizer.ggml.bos_token_id")
            out.append(self.bos_id)
        prev_special = True
        for frag in self._partition(text, parse_special):
            if isinstance(frag, int):
                out.append(frag)
                prev_special = True
                continue
            if self.kind == "llama":
                if self.add_space_prefix and prev_special:
                    frag = " " + frag
                frag = frag.replace(" ", _SPACE)
                out.extend(self._bpe_words(_SPM_WORD.findall(frag)) if self._spm_words else self._bpe.encode(frag).ids)
            elif self.kind in ("gpt2", "gemma4"):
                self._encode_bpe(frag, out)
            elif self.kind == "bert":
                self._encode_wpm(frag, out)
            else:
                self._encode_ugm(frag, out)
            prev_special = False
        if add:
            if self.kind == "bert":
                if self.sep_id is None:
                    raise ValueError("encode: the vocabulary has no tokenizer.ggml.seperator_token_id")
                out.append(self.sep_id)
            elif self.add_eos:
                if self.eos_id is None:
                    raise ValueError("encode: the vocabulary asks for EOS but has no tokenizer.ggml.eos_token_id")
                out.append(self.eos_id)
        return out

    # -- BPE -------------------------------------------------------------------------------------------

    def _build_bpe(self, merges, byte_level):
        from tokenizers import Tokenizer as HFTokenizer
        from tokenizers import models, pre_tokenizers
        vocab = self.token_to_id
        pairs, seen = [], set()
        for m in merges:
            at = m.find(" ", 1)
            if at < 0:
                continue
            a, b = m[:at], m[at + 1:]
            if (a, b) in seen or a not in vocab or b not in vocab or a + b not in vocab:
                continue
            seen.add((a, b))
            pairs.append((a, b))
        model = models.BPE(vocab, pairs, ignore_merges=self.pre in _IGNORE_MERGES, byte_fallback=not byte_level)
        tok = HFTokenizer(model)
        # bytes whose character is not a token: llama.cpp keeps them as symbols that merge with
        # nothing and then drops them, so they split the word
        alphabet = _byte_alphabet()
        missing = [b for b in range(256) if alphabet[b] not in vocab] if byte_level else []
        self._byte_split = None
        if missing:
            self._byte_map = {b: alphabet[b] for b in range(256)}
            self._byte_split = re.compile("[{}]+".format("".join(re.escape(alphabet[b]) for b in missing)))
        elif byte_level:
            tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
        return tok

    def _encode_bpe(self, text, out):
        if self.escape_spaces:
            text = text.replace(" ", _SPACE)
        words = self._pretok(text)
        if not words:
            return
        if self.pre == "gemma4":
            # a run of newlines that is a token is taken whole (llm_tokenizer_bpe_session)
            start = 0
            for k, w in enumerate(words):
                if w[0] == "\n" and w in self.token_to_id:
                    if k > start:
                        out.extend(self._bpe_words(words[start:k]))
                    out.append(self.token_to_id[w])
                    start = k + 1
            words = words[start:]
            if not words:
                return
        if self._byte_split is not None:
            words = [p for w in words for p in self._byte_split.split(w.encode().decode("latin-1").translate(
                self._byte_map)) if p]
            if not words:
                return
        out.extend(self._bpe_words(words))

    def _bpe_words(self, words):
        """The ids of BPE words (each encoded on its own, as llama.cpp does), through a cache of
        the words seen before: text repeats its words, and one call of the tokenizers library for
        the new ones costs less than passing every word to it again. The cache is emptied when it
        holds _WORD_CACHE words; this call reads its own copy, so another thread emptying it does
        no harm."""
        cache = self._word_ids
        ids = {w: cache.get(w) for w in dict.fromkeys(words)}
        new = [w for w, v in ids.items() if v is None]
        if new:
            if len(cache) + len(new) > _WORD_CACHE:
                cache.clear()
            enc = self._bpe.encode(new, is_pretokenized=True)
            flat = enc.ids
            # each new word's ids: the run of its index in word_ids (non-decreasing; none for "")
            bounds = np.searchsorted(np.asarray(enc.word_ids, np.int64), np.arange(len(new) + 1)).tolist()
            for w, a, b in zip(new, bounds, bounds[1:]):
                ids[w] = cache[w] = flat[a:b]
        return list(itertools.chain.from_iterable(map(ids.__getitem__, words)))

    # -- SPM -------------------------------------------------------------------------------------------

    def _build_spm(self):
        """llama.cpp's SPM tokenizer merges the adjacent pair whose concatenation is the best-scoring
        token, first at the left: a BPE whose merges are every (a, b) with a, b and a+b tokens,
        ranked by the score of a+b; single characters without a token fall back to <0xXX> tokens."""
        from tokenizers import Tokenizer as HFTokenizer
        from tokenizers import models
        if self.scores is None:
            raise ValueError("an SPM vocabulary needs tokenizer.ggml.scores")
        vocab, scores = self.token_to_id, self.scores
        merges = []
        for tok, i in vocab.items():
            for k in range(1, len(tok)):
                a, b = tok[:k], tok[k:]
                if a in vocab and b in vocab:
                    merges.append((-scores[i], i, k, a, b))
        merges.sort()
        return HFTokenizer(models.BPE(vocab, [(a, b) for *_, a, b in merges], byte_fallback=True))

    # -- WPM -------------------------------------------------------------------------------------------

    def _wpm_words(self, text):
        """BERT's normalisation and split (llm_tokenizer_wpm_session::preprocess)."""
        flags = _flags()
        strip = self.strip_accents
        words, cur = [], []
        for ch in text:
            cp = ord(ch)
            if strip:
                ch = _nfd_first(ch)
                cp = ord(ch)
            f = int(flags[cp])
            if f & F_WHITESPACE:
                if cur:
                    words.append("".join(cur))
                    cur = []
                continue
            if cp == 0 or cp == 0xFFFD or f & F_CONTROL:
                continue
            if strip and f & F_MARK:
                continue
            if self.lowercase:
                ch = _simple_lower(ch)
            if f & F_PUNCT or (cp < 0x7F and f & F_SYMBOL) or _is_chinese(cp):
                if cur:
                    words.append("".join(cur))
                    cur = []
                words.append(ch)
            else:
                cur.append(ch)
        if cur:
            words.append("".join(cur))
        return words

    def _encode_wpm(self, text, out):
        vocab, longest = self.token_to_id, self._max_len
        for word in self._wpm_words(text):
            w = _SPACE + word
            n, i, ids = len(w), 0, []
            while i < n:
                for j in range(min(n, i + longest), i, -1):
                    tid = vocab.get(w[i:j])
                    if tid is not None:
                        ids.append(tid)
                        i = j
                        break
                else:
                    ids = []
                    break
            out.extend(ids if ids else [self.unk_id])

    # -- UGM -------------------------------------------------------------------------------------------

    def _build_ugm(self, charsmap):
        normal = [i for i, a in enumerate(self.attrs) if a & A_NORMAL]
        scores = self.scores or [0.0] * len(self.tokens)
        self._unk_score = (min(scores[i] for i in normal) if normal else 0.0) - 10.0
        self._ugm_tokens = {}          # text -> id of normal, user-defined and unused tokens
        for i, a in enumerate(self.attrs):
            if a & (A_NORMAL | A_USER_DEFINED | A_UNUSED):
                self._ugm_tokens[self.tokens[i]] = i
        self._ugm_max = max((len(t) for t in self._ugm_tokens), default=1)
        self._user_defined = sorted({self.tokens[i] for i, a in enumerate(self.attrs) if a & A_USER_DEFINED},
                                    key=len, reverse=True)
        self._charsmap = None
        if charsmap:
            blob = bytes(np.asarray(charsmap, np.uint8)) if not isinstance(charsmap, (bytes, bytearray)) else bytes(charsmap)
            size = int.from_bytes(blob[:4], "little")
            if size % 4 or 4 + size > len(blob):
                raise ValueError("tokenizer.ggml.precompiled_charsmap is malformed")
            self._charsmap = (np.frombuffer(blob[4:4 + size], "<u4").tolist(), blob[4 + size:])

    def _charsmap_prefix(self, data, at):
        """(replacement bytes, bytes consumed) of the longest charsmap entry at data[at:], or None."""
        units, repl = self._charsmap
        node = _xcda_base(units[0])
        best = None
        for k in range(at, len(data)):
            c = data[k]
            if c == 0:
                break
            node ^= c
            if node >= len(units) or (units[node] & ((1 << 31) | 0xFF)) != c:
                break
            leaf = (units[node] >> 8) & 1
            node ^= _xcda_base(units[node])
            if leaf:
                if node >= len(units):
                    raise ValueError("tokenizer.ggml.precompiled_charsmap is malformed")
                best = (units[node] & ((1 << 31) - 1), k - at + 1)
        if best is None:
            return None
        off, length = best
        end = repl.find(b"\0", off)
        if off >= len(repl) or end < 0:
            raise ValueError("tokenizer.ggml.precompiled_charsmap is malformed")
        return repl[off:end], length

    def _ugm_normalize(self, text):
        data = text.encode()
        space = _SPACE.encode() if self.escape_spaces else b" "
        merge = self.remove_extra_ws
        prepend = self.add_space_prefix
        out = bytearray()
        prepended = non_ws = False
        at = 0
        user = self._user_defined
        while at < len(data):
            piece = None
            for u in user:
                ub = u.encode()
                if ub and data.startswith(ub, at):
                    piece, used = ub, len(ub)
                    break
            if piece is None and self._charsmap is not None:
                found = self._charsmap_prefix(data, at)
                if found:
                    piece, used = found
            if piece is None:
                used = _utf8_len(data[at])
                piece = data[at:at + used]
            for c in piece:
                if c != 0x20:
                    if not non_ws:
                        non_ws = True
                        if (prepend and not prepended) or merge:
                            out += space
                            prepended = True
                    out.append(c)
                else:
                    non_ws = False
                    if not merge:
                        out += space
            at += used
        return bytes(out).decode("utf-8", errors="replace")

    def _encode_ugm(self, text, out):
        """Viterbi over the token scores (llm_tokenizer_ugm_session), by code point: a position without
        a one-character token takes UNK with the lowest score less 10; runs of UNK become one."""
        norm = self._ugm_normalize(text)
        n = len(norm)
        if n == 0:
            return
        vocab, scores, attrs = self._ugm_tokens, self.scores, self.attrs
        best = [(-float("inf"), 0, self.unk_id)] * (n + 1)
        best[0] = (0.0, 0, self.unk_id)
        longest = self._ugm_max
        for i in range(n):
            base = best[i][0]
            single = False
            for j in range(i + 1, min(n, i + longest) + 1):
                tid = vocab.get(norm[i:j])
                if tid is None:
                    continue
                if j == i + 1:
                    single = True
                s = base + (0.0 if attrs[tid] & A_USER_DEFINED else scores[tid])
                if s > best[j][0]:
                    best[j] = (s, i, tid)
            if not single:
                s = base + self._unk_score
                if s > best[i + 1][0]:
                    best[i + 1] = (s, i, self.unk_id)
        ids, at, prev_unk = [], n, False
        while True:
            _, start, tid = best[at]
            unk = tid == self.unk_id
            if not (prev_unk and unk):
                ids.append(tid)
            if start == 0:
                break
            prev_unk = unk
            at = start
        out.extend(reversed(ids))

    # -- decode ----------------------------------------------------------------------------------------

    def token_to_bytes(self, token_id, special=False):
        """The bytes of one token as llama_token_to_piece(token, lstrip=0, special): control and
        unknown tokens give their text with special=True and nothing otherwise; user-defined tokens
        their text; a byte token its byte; SPM/WPM/UGM pieces with U+2581 as spaces; byte-level BPE
        tokens their bytes. IndexError outside the vocabulary."""
        token_id = int(token_id)
        if not 0 <= token_id < len(self.tokens):
            raise IndexError(f"token_to_bytes: token id {token_id} is outside the vocabulary of {len(self.tokens)}")
        attr = self.attrs[token_id]
        if not special and attr & (A_CONTROL | A_UNKNOWN):
            return b""
        piece = self._pieces[token_id]
        if piece is None:
            piece = self._pieces[token_id] = self._piece(token_id)
        return piece

    def _piece(self, token_id):
        text, attr = self.tokens[token_id], self.attrs[token_id]
        if attr & (A_CONTROL | A_UNKNOWN | A_USER_DEFINED):
            return text.encode()
        if attr & A_NORMAL:
            if self.kind == "gpt2" and not self.escape_spaces:
                return _byte_decode(text)
            return text.replace(_SPACE, " ").encode()
        if attr & A_BYTE:
            if self.kind == "gpt2" and not self.escape_spaces:
                return _byte_decode(text)[:1]
            return bytes([int(text[3:5], 16)])
        return b""

    def token_to_piece(self, token_id, special=False):
        """token_to_bytes as text (an incomplete UTF-8 sequence shows as U+FFFD; stream() joins them)."""
        return self.token_to_bytes(token_id, special).decode("utf-8", errors="replace")

    def detokenize(self, ids, remove_special=False, unparse_special=False):
        """llama_detokenize: the bytes of the tokens; remove_special drops the BOS/EOS the vocabulary
        adds, unparse_special writes control tokens' text; the leading space SPM adds is removed,
        and some vocabularies clean " ." and similar (clean_spaces)."""
        ids = [int(i) for i in ids]
        remove_space = self.add_space_prefix
        if remove_special and self.add_bos and ids and ids[0] == self.bos_id:
            remove_space = False
            ids = ids[1:]
        if remove_special and self.add_eos and ids and ids[-1] == self.eos_id:
            ids = ids[:-1]
        parts = []
        for i in ids:
            piece = self.token_to_bytes(i, unparse_special)
            if remove_space and piece[:1] == b" ":
                piece = piece[1:]
            remove_space = False
            parts.append(piece)
        out = b"".join(parts)
        if self.clean_spaces:
            out = _clean_spaces(out)
        return out

    def decode(self, ids, special=False):
        """The text of token ids as llama-cpp-python's Llama.detokenize: the tokens' pieces (control
        tokens only with special=True), less the space SPM puts before the text when the ids start
        with BOS."""
        ids = [int(i) for i in ids]
        out = b"".join(self.token_to_bytes(i, special) for i in ids)
        if ids and ids[0] == self.bos_id and out[:1] == b" ":
            out = out[1:]
        return out.decode("utf-8", errors="replace")

    def stream(self, special=False):
        """A StreamDecoder: push(token_id) returns the text that token completes."""
        return StreamDecoder(self, special)


def _clean_spaces(text):
    """detokenize's clean-up (llama_vocab::impl::detokenize), three passes over the bytes: " ?", " !",
    " .", " ," lose the space; " ' " becomes "'"; " 's", " 'm", " 're", " 've" lose the space."""
    b = bytearray(text)
    out = bytearray(b[:1])
    for i in range(1, len(b)):
        if b[i - 1] == 0x20 and b[i] in b"?!.,":
            out.pop()
        out.append(b[i])
    b, out, i = out, bytearray(out[:1]), 1
    while i < len(b):
        x = b[i]
        if x == 0x27 and i + 1 < len(b) and b[i - 1] == 0x20 and b[i + 1] == 0x20:
            out.pop()
            b[i + 1] = 0
            out.append(x)
            i += 2
            continue
        out.append(x)
        i += 1
    b, out = out, bytearray(out[:1])
    for i in range(1, len(b)):
        x = b[i]
        if b[i - 1] == 0x20 and x == 0x27 and i + 1 < len(b):
            x1 = b[i + 1]
            if x1 in b"sm" or (i + 2 < len(b) and b[i + 1:i + 3] in (b"re", b"ve")):
                out.pop()
        out.append(x)
    return bytes(out)


def _byte_decode(text):
    """A byte-level BPE token's bytes (llama_decode_text): a character outside GPT-2's alphabet is
    written as "[UNK_BYTE_0x<its UTF-8 in hex><the token's text>]"."""
    rev = _byte_decoder()
    out = bytearray()
    for c in text:
        b = rev.get(c)
        if b is None:
            out += b"[UNK_BYTE_0x" + c.encode().hex().encode() + text.encode() + b"]"
        else:
            out.append(b)
    return bytes(out)


@functools.cache
def _byte_decoder():
    return {c: b for b, c in _byte_alphabet().items()}


def _xcda_base(unit):
    return (unit >> 10) << ((unit & (1 << 9)) >> 6)


def _utf8_len(first):
    return (1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4)[first >> 4]


def _is_chinese(cp):
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF or 0x2A700 <= cp <= 0x2B73F
            or 0x2B740 <= cp <= 0x2B81F or 0x2B920 <= cp <= 0x2CEAF or 0xF900 <= cp <= 0xFAFF
            or 0x2F800 <= cp <= 0x2FA1F)


@functools.lru_cache(maxsize=4096)
def _nfd_first(ch):
    import unicodedata
    return unicodedata.normalize("NFD", ch)[0]


@functools.lru_cache(maxsize=4096)
def _simple_lower(ch):
    low = ch.lower()
    return low if len(low) == 1 else ("i" if ch == "\u0130" else ch)


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
