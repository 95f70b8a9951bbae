// bpe_tokenizer_test.cpp: data/bpe_tokenizer: GPT-2's byte-level BPE against Hugging Face
// `tokenizers` and tiktoken (ids in tests/fixtures/bpe/, from tools/make_bpe_fixtures.py), on
// hostile strings and the whole of Tiny Shakespeare; exact round trips on any bytes; the file
// formats and their errors.
#include <doctest/doctest.h>

#include <random>

#include "tests/data/bpe_fixtures.hpp"
#include "tests/support/corrupt_inputs.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;
namespace fs = std::filesystem;

namespace {

std::string fnv1a64(std::span<const int32_t> ids) {
    uint64_t h = 0xCBF29CE484222325ull;
    for (int32_t id : ids)
        for (int k = 0; k < 4; ++k) {
            h ^= (static_cast<uint32_t>(id) >> (8 * k)) & 0xFF;
            h *= 0x100000001B3ull;
        }
    return fmt::format("{:016x}", h);
}

template <typename E>
void check_throws_naming(const std::function<void()>& fn, const std::vector<std::string>& facts) {
    try {
        fn();
        FAIL("no exception");
    } catch (const E& e) {
        const std::string message = e.what();
        CAPTURE(message);
        for (const std::string& fact : facts) CHECK(message.find(fact) != std::string::npos);
    }
}

}  // namespace

TEST_CASE("GPT-2's byte map: printable bytes keep their code point, the others follow from U+0100") {
    const auto& map = data::gpt2_byte_to_unicode();
    CHECK(map['A'] == 'A');
    CHECK(map[' '] == 0x120);   // 'Ġ'
    CHECK(map['\n'] == 0x10A);  // 'Ċ'
    CHECK(map[0] == 0x100);
    CHECK(map[0xAD] == 0x143);  // the soft hyphen is the last unprintable byte
    CHECK(data::gpt2_bytes_to_unicode(" the") == "\xc4\xa0the");
}

TEST_CASE("GPT-2 from tiktoken's ranks: the documented test vectors") {
    const data::BpeTokenizer& gpt2 = gpt2_tokenizer();
    CHECK(gpt2.vocab_size() == 50257);
    CHECK(gpt2.eot_token() == 50256);
    CHECK(gpt2.merge_count() == 50000);
    CHECK(gpt2.encode("Hello world") == std::vector<int32_t>{15496, 995});
    CHECK(gpt2.encode(" Hello world") == std::vector<int32_t>{18435, 995});
    CHECK(gpt2.encode("a<|endoftext|>", /*allow_special=*/true) == std::vector<int32_t>{64, 50256});
    CHECK(gpt2.encode("a<|endoftext|>").size() > 2);   // not allowed: plain text
    CHECK(gpt2.encode("").empty());
    CHECK(gpt2.decode(std::vector<int32_t>{15496, 995}) == "Hello world");
    CHECK_THROWS_AS(gpt2.decode(std::vector<int32_t>{50257}), IndexError);
    CHECK_THROWS_AS(gpt2.decode(std::vector<int32_t>{-1}), IndexError);
}

TEST_CASE("hostile strings: token for token as Hugging Face tokenizers and tiktoken, and back") {
    const data::BpeTokenizer& gpt2 = gpt2_tokenizer();
    const nlohmann::json fixture = load_bpe_fixture("gpt2_cases.json");
    REQUIRE(fixture.at("cases").size() >= 50);
    for (const auto& c : fixture.at("cases")) {
        const std::string text = from_hex(c.at("hex").get<std::string>());
        CAPTURE(c.at("name").get<std::string>());
        const std::vector<int32_t> ordinary = gpt2.encode(text), special = gpt2.encode(text, true);
        CHECK(ordinary == c.at("ids").get<std::vector<int32_t>>());
        CHECK(special == c.at("ids_allow_special").get<std::vector<int32_t>>());
        CHECK(gpt2.decode(ordinary) == text);
        CHECK(gpt2.decode(special) == text);
    }
}

