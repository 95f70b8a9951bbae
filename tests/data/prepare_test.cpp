// prepare_test.cpp: the pieces of `ampgrad data prepare` (data/prepare.hpp) as a library: the safe
// cut points (encoding a text in pieces gives the ids of encoding it whole), the document reader
// (files, folders, .jsonl and its typed errors), the ordered parallel encoder (the same tokens on
// 1 and 4 threads, errors passed on), the shard filler (names, sizes, --val-tokens) and the char
// tokenizer's first pass. The program end to end is tests/app/data_prepare_test.cpp.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "data/documents.hpp"
#include "data/parallel_encoder.hpp"
#include "data/prepare.hpp"
#include "data/sha256.hpp"
#include "data/shard_filler.hpp"
#include "data/text.hpp"
#include "tests/data/bpe_fixtures.hpp"

using namespace ampgrad;
namespace fs = std::filesystem;
using testing::bpe_temp_dir;
using testing::write_bytes;

namespace {

// Every piece's ids, in order (with [eot] before each document when the tokenizer has one).
std::vector<int32_t> encode_all(const data::Tokenizer& tok, const std::vector<data::InputFile>& files, size_t piece_bytes,
                                int threads = 0) {
    data::DocumentReader reader(files, piece_bytes);
    std::vector<int32_t> out;
    if (threads == 0) {
        for (data::TextPiece p; reader.next(p);) data::encode_piece(tok, p, out);
        return out;
    }
    data::OrderedEncoder enc(tok, threads, 3);
    auto take = [&] {
        const data::EncodedJob j = enc.take();
        out.insert(out.end(), j.tokens.begin(), j.tokens.end());
    };
    for (data::TextPiece p; reader.next(p);) {
        if (enc.in_flight() == enc.window()) take();
        data::EncodeJob job;
        job.pieces.push_back(std::move(p));
        enc.submit(std::move(job));
    }
    while (enc.in_flight() > 0) take();
    return out;
}

// A text with every kind of whitespace run next to newlines, letters, digits, contractions and
// non-ASCII (CJK, accents, an NBSP, emoji), repeated.
std::string tricky_text() {
    std::string unit = "Hello world!\n\nIt's 2024: don't stop.\n  indented\n\tTabbed\r\nCRLF line\n'quoted'\n"
                       "caf\xC3\xA9 na\xC3\xAFve\n\xE4\xBD\xA0\xE5\xA5\xBD\xE4\xB8\x96\xE7\x95\x8C\n"
                       "\xC2\xA0nbsp\n\xF0\x9F\x98\x80 smile\n123 456\n\n\n   \nx\n";
    std::string text;
    for (int i = 0; i < 200; ++i) text += unit + std::to_string(i) + "\n";
    return text;
}

}  // namespace

TEST_CASE("safe cuts: just before ASCII whitespace that follows a character that is not whitespace") {
    CHECK(data::last_safe_cut("abc\ndef\nghi") == 7);
    CHECK(data::last_safe_cut("abc def") == 3);
    CHECK(data::last_safe_cut("abc\r\n") == 3);
    CHECK(data::last_safe_cut("abc") == std::string::npos);
    CHECK(data::last_safe_cut("  \n\t") == std::string::npos);         // inside a whitespace run
    CHECK(data::last_safe_cut("\xC3\xA9 x") == 2);                      // after a letter outside ASCII
    CHECK(data::last_safe_cut("\xE4\xBD\xA0\n") == 3);                  // after a CJK character
    CHECK(data::last_safe_cut("\xE3\x80\x80\n") == std::string::npos);  // U+3000 is whitespace
    CHECK(data::last_safe_cut("a\xC2\xA0\n") == std::string::npos);      // so is U+00A0
    CHECK(data::last_safe_cut("\xA9 x") == std::string::npos);          // after a stray continuation byte
    CHECK(data::last_safe_cut("\x01 x") == std::string::npos);          // after a control character
    CHECK(data::first_safe_cut_after("a b c d", 2) == 3);
    CHECK(data::first_safe_cut_after("a b   ", 4) == 6);
}

TEST_CASE("GPT-2's ids of a text cut into pieces are the ids of the whole text") {
    const data::Tokenizer gpt2 = data::Tokenizer::gpt2();
    const fs::path dir = bpe_temp_dir("pieces");
    write_bytes(dir / "tricky.txt", tricky_text());
    write_bytes(dir / "shakespeare.txt", std::string(data::tiny_shakespeare().substr(0, 200000)));
    std::string cjk;   // no ASCII letter at all: cuts come after CJK characters and punctuation
    for (int i = 0; i < 300; ++i)
        cjk += "\xE4\xBD\xA0\xE5\xA5\xBD\xE4\xB8\x96\xE7\x95\x8C\xE3\x80\x82\n\xE3\x80\x80\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E "
               "\xE3\x81\xA7\xE3\x81\x99\xE3\x80\x82\n\n\xC2\xA0\xD0\x9F\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82 \xF0\x9F\x98\x80\t\n";
    write_bytes(dir / "cjk.txt", cjk);
    data::DocumentReader cjk_reader(data::list_input_files({(dir / "cjk.txt").string()}), 4096);
    int cjk_pieces = 0;
    for (data::TextPiece p; cjk_reader.next(p);) ++cjk_pieces;
    CHECK(cjk_pieces >= static_cast<int>(cjk.size() / 4096));   // it is cut, not read whole
    for (const char* name : {"tricky.txt", "shakespeare.txt", "cjk.txt"}) {
        CAPTURE(name);
        const auto files = data::list_input_files({(dir / name).string()});
        const std::string text = testing::read_bytes((dir / name).string());
        std::vector<int32_t> whole = {50256};
        const std::vector<int32_t> ids = gpt2.bpe()->encode(text);
        whole.insert(whole.end(), ids.begin(), ids.end());
        for (size_t piece_bytes : {size_t{16}, size_t{100}, size_t{4096}, size_t{1} << 20}) {
            CAPTURE(piece_bytes);
            CHECK(encode_all(gpt2, files, piece_bytes) == whole);
        }
    }
}

