// hellaswag_test.cpp: data/hellaswag: the jsonl layout read from a fixture the test writes
// (tests/data/hellaswag_fixture.hpp), every malformed line named by file and line with a typed error,
// and the rendering to (4,T) ids and an ending mask, with the byte tokenizer and GPT-2's BPE, padded
// and left-truncated.
#include <doctest/doctest.h>

#include <filesystem>
#include <memory>

#include "data/hellaswag.hpp"
#include "tests/data/bpe_fixtures.hpp"
#include "tests/data/hellaswag_fixture.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;
namespace fs = std::filesystem;

namespace {

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

// Row i of a (4,T) batch, without its padding.
std::vector<int32_t> row(const data::HellaswagBatch& b, size_t i) {
    auto begin = b.ids.begin() + static_cast<std::ptrdiff_t>(i * static_cast<size_t>(b.T));
    return {begin, begin + b.lengths[i]};
}

// Every (row, position): the ids are the row's tokens then 0s, and the mask is 1 exactly on the
// row's last `ending_tokens[i]` tokens.
void check_layout(const data::HellaswagBatch& b, const std::array<std::vector<int32_t>, 4>& rows,
                  const std::array<size_t, 4>& ending_tokens) {
    for (size_t i = 0; i < 4; ++i) {
        CAPTURE(i);
        REQUIRE(b.lengths[i] == static_cast<int64_t>(rows[i].size()));
        CHECK(row(b, i) == rows[i]);
        for (int64_t t = 0; t < b.T; ++t) {
            CAPTURE(t);
            const size_t at = i * static_cast<size_t>(b.T) + static_cast<size_t>(t);
            const bool in_row = t < b.lengths[i];
            if (!in_row) CHECK(b.ids[at] == 0);
            const bool ending = in_row && t >= b.lengths[i] - static_cast<int64_t>(ending_tokens[i]);
            CHECK(b.mask[at] == (ending ? 1 : 0));
        }
    }
}

// One malformed line (line 2, after a good one): a HellaswagFormatError naming the file and line 2.
void check_bad_line(const std::string& line, const std::string& fact) {
    CAPTURE(line);
    const std::string good = std::string(kHellaswagFixture).substr(0, std::string(kHellaswagFixture).find('\n') + 1);
    try {
        data::parse_hellaswag(good + line + "\n", "dir/val.jsonl");
        FAIL("no error for a malformed line");
    } catch (const data::HellaswagFormatError& e) {
        CHECK(e.file == "dir/val.jsonl");
        CHECK(e.line == 2);
        CHECK_MESSAGE(std::string(e.what()).find("dir/val.jsonl:2: ") == 0, e.what());
        CHECK_MESSAGE(std::string(e.what()).find(fact) != std::string::npos, e.what());
    }
}

const char* kEndings = R"("endings": ["a", "b", "c", "d"])";

}  // namespace

TEST_CASE("hellaswag: the jsonl layout is read from a file; blank lines are skipped, lines are counted") {
    const fs::path dir = bpe_temp_dir("hellaswag");
    const std::string path = write_hellaswag_fixture(dir);
    const std::vector<data::HellaswagExample> ex = data::read_hellaswag(path);
    REQUIRE(ex.size() == kHellaswagFixtureExamples);
    CHECK(ex[0].ctx == "A man is sitting on a roof. he");
    CHECK(ex[0].endings[3] == "starts pulling up roofing on a roof.");
    CHECK(ex[0].label == 3);
    const std::vector<int64_t> lines = {ex[0].line, ex[1].line, ex[2].line, ex[3].line, ex[4].line};
    CHECK(lines == std::vector<int64_t>{1, 2, 4, 5, 6});
    const std::vector<int> labels = {ex[0].label, ex[1].label, ex[2].label, ex[3].label, ex[4].label};
    CHECK(labels == std::vector<int>{3, 0, 2, 1, 1});   // the last one written "1", as the Hugging Face copy does
    CHECK(ex[3].ctx == "[header] How to bake a café crème cake [title] Preheat the oven to 180 °C.");   // UTF-8 kept
    CHECK(ex[2].endings[2] == "sit in a canoe while the man paddles.");   // the CRLF line
    CHECK_THROWS_WITH_AS(data::read_hellaswag((dir / "missing.jsonl").string()), doctest::Contains("missing.jsonl"),
                         IOError);
    const std::string blank = write_hellaswag_fixture(dir, "blank.jsonl", "\n \n");
    CHECK_THROWS_WITH_AS(data::read_hellaswag(blank), doctest::Contains("holds no examples"), FormatError);
    fs::remove_all(dir);
}