TEST_CASE("the whole of Tiny Shakespeare: token for token as Hugging Face tokenizers and tiktoken") {
    const data::BpeTokenizer& gpt2 = gpt2_tokenizer();
    const nlohmann::json fixture = load_bpe_fixture("gpt2_tinyshakespeare.json");
    const std::string_view corpus = data::tiny_shakespeare();
    const std::vector<int32_t> ids = gpt2.encode(corpus);
    REQUIRE(static_cast<int64_t>(ids.size()) == fixture.at("num_ids").get<int64_t>());
    const std::vector<int32_t> first = fixture.at("first_ids").get<std::vector<int32_t>>();
    CHECK(std::equal(first.begin(), first.end(), ids.begin()));
    const size_t chunk = fixture.at("chunk").get<size_t>();
    const auto& hashes = fixture.at("chunk_fnv1a64");
    int mismatched = 0;
    for (size_t i = 0, k = 0; i < ids.size(); i += chunk, ++k) {
        const std::span<const int32_t> part(ids.data() + i, std::min(chunk, ids.size() - i));
        if (fnv1a64(part) != hashes.at(k).get<std::string>() && mismatched++ == 0)
            FAIL_CHECK("ids " << i << ".." << i + part.size() << " differ; their text: " << gpt2.decode(part));
    }
    CHECK(mismatched == 0);
    CHECK(gpt2.decode(ids) == corpus);
}

TEST_CASE("encode and decode are exact inverses on random bytes (invalid UTF-8 included)") {
    const data::BpeTokenizer& gpt2 = gpt2_tokenizer();
    std::mt19937 rng(26);
    const std::string alphabet = std::string("ab 's\n\t<|endoftext|>\x80\xff\xc3\xa9\xe2\x82\xac\xf0\x9f") + '\0';   // 29 bytes + NUL
    for (int trial = 0; trial < 300; ++trial) {
        std::string s(rng() % 200, ' ');
        for (char& ch : s) ch = trial % 2 ? static_cast<char>(rng() & 0xFF) : alphabet[rng() % alphabet.size()];
        CAPTURE(trial);
        CHECK(gpt2.decode(gpt2.encode(s)) == s);
        CHECK(gpt2.decode(gpt2.encode(s, true)) == s);
    }
}

TEST_CASE("vocab.json + merges.txt: written from the ranks, read back as the same tokenizer") {
    const data::BpeTokenizer& gpt2 = gpt2_tokenizer();
    const fs::path dir = bpe_temp_dir("hf");
    write_bytes(dir / "vocab.json", gpt2.vocab_json());
    write_bytes(dir / "merges.txt", gpt2.merges_txt());
    const data::BpeTokenizer hf = data::BpeTokenizer::from_hf_dir(dir.string());
    CHECK(hf.vocab_size() == 50257);
    CHECK(hf.eot_token() == 50256);
    CHECK(hf.token_strings() == gpt2.token_strings());
    CHECK(hf.merge_strings() == gpt2.merge_strings());
    CHECK(hf.merge_strings().front() == std::pair<std::string, std::string>{"\xc4\xa0", "t"});   // "Ġ t", GPT-2's first
    const std::string_view some = data::tiny_shakespeare().substr(0, 20000);
    CHECK(hf.encode(some) == gpt2.encode(some));
    const auto copy = data::BpeTokenizer::from_tokens(gpt2.token_strings(), gpt2.merge_strings(), "copy");
    CHECK(copy.encode(some) == gpt2.encode(some));
    fs::remove_all(dir);
}

TEST_CASE("bad tokenizer files: typed errors naming the file and the line") {
    const fs::path dir = bpe_temp_dir("bad");
    const std::string vocab = (dir / "vocab.json").string(), merges = (dir / "merges.txt").string();
    const data::BpeTokenizer& gpt2 = gpt2_tokenizer();
    check_throws_naming<IOError>([&] { data::BpeTokenizer::from_hf_dir(dir.string()); }, {vocab, "no such file"});
    check_throws_naming<IOError>([&] { data::BpeTokenizer::from_tiktoken((dir / "none").string()); }, {"none"});

    write_bytes(dir / "vocab.json", "{\"a\": 0,\n \"b\": 1,\n \"c\" 2}");
    write_bytes(dir / "merges.txt", "#version: 0.2\n");
    check_throws_naming<FormatError>([&] { data::BpeTokenizer::from_hf_dir(dir.string()); },
                                     {vocab, "line 3", "not valid JSON"});
    write_bytes(dir / "vocab.json", "{\"a\": 0,\n \"b\": \"one\"}");
    check_throws_naming<FormatError>([&] { data::BpeTokenizer::from_hf_dir(dir.string()); }, {vocab, "line 2", "\"b\""});

    write_bytes(dir / "vocab.json", gpt2.vocab_json());
    write_bytes(dir / "merges.txt", "#version: 0.2\n\xc4\xa0 t\nh e\nzqzqzq t\n");
    check_throws_naming<FormatError>([&] { data::BpeTokenizer::from_hf_dir(dir.string()); },
                                     {merges, "line 4", "\"zqzqzq\"", "not in vocab.json"});
    write_bytes(dir / "merges.txt", "#version: 0.2\nh e x\n");
    check_throws_naming<FormatError>([&] { data::BpeTokenizer::from_hf_dir(dir.string()); }, {merges, "line 2"});
    write_bytes(dir / "vocab.json", "{\"a\": 0}");
    write_bytes(dir / "merges.txt", "");
    check_throws_naming<FormatError>([&] { data::BpeTokenizer::from_hf_dir(dir.string()); }, {vocab, "0x00"});

    const std::string ranks = (dir / "bad.tiktoken").string();
    write_bytes(ranks, "IQ== 0\nIg== 1\nI*== 2\n");
    check_throws_naming<FormatError>([&] { data::BpeTokenizer::from_tiktoken(ranks); }, {ranks, "line 3", "base64"});
    write_bytes(ranks, "IQ== 0\nIg== 0\n");
    check_throws_naming<FormatError>([&] { data::BpeTokenizer::from_tiktoken(ranks); }, {ranks, "line 2", "rank"});
    write_bytes(ranks, "IQ== 0\nIg==\n");
    check_throws_naming<FormatError>([&] { data::BpeTokenizer::from_tiktoken(ranks); }, {ranks, "line 2"});
    fs::remove_all(dir);
}