TEST_CASE("BpeTokenizer::encode_each: each text's ids as encode gives them, one word cache for all") {
    const data::BpeTokenizer& gpt2 = *data::Tokenizer::gpt2().bpe();
    const std::string tricky = tricky_text();
    const std::vector<std::string_view> texts = {"Hello world", "", " world world", tricky, "<|endoftext|> x", "Hello"};
    std::vector<int32_t> out = {7};
    std::vector<size_t> ends;
    gpt2.encode_each(texts, out, ends);
    REQUIRE(ends.size() == texts.size());
    size_t begin = 1;
    for (size_t i = 0; i < texts.size(); ++i) {
        CAPTURE(i);
        CHECK(std::vector<int32_t>(out.begin() + static_cast<std::ptrdiff_t>(begin), out.begin() + static_cast<std::ptrdiff_t>(ends[i])) ==
              gpt2.encode(texts[i]));
        begin = ends[i];
    }
    CHECK(out[0] == 7);
}

TEST_CASE("the document reader: folders sorted, hidden files skipped, .jsonl a document per line") {
    const fs::path dir = bpe_temp_dir("reader");
    fs::create_directories(dir / "sub");
    fs::create_directories(dir / ".git");
    write_bytes(dir / "b.txt", "second file\n");
    write_bytes(dir / "a.txt", "first file");
    write_bytes(dir / "sub" / "c.txt", "");
    write_bytes(dir / ".hidden", "skipped");
    write_bytes(dir / ".git" / "HEAD", "skipped");
    write_bytes(dir / "d.jsonl", "{\"text\": \"line one\", \"id\": 1}\n\n{\"text\": \"line\\ntwo \\u00e9\"}\n");
    const auto files = data::list_input_files({dir.string()});
    REQUIRE(files.size() == 4);
    CHECK(fs::path(files[0].path).filename() == "a.txt");
    CHECK(fs::path(files[2].path).filename() == "d.jsonl");
    CHECK(files[2].jsonl);
    CHECK(fs::path(files[3].path).filename() == "c.txt");
    CHECK(files[1].bytes == 12);
    data::DocumentReader reader(files);
    std::vector<std::string> docs;
    for (data::TextPiece p; reader.next(p);) {
        if (p.starts_document) docs.emplace_back();
        if (!docs.empty()) docs.back() += p.text;
    }
    CHECK(docs == std::vector<std::string>{"first file", "second file\n", "line one", "line\ntwo \xC3\xA9", ""});
    CHECK(reader.documents() == 5);
    CHECK_THROWS_WITH_AS(data::list_input_files({(dir / "missing").string()}), doctest::Contains("missing"), IOError);
}

TEST_CASE("a bad .jsonl line is a FormatError naming the file and the line") {
    const fs::path dir = bpe_temp_dir("jsonl");
    auto fails = [&](const std::string& content, const std::vector<std::string>& facts) {
        write_bytes(dir / "x.jsonl", content);
        data::DocumentReader reader(data::list_input_files({(dir / "x.jsonl").string()}));
        try {
            for (data::TextPiece p; reader.next(p);) {
            }
            FAIL("no FormatError for " << content);
        } catch (const FormatError& e) {
            const std::string msg = e.what();
            CAPTURE(msg);
            CHECK(msg.find((dir / "x.jsonl").string()) != std::string::npos);
            for (const std::string& f : facts) CHECK(msg.find(f) != std::string::npos);
        }
    };
    fails("{\"text\": \"ok\"}\n{\"text\": \"cut\n", {"line 2", "not valid JSON"});
    fails("{\"text\": \"ok\"}\n\n{\"body\": \"no text\"}\n", {"line 3", "\"text\""});
    fails("[1, 2]\n", {"line 1", "array"});
    fails("{\"text\": 42}\n", {"line 1", "number", "not a string"});
}

