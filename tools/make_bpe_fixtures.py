#!/usr/bin/env python3
"""make_bpe_fixtures.py: the expected token ids for tests/data/bpe_tokenizer_test.cpp, from the
reference implementations: Hugging Face `tokenizers` (GPT-2's ByteLevel BPE) and `tiktoken`.

Run by hand (pip's tokenizers and tiktoken); the output is committed, so the tests never need
Python:  python3 tools/make_bpe_fixtures.py
Writes into tests/fixtures/bpe/:
  gpt2_cases.json             hostile strings (as hex) with their ids, ordinary and with <|endoftext|> allowed
  gpt2_tinyshakespeare.json   the ids of data/tinyshakespeare.txt as FNV-1a hashes of 1024-id chunks
  trained_512_ids.json        the ids HF gives a sample with the vocabulary `ampgrad tokenizer train`
                              wrote into trained_512/ (README.md there); its tokenizer.json must give
                              the same ids
GPT-2's vocabulary is tests/fixtures/bpe/gpt2.tiktoken (see README.md there); the HF tokenizer is
built from it (vocab.json + merges.txt rebuilt from the ranks: the Hub is not reachable here).

Invalid UTF-8 (Python strings cannot hold it; ampgrad's rule, docs/tokenizers.md): each byte that is
not part of a valid UTF-8 sequence is one character of class "other" (not \\s, \\p{L}, \\p{N}). The
oracle applies the rule through HF: such bytes become private-use characters (also "other") for HF's
pre-tokenizer, the pieces are mapped back to the original bytes, and HF's BPE model encodes each.
"""
import base64
import json
import pathlib

import tiktoken
import tokenizers
from tokenizers import Tokenizer, decoders, models, pre_tokenizers

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "bpe"
GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
EOT = "<|endoftext|>"


def byte_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


B2U = byte_to_unicode()


def spell(bs: bytes) -> str:
    return "".join(B2U[b] for b in bs)


def load_ranks(path):
    ranks = {}
    for line in path.read_text().splitlines():
        token, rank = line.split()
        ranks[base64.b64decode(token)] = int(rank)
    return ranks


def bpe_parts(ranks, token: bytes, max_rank: int):
    parts = [bytes([b]) for b in token]
    while True:
        best = None
        for i in range(len(parts) - 1):
            r = ranks.get(parts[i] + parts[i + 1])
            if r is not None and r < max_rank and (best is None or r < best[0]):
                best = (r, i)
        if best is None:
            return parts
        i = best[1]
        parts[i:i + 2] = [parts[i] + parts[i + 1]]


def hf_from_ranks(ranks):
    vocab = {spell(t): r for t, r in ranks.items()}
    merges = []
    for token, rank in sorted(ranks.items(), key=lambda kv: kv[1]):
        if len(token) < 2:
            continue
        parts = bpe_parts(ranks, token, rank)
        assert len(parts) == 2, token
        merges.append((spell(parts[0]), spell(parts[1])))
    vocab[EOT] = len(ranks)
    return make_hf(models.BPE(vocab=vocab, merges=merges))


def make_hf(model):
    tok = Tokenizer(model)
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([EOT])
    return tok


def hf_ordinary(tok, data: bytes):
    """HF's pre-tokenizer and BPE model on any bytes, with the invalid-UTF-8 rule above."""
    text = data.decode("utf-8", "surrogateescape")
    stand_in = "".join(chr(0xE000 + ord(c) - 0xDC00) if 0xDC80 <= ord(c) <= 0xDCFF else c for c in text)
    assert not any(0xE080 <= ord(c) <= 0xE0FF for c in text), "the input holds a stand-in character"
    ids = []
    for _, (start, end) in tok.pre_tokenizer.pre_tokenize_str(stand_in):
        piece = text[start:end].encode("utf-8", "surrogateescape")
        ids += [t.id for t in tok.model.tokenize(spell(piece))]
    return ids


def hf_special(tok, data: bytes):
    out = []
    for i, part in enumerate(data.split(EOT.encode())):
        if i > 0:
            out.append(tok.token_to_id(EOT))
        out += hf_ordinary(tok, part)
    return out