TEST_CASE("GPT-2 pre-tokenization: the regex's alternatives, in order") {
    using V = std::vector<std::string_view>;
    CHECK(data::gpt2_pretokenize("Hello world!") == V{"Hello", " world", "!"});
    CHECK(data::gpt2_pretokenize("don't  stop\n\nnow") == V{"don", "'t", " ", " stop", "\n", "\n", "now"});
    CHECK(data::gpt2_pretokenize("x   ") == V{"x", "   "});
    CHECK(data::gpt2_pretokenize("\tx") == V{"\t", "x"});
    CHECK(data::gpt2_pretokenize("a1 22 ?!'s") == V{"a", "1", " 22", " ?!'", "s"});
    CHECK(data::gpt2_pretokenize("\xff\xfe a") == V{"\xff\xfe", " a"});   // invalid bytes: "other" characters
    CHECK(data::gpt2_pretokenize("caf\xc3\xa9\xe2\x80\x83x") == V{"caf\xc3\xa9", "\xe2\x80\x83", "x"});   // U+2003 em space
    CHECK(data::char_class(0x4E2D) == data::CharClass::kLetter);   // 中
    CHECK(data::char_class(0x0663) == data::CharClass::kNumber);   // Arabic-Indic three
    CHECK(data::char_class(0x3000) == data::CharClass::kSpace);
    CHECK(data::char_class(0x1F600) == data::CharClass::kOther);   // emoji
}

TEST_CASE("data::Tokenizer holds a BPE: the command's tokenizer, <|endoftext|> allowed") {
    const auto bpe = std::make_shared<data::BpeTokenizer>(gpt2_tokenizer());
    const data::Tokenizer tok = data::Tokenizer::from_bpe(bpe);
    CHECK(tok.kind() == data::Tokenizer::Kind::kBpe);
    CHECK(std::string(tok.kind_name()) == "bpe");
    CHECK(tok.vocab_size() == 50257);
    CHECK(tok.bpe() == bpe.get());
    CHECK(tok.encode("Hello world<|endoftext|>") == std::vector<int32_t>{15496, 995, 50256});
    CHECK(tok.decode_one(995) == " world");
    CHECK(tok.decode({15496, 995}) == "Hello world");
    CHECK_THROWS_AS(tok.decode_one(50257), IndexError);
    CHECK_THROWS_AS(data::Tokenizer::from_bpe(nullptr), ValueError);
}

TEST_CASE("every corruption of vocab.json or merges.txt is an ampgrad::Error naming the file") {
    // A trained tokenizer's files (tests/fixtures/bpe/trained_512): vocab.json's values retyped or
    // dropped, merges.txt's lines deleted, doubled or replaced by junk.
    const fs::path dir = bpe_temp_dir("corrupt_files");
    fs::copy(fs::path(std::getenv("AMPGRAD_FIXTURES")) / "bpe" / "trained_512", dir, fs::copy_options::recursive);
    auto load = [&] { data::BpeTokenizer::from_hf_dir(dir.string()); };
    const std::string vocab = (dir / "vocab.json").string(), merges = (dir / "merges.txt").string();
    CHECK(check_file_corruptions(vocab, json_corruptions(read_whole_file(vocab), 40), load, "vocab.json") > 40);
    CHECK(check_file_corruptions(merges, line_corruptions(read_whole_file(merges)), load, "merges.txt") > 3);
    fs::remove_all(dir);
}