TEST_CASE("the ordered encoder: the same tokens on 1 and 4 threads, errors passed on in order") {
    const fs::path dir = bpe_temp_dir("encoder");
    for (int i = 0; i < 12; ++i) write_bytes(dir / fmt::format("doc{:02d}.txt", i), tricky_text().substr(0, 500 + 97 * i));
    const auto files = data::list_input_files({dir.string()});
    const data::Tokenizer gpt2 = data::Tokenizer::gpt2();
    const std::vector<int32_t> serial = encode_all(gpt2, files, 256);
    CHECK(std::count(serial.begin(), serial.end(), 50256) == 12);
    CHECK(encode_all(gpt2, files, 256, 1) == serial);
    CHECK(encode_all(gpt2, files, 256, 4) == serial);
    // A char tokenizer missing a character fails in a worker; take() rethrows it.
    const data::Tokenizer abc = data::Tokenizer::from_code_points({'a', 'b', 'c'});
    CHECK_THROWS_AS(encode_all(abc, files, 256, 2), ValueError);
    CHECK_THROWS_AS(data::OrderedEncoder(gpt2, 0, 2), ValueError);
}

TEST_CASE("the shard filler: llm.c's names, full shards but the last, --val-tokens, kept shards") {
    const fs::path dir = bpe_temp_dir("filler");
    std::vector<data::ShardRecord> closed;
    data::ShardFiller filler({dir.string(), "tiny", data::ShardDtype::kUint16, 10, 0}, {},
                             [&](const data::ShardRecord& r) { closed.push_back(r); });
    std::vector<int32_t> ids(27);
    for (int i = 0; i < 27; ++i) ids[static_cast<size_t>(i)] = i;
    filler.append(std::span<const int32_t>(ids).first(4));
    filler.append(std::span<const int32_t>(ids).subspan(4));   // straddles three shards
    filler.finish();
    REQUIRE(closed.size() == 3);
    CHECK(closed[0].file == "tiny_val_000000.bin");
    CHECK(closed[1].file == "tiny_train_000001.bin");
    CHECK(closed[2].file == "tiny_train_000002.bin");
    CHECK(data::read_shard_header((dir / "tiny_train_000002.bin").string()).num_tokens == 7);
    CHECK(filler.total_tokens() == 27);
    data::MappedShard second((dir / "tiny_train_000001.bin").string());
    int64_t first_id = -1;
    second.read(0, 1, &first_id);
    CHECK(first_id == 10);

    const fs::path vdir = bpe_temp_dir("filler_val");
    data::ShardFiller val({vdir.string(), "v", data::ShardDtype::kUint16, 10, 3}, {1}, nullptr);
    val.append(ids);
    val.finish();
    CHECK(data::read_shard_header((vdir / "v_val_000000.bin").string()).num_tokens == 3);
    CHECK_FALSE(fs::exists(vdir / "v_train_000001.bin"));   // kept: counted, not written
    CHECK(data::read_shard_header((vdir / "v_train_000002.bin").string()).num_tokens == 10);
    CHECK(data::read_shard_header((vdir / "v_train_000003.bin").string()).num_tokens == 4);
    CHECK(val.shards()[1].kept);
    CHECK_THROWS_AS(data::ShardFiller({vdir.string(), "v", data::ShardDtype::kUint16, 0, 0}, {}, nullptr), ValueError);
}

TEST_CASE("the char tokenizer's first pass reads every document's characters; non-UTF-8 names the file") {
    const fs::path dir = bpe_temp_dir("chars");
    write_bytes(dir / "a.txt", "cab\n");
    write_bytes(dir / "b.jsonl", "{\"text\": \"\\u00e9z\"}\n");
    const auto files = data::list_input_files({dir.string()});
    CHECK(data::collect_code_points(files) == std::vector<uint32_t>{'\n', 'a', 'b', 'c', 'z', 0xE9});
    const data::PrepareTokenizer tok = data::resolve_prepare_tokenizer("char", files);
    CHECK(tok.tokenizer.vocab_size() == 6);
    CHECK(tok.eot_token() == -1);
    write_bytes(dir / "c.txt", "ok\n\xFF bad");
    CHECK_THROWS_WITH_AS(data::collect_code_points(data::list_input_files({dir.string()})),
                         doctest::Contains("c.txt: not UTF-8 text (or a NUL byte) at byte offset 3"), IOError);
    CHECK_THROWS_WITH_AS(data::resolve_prepare_tokenizer("gpt3", files), doctest::Contains("gpt3"), ValueError);
}

TEST_CASE("GPT-2's built-in tokenizer is the fixture's, and SHA-256 is right") {
    CHECK(data::sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    CHECK(data::sha256_hex(data::gpt2_tiktoken_ranks()) ==
          "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930");
    CHECK(data::sha256_file(testing::bpe_fixture_path("gpt2.tiktoken")) == data::sha256_hex(data::gpt2_tiktoken_ranks()));
    const data::Tokenizer gpt2 = data::Tokenizer::gpt2();
    CHECK(gpt2.vocab_size() == 50257);
    CHECK(gpt2.bpe()->eot_token() == 50256);
    CHECK(gpt2.encode("Hello world") == std::vector<int32_t>{15496, 995});
    CHECK(gpt2.bpe()->merge_count() == testing::gpt2_tokenizer().merge_count());
    CHECK(data::Tokenizer::gpt2().bpe() == gpt2.bpe());   // built once, shared
}
