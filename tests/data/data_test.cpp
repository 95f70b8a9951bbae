// data_test.cpp: data/: the embedded corpus, reading and rejecting text files, byte and char
// tokenisers, the batch sampler's own generator and its resumable position, the addition task.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "tests/support/check_close.hpp"

using namespace ampgrad;
namespace fs = std::filesystem;

namespace {

fs::path write_file(const std::string& name, const std::string& bytes) {
    fs::path p = fs::temp_directory_path() / fmt::format("ampgrad_data_test_{}_{}", ::getpid(), name);
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
}

}  // namespace

TEST_CASE("the bundled corpus is Tiny Shakespeare, embedded byte for byte") {
    std::string_view text = data::tiny_shakespeare();
    CHECK(text.size() == 1115394);
    CHECK(text.substr(0, 14) == "First Citizen:");
    const char* root = std::getenv("AMPGRAD_SOURCE_ROOT");
    REQUIRE(root != nullptr);
    CHECK(data::read_text_file(std::string(root) + "/data/tinyshakespeare.txt") == text);
    CHECK(data::Tokenizer::chars_of(text).vocab_size() == 65);
}

TEST_CASE("read_text_file: missing, a directory, empty and binary files name the path and the fact") {
    CHECK_THROWS_WITH_AS(data::read_text_file("/nonexistent/x.txt"),
                         doctest::Contains("data file /nonexistent/x.txt: cannot open it: No such file"), IOError);
    CHECK_THROWS_WITH_AS(data::read_text_file("/tmp"), doctest::Contains("/tmp: not a regular file"), IOError);
    fs::path empty = write_file("empty", "");
    CHECK_THROWS_WITH_AS(data::read_text_file(empty), doctest::Contains("the file is empty"), IOError);
    fs::path nul = write_file("nul", std::string("ab\0cd", 5));
    CHECK_THROWS_WITH_AS(data::read_text_file(nul), doctest::Contains("the byte 0x00 at offset 2 is a NUL byte"),
                         IOError);
    fs::path latin1 = write_file("latin1", "caf\xe9!");
    CHECK_THROWS_WITH_AS(data::read_text_file(latin1), doctest::Contains("offset 3 is not valid UTF-8"), IOError);
    fs::path utf8 = write_file("utf8", "caf\xc3\xa9 \xe2\x82\xac");
    CHECK(data::read_text_file(utf8) == "caf\xc3\xa9 \xe2\x82\xac");
    for (const fs::path& p : {empty, nul, latin1, utf8}) fs::remove(p);
}

TEST_CASE("tokenisers: bytes are V=256; characters are the sorted code points of the text") {
    data::Tokenizer bytes = data::Tokenizer::bytes();
    CHECK(bytes.vocab_size() == 256);
    CHECK(bytes.encode("A\xc3\xa9") == std::vector<int32_t>{65, 0xc3, 0xa9});
    CHECK(bytes.decode({104, 105}) == "hi");
    data::Tokenizer chars = data::Tokenizer::chars_of("b\xc3\xa9" "ab");   // b, e-acute, a, b
    CHECK(chars.vocab_size() == 3);
    CHECK(chars.code_points() == std::vector<uint32_t>{'a', 'b', 0xE9});
    CHECK(chars.encode("ab\xc3\xa9") == std::vector<int32_t>{0, 1, 2});
    CHECK(chars.decode({2, 0}) == "\xc3\xa9" "a");
    CHECK_THROWS_WITH_AS(chars.encode("abc"), doctest::Contains("the character \"c\" (U+0063) is not in the vocabulary"),
                         ValueError);
    CHECK_THROWS_WITH_AS(chars.decode({3}), doctest::Contains("token id 3 is outside the vocabulary [0, 3)"),
                         IndexError);
}

TEST_CASE("BatchSampler: its own generator, windows shifted by one, a position that resumes exactly") {
    auto tokens = std::make_shared<std::vector<int32_t>>();
    for (int i = 0; i < 1000; ++i) tokens->push_back(i % 97);
    data::BatchSampler a(tokens, 7);
    manual_seed(1);
    auto [x1, y1] = a.next(4, 8);
    CHECK(x1.sizes() == Shape{4, 8});
    std::vector<int64_t> xs = x1.to_vector<int64_t>(), ys = y1.to_vector<int64_t>();
    for (size_t i = 0; i < xs.size(); ++i) CHECK(ys[i] == (xs[i] + 1) % 97);
    CHECK(a.state().offset == 4);
    data::SamplerState saved = a.state();
    manual_seed(2);                                     // the model's RNG does not move the batches
    (void)randn({100});
    auto [x2, y2] = a.next(4, 8);
    data::BatchSampler b(tokens, 123);
    b.set_state(saved);
    auto [x3, y3] = b.next(4, 8);
    CHECK(equal(x2, x3));
    CHECK(equal(y2, y3));
    CHECK(!equal(x1, x2));
    CHECK_THROWS_WITH_AS(a.next(2, 1000), doctest::Contains("fewer than a window of 1000 + 1"), ValueError);
}