TEST_CASE("hellaswag: each malformed line is a HellaswagFormatError naming the file and the line") {
    check_bad_line(R"({"ctx": "a", )", "not a JSON object");
    check_bad_line(R"(["ctx", "endings"])", "not a JSON object but array");
    check_bad_line(std::string(R"({"label": 0, )") + kEndings + "}", "the field \"ctx\" is missing");
    check_bad_line(std::string(R"({"ctx": 7, "label": 0, )") + kEndings + "}", "\"ctx\" must be a string, not number");
    check_bad_line(std::string(R"({"ctx": "", "label": 0, )") + kEndings + "}", "the field \"ctx\" is empty");
    check_bad_line(R"({"ctx": "x", "label": 0})", "the field \"endings\" is missing");
    check_bad_line(R"({"ctx": "x", "label": 0, "endings": "abcd"})", "\"endings\" must be an array of 4 strings");
    check_bad_line(R"({"ctx": "x", "label": 0, "endings": ["a", "b", "c"]})", "\"endings\" has 3 entries; HellaSwag's "
                                                                               "layout has exactly 4");
    check_bad_line(R"({"ctx": "x", "label": 0, "endings": ["a", "b", "c", "d", "e"]})", "\"endings\" has 5 entries");
    check_bad_line(R"({"ctx": "x", "label": 0, "endings": ["a", "b", null, "d"]})", "endings[2] must be a string, not null");
    check_bad_line(std::string(R"({"ctx": "x", )") + kEndings + "}", "the field \"label\" is missing");
    check_bad_line(std::string(R"({"ctx": "x", "label": 4, )") + kEndings + "}", "\"label\" is 4, outside 0..3");
    check_bad_line(std::string(R"({"ctx": "x", "label": -1, )") + kEndings + "}", "\"label\" is -1, outside 0..3");
    check_bad_line(std::string(R"({"ctx": "x", "label": "7", )") + kEndings + "}", "\"label\" is 7, outside 0..3");
    check_bad_line(std::string(R"({"ctx": "x", "label": 1.5, )") + kEndings + "}", "must be an integer 0..3, not number 1.5");
    check_bad_line(std::string(R"({"ctx": "x", "label": "one", )") + kEndings + "}", "must be an integer 0..3, not string");
    // The same through read_hellaswag: the path as given, the line as counted in the file.
    const fs::path dir = bpe_temp_dir("hellaswag_bad");
    const std::string path = write_hellaswag_fixture(dir, "bad.jsonl", std::string(kHellaswagFixture) + "\n{\"ctx\": \"x\"}\n");
    const std::string where = path + ":8: the field \"endings\" is missing";
    CHECK_THROWS_WITH_AS(data::read_hellaswag(path), doctest::Contains(where.c_str()), data::HellaswagFormatError);
    CHECK_THROWS_AS(data::read_hellaswag(path), FormatError);   // a HellaswagFormatError is a FormatError, an IOError
    fs::remove_all(dir);
}

