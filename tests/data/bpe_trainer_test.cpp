// bpe_trainer_test.cpp: data/bpe_trainer: training on a fixed text writes exactly the committed
// vocab.json + merges.txt (tests/fixtures/bpe/trained_512/, made by `ampgrad tokenizer train`),
// and Hugging Face tokenizers, loading those files (and tokenizer.json), gives the same ids as ampgrad
// (trained_512_ids.json, from tools/make_bpe_fixtures.py).
#include <doctest/doctest.h>

#include "tests/data/bpe_fixtures.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

namespace {

// The committed training input: the first 20,000 bytes of Tiny Shakespeare.
std::string_view training_text() { return data::tiny_shakespeare().substr(0, 20000); }

}  // namespace

TEST_CASE("training is deterministic and reproduces the committed files byte for byte") {
    const data::BpeTokenizer tok = data::train_bpe(training_text(), 512);
    CHECK(tok.vocab_size() == 512);
    CHECK(tok.eot_token() == 511);
    CHECK(tok.vocab_json() == read_bytes(bpe_fixture_path("trained_512/vocab.json")));
    CHECK(tok.merges_txt() == read_bytes(bpe_fixture_path("trained_512/merges.txt")));
    CHECK(tok.tokenizer_json() == read_bytes(bpe_fixture_path("trained_512/tokenizer.json")));
    CHECK(data::train_bpe(training_text(), 512).merges_txt() == tok.merges_txt());
}

TEST_CASE("the trained files load in Hugging Face tokenizers and give the same ids") {
    const data::BpeTokenizer tok = data::BpeTokenizer::from_hf_dir(bpe_fixture_path("trained_512"));
    const nlohmann::json fixture = load_bpe_fixture("trained_512_ids.json");
    const std::string sample = fixture.at("sample").get<std::string>();
    const std::vector<int32_t> ids = tok.encode(sample, /*allow_special=*/true);
    CHECK(ids == fixture.at("ids_allow_special").get<std::vector<int32_t>>());
    CHECK(tok.decode(ids) == sample);
}

TEST_CASE("the first merges are the most frequent pairs; ties go to the smallest (left id, right id)") {
    // Pre-tokens: "cd" x1, " cd" x2, " ab" x3. The pairs (a,b), (c,d) and (Ġ,a) all occur 3 times; the
    // bytes have GPT-2's ids (a=64 < c=66 < Ġ=220), so (a,b) goes first, then (c,d) (3) beats (Ġ,ab) (3)
    // by ids too (66 < 220), then (Ġ,ab).
    const data::BpeTokenizer tok = data::train_bpe("cd ab cd ab cd ab", 260);
    using P = std::pair<std::string, std::string>;
    CHECK(tok.merge_strings() == std::vector<P>{{"a", "b"}, {"c", "d"}, {"\xc4\xa0", "ab"}});
    CHECK(tok.encode(" ab") == std::vector<int32_t>{258});
    CHECK(tok.eot_token() == 259);
    CHECK(tok.decode(tok.encode("cd ab xyz")) == "cd ab xyz");
}

TEST_CASE("bad training requests") {
    CHECK_THROWS_AS(data::train_bpe("text", 256), ValueError);
    const data::BpeTokenizer tiny = data::train_bpe("aaaa", 1000);   // runs out of pairs: a smaller vocabulary
    CHECK(tiny.vocab_size() == 256 + 2 + 1);                         // "aa", "aaaa", <|endoftext|>
    CHECK(tiny.encode("aaaa") == std::vector<int32_t>{257});
}