TEST_CASE("AdditionTask: the format, held-out pairs never trained on, answers as targets only") {
    data::AdditionTask task(2);
    CHECK(task.sequence_length() == 8);
    CHECK(task.encode(7, 45) == std::vector<int32_t>{0, 7, 10, 4, 5, 11, 2, 5, 0});   // "07+45=" "250"
    CHECK(task.tokenizer().decode(task.encode(99, 99)) == "99+99=891");
    data::SamplerState state{3, 0};
    auto [x, y] = task.batch(state, 500);
    std::vector<int64_t> xs = x.to_vector<int64_t>(), ys = y.to_vector<int64_t>();
    int test_pairs_seen = 0;
    for (int64_t b = 0; b < 500; ++b) {
        int64_t a = xs[b * 8] * 10 + xs[b * 8 + 1], c = xs[b * 8 + 3] * 10 + xs[b * 8 + 4];
        test_pairs_seen += task.is_test_pair(a, c);
        for (int64_t t = 0; t < 5; ++t) CHECK(ys[b * 8 + t] == -100);
        std::vector<int32_t> seq = task.encode(a, c);
        for (int64_t t = 5; t < 8; ++t) CHECK(ys[b * 8 + t] == seq[t + 1]);
    }
    CHECK(test_pairs_seen == 0);
    std::vector<std::pair<int64_t, int64_t>> held_out = task.test_pairs(200);
    CHECK(held_out.size() == 200);
    for (auto [a, b] : held_out) CHECK(task.is_test_pair(a, b));
    CHECK_THROWS_AS(data::AdditionTask(0), ValueError);
}

TEST_CASE("AdditionTask::exact_match scores a completion function: right answers 1, wrong ones 0") {
    data::AdditionTask task(2);
    // An oracle that writes the true answers, and one that writes zeros.
    auto oracle = [&](const Tensor& prompts, int64_t n) {                     // (B,6) -> (B,9)
        std::vector<int64_t> p = prompts.to_vector<int64_t>(), out;
        const int64_t B = prompts.size(0), P = prompts.size(1);
        for (int64_t b = 0; b < B; ++b) {
            const int64_t a = p[b * P] * 10 + p[b * P + 1], c = p[b * P + 3] * 10 + p[b * P + 4];
            std::vector<int32_t> seq = task.encode(a, c);
            out.insert(out.end(), seq.begin(), seq.begin() + P + n);
        }
        return tensor(out, {B, P + n});
    };
    auto zeros_after = [](const Tensor& prompts, int64_t n) {
        return cat({prompts, zeros({prompts.size(0), n}, TensorOptions(kInt64))}, 1);
    };
    CHECK(task.exact_match(oracle, 300, 64) == 1.0);
    CHECK(task.exact_match(zeros_after, 300, 64) < 0.05);   // only sums that are 0 (mod 1000) would match
}

TEST_CASE("token_tensor and token_ids: ids as the models take them, and back") {
    const data::Tokenizer tok = data::Tokenizer::bytes();
    Tensor idx = tok.encode_tensor("To be");
    CHECK(idx.sizes() == Shape{1, 5});
    CHECK(idx.dtype() == kInt64);
    CHECK(data::token_ids(idx) == tok.encode("To be"));
    CHECK(data::token_ids(idx.reshape({5})) == tok.encode("To be"));
    CHECK_THROWS_WITH_AS(data::token_ids(zeros({2, 3}, TensorOptions(kInt64))), doctest::Contains("(T) or (1,T)"),
                         ShapeError);
    CHECK_THROWS_AS(data::token_ids(zeros({1, 3})), ShapeError);   // float ids
    Tensor huge = tensor(std::vector<int64_t>{int64_t{1} << 40}, {1});
    CHECK_THROWS_WITH_AS(data::token_ids(huge), doctest::Contains("does not fit"), ValueError);
}