def hostile_strings():
    s = [
        "Hello world", " Hello world", "Hello, World! HELLO 123abc abc123 $%^&*() ... --- ==>",
        "👋🏽 hi 🇫🇷 family 👨‍👩‍👧‍👦 ok👍", "Привет мир, γειά σου, こんにちは世界, 안녕하세요",
        "我爱北京天安门。「引用」", "مرحبا بالعالم \u200fשלום עולם\u200e 123",
        "e\u0301 n\u0303 Z\u0324\u0308 a\u0308\u0301 \u0301x \u0301",
        " " * 100 + "x", "\n" * 50, "  \n\n  \t\t x  ", " " * 5000, "a" * 3000, "\n\n\nx\n\n", "x \n y\t\n\tz",
        "\tfoo\t\tbar\t", "don't I'll we've they're she'd I'm it's", "'s's''s 's", "DON'T IT'S", "'S 'T 'Re 'LL",
        "x's", "'", "''", "'s", " 's", "'ss 'lll 'vee", "?'s ''t", "a\x00b\x00\x00 c\x00",
        "12345678901234567890 3.14159 1,000,000 -42", "٣٤٥ ४२ ①②③ ½ Ⅻ ０１２", "hello<|endoftext|>world",
        "<|endoftext|><|endoftext|>", "<|endoftext|", "a <|endoftext|> b", "a\u00a0b\u2003c\u3000d\u2028e\u0085f",
        "\r\n\x0b\x0c\x1c\x1d\x1e\x1f x", "\u00ad\u200b\u2060 soft", "ÀÉÎõü ß ẞ ǅ ﬁ", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝟘𝟙𝟚",
        "tab\t \tspace \t", "end with spaces   ", "  lead", "x" + " " * 60 + "y",
        "~" * 70, "!?" * 40 + "\u2014" * 10,
    ]
    out = [(f"s{i}", t.encode("utf-8")) for i, t in enumerate(s)]
    invalid = [b"\xff", b"abc\x80def", b"\xe2\x82 x", b"\xc3(", b"\xf0\x9f\x98", b" \xff\xfe hello",
               b"\xed\xa0\x80", b"\xc0\xaf", b"'\xffs", b"\xf4\x90\x80\x80", b"a \x80\x80 b\xc3\xa9\xe9t\xe9",
               b"12\xff34", b"\n\xff\n", b" \xf8x", b"hi<|endoftext|>\xfe" + b"\x80" * 60]
    out += [(f"invalid{i}", b) for i, b in enumerate(invalid)]
    return out


def fnv1a64_ids(ids):
    h = 0xCBF29CE484222325
    for i in ids:
        for k in range(4):
            h ^= (i >> (8 * k)) & 0xFF
            h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def write_json(name, obj):
    (OUT / name).write_text(json.dumps(obj, ensure_ascii=True) + "\n")


def main():
    ranks = load_ranks(OUT / "gpt2.tiktoken")
    hf = hf_from_ranks(ranks)
    tk = tiktoken.Encoding("gpt2_local", pat_str=GPT2_PATTERN, mergeable_ranks=ranks, special_tokens={EOT: len(ranks)})
    versions = {"tokenizers": tokenizers.__version__, "tiktoken": tiktoken.__version__}
    cases = []
    for name, data in hostile_strings():
        ordinary, special = hf_ordinary(hf, data), hf_special(hf, data)
        try:
            text = data.decode("utf-8")
            assert ordinary == tk.encode_ordinary(text), name
            assert special == hf.encode(text).ids == tk.encode(text, allowed_special="all"), name
        except UnicodeDecodeError:
            pass
        cases.append({"name": name, "hex": data.hex(), "ids": ordinary, "ids_allow_special": special})
    write_json("gpt2_cases.json", {"versions": versions, "cases": cases})

    corpus = (ROOT / "data" / "tinyshakespeare.txt").read_text()
    ids = hf.encode(corpus).ids
    assert ids == tk.encode_ordinary(corpus)
    chunk = 1024
    write_json("gpt2_tinyshakespeare.json", {
        "versions": versions, "num_ids": len(ids), "chunk": chunk, "first_ids": ids[:64],
        "chunk_fnv1a64": [fnv1a64_ids(ids[i:i + chunk]) for i in range(0, len(ids), chunk)]})

    trained = OUT / "trained_512"
    if (trained / "vocab.json").exists():
        tok = make_hf(models.BPE.from_file(str(trained / "vocab.json"), str(trained / "merges.txt")))
        sample = corpus[20000:23000] + "\nIt's 2026: naïve café, 東京, 👋 <|endoftext|> fin.\n"
        one_file = Tokenizer.from_file(str(trained / "tokenizer.json"))
        assert one_file.encode(sample).ids == tok.encode(sample).ids
        assert one_file.decode(one_file.encode(sample).ids, skip_special_tokens=False) == sample
        write_json("trained_512_ids.json", {"versions": versions, "sample": sample,
                                            "ids_allow_special": tok.encode(sample).ids})
    print(f"wrote {len(cases)} cases, {len(ids)} Tiny Shakespeare ids")


if __name__ == "__main__":
    main()