TEST_CASE("hellaswag: render = encode(ctx) + encode(\" \" + ending), padded to (4,T), the mask on the ending") {
    const std::vector<data::HellaswagExample> ex = data::parse_hellaswag(kHellaswagFixture, "fixture");
    const auto gpt2 = std::make_shared<data::BpeTokenizer>(gpt2_tokenizer());
    for (const data::Tokenizer& tok : {data::Tokenizer::bytes(), data::Tokenizer::from_bpe(gpt2)}) {
        CAPTURE(tok.kind_name());
        for (const data::HellaswagExample& e : ex) {
            CAPTURE(e.line);
            const data::HellaswagBatch b = data::render_hellaswag(e, tok, 1024);
            std::array<std::vector<int32_t>, 4> rows;
            std::array<size_t, 4> ending_tokens{};
            int64_t longest = 0;
            for (size_t i = 0; i < 4; ++i) {
                const std::vector<int32_t> end = tok.encode(" " + e.endings[i]);
                rows[i] = concat(tok.encode(e.ctx), end);
                ending_tokens[i] = end.size();
                longest = std::max<int64_t>(longest, static_cast<int64_t>(rows[i].size()));
                CHECK(b.ending_chars[i] == static_cast<int64_t>(data::utf8_code_points(e.endings[i]).size()));
                CHECK(b.truncated[i] == 0);
            }
            CHECK(b.T == longest);
            CHECK(b.ids.size() == 4 * static_cast<size_t>(b.T));
            CHECK(b.label == e.label);
            CHECK(b.line == e.line);
            check_layout(b, rows, ending_tokens);
        }
    }
    // GPT-2's ids, by hand: "A man is sitting on a roof. he" then " is ..." (the space makes " is" = 318, not "is" = 271).
    const data::HellaswagBatch b = data::render_hellaswag(ex[0], data::Tokenizer::from_bpe(gpt2), 1024);
    const std::vector<int32_t> ctx = gpt2->encode("A man is sitting on a roof. he");
    CHECK(ctx[1] == 582);                                                  // " man"
    CHECK(row(b, 0)[ctx.size()] == 318);                                   // " is", the ending's first token
    CHECK(b.mask[ctx.size() - 1] == 0);
    CHECK(b.mask[ctx.size()] == 1);
    // "café" has 4 characters and 5 bytes: ending_chars counts characters, as lm-eval's len(str) does.
    data::HellaswagExample cafe = ex[0];
    cafe.endings = {"café", "cafe", "x", "y"};
    const data::HellaswagBatch c = data::render_hellaswag(cafe, data::Tokenizer::bytes(), 64);
    CHECK(c.ending_chars == std::array<int64_t, 4>{4, 4, 1, 1});
    CHECK(c.lengths[0] == c.lengths[1] + 1);                               // one more byte
}

TEST_CASE("hellaswag: a row longer than the context keeps its last tokens (left truncation)") {
    data::HellaswagExample e;
    e.ctx = "abcdefghij";                                    // 10 bytes
    e.endings = {"xyz", "0123456789abcdefghijklm", "q", "rs"};
    e.label = 2;
    const data::Tokenizer tok = data::Tokenizer::bytes();
    const data::HellaswagBatch b = data::render_hellaswag(e, tok, 12);
    CHECK(b.T == 12);
    CHECK(b.truncated == std::array<int64_t, 4>{2, 22, 0, 1});
    auto bytes = [](const std::string& s) { return std::vector<int32_t>(s.begin(), s.end()); };
    std::array<std::vector<int32_t>, 4> rows = {bytes("cdefghij xyz"), bytes("bcdefghijklm"), bytes("abcdefghij q"),
                                                bytes("bcdefghij rs")};
    // Row 1's ending (24 tokens) fills the whole window: every kept token is an ending token.
    check_layout(b, rows, {4, 12, 2, 3});
    CHECK_THROWS_WITH_AS(data::render_hellaswag(e, tok, 1), doctest::Contains("at least 2"), ValueError);
    // A char tokenizer that lacks a character: a ValueError naming the example's line.
    e.line = 7;
    CHECK_THROWS_WITH_AS(data::render_hellaswag(e, data::Tokenizer::chars_of("abcdefghij xyz"), 64),
                         doctest::Contains("hellaswag example at line 7"), ValueError);
}
