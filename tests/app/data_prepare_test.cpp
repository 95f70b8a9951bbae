// data_prepare_test.cpp: `ampgrad data prepare` end to end, through the program: a small corpus
// folder (text files, a .jsonl, a hidden file) plus one more file; the byte, char and gpt2
// tokenizers; 1 and 2 threads give the same shards; every document starts with <|endoftext|>
// (gpt2) and the tokens decode back to the documents; llm.c's names, --shard-tokens and
// --val-tokens; meta.json; a re-run resumes, leaves a complete folder alone, or refuses other
// settings unless --overwrite; a corrupt .jsonl line is a one-line error naming the file and line.
// Every shard passes the checks llm.c's llmc/dataloader.h makes when it opens a shard (reimplemented
// here from the format: magic, version, a positive count, file size = 1024 + 2 * count).
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "data/tokenizer.hpp"
#include "tests/app/run_program.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;
namespace fs = std::filesystem;

namespace {

std::string slurp(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

void spit(const fs::path& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

void check_ok(const ProgramResult& r) {
    CAPTURE(r.output);
    REQUIRE(r.exit_code == 0);
}

void check_fails(const ProgramResult& r, const std::vector<std::string>& facts) {
    CAPTURE(r.output);
    CHECK(r.exit_code == 1);
    CHECK(r.output.find("ampgrad data: error: ") != std::string::npos);
    for (const std::string& fact : facts) CHECK(r.output.find(fact) != std::string::npos);
}

struct Corpus {
    std::vector<std::string> inputs;      // --input values
    std::vector<std::string> documents;   // in the order prepare reads them
};

// corpus/{a.txt, b.txt, d.jsonl, sub/c.txt, .hidden} and extra.txt outside it.
Corpus make_corpus(const fs::path& dir) {
    const char* root = std::getenv("AMPGRAD_SOURCE_ROOT");
    const std::string shakespeare = slurp(std::string(root) + "/data/tinyshakespeare.txt").substr(0, 3000);
    const fs::path c = dir / "corpus";
    fs::create_directories(c / "sub");
    spit(c / "a.txt", shakespeare);
    spit(c / "b.txt", "Second document.\n\nWith an empty line, and   spaces.\n");
    spit(c / "d.jsonl", "{\"text\": \"JSON line one\", \"id\": 1}\n\n{\"text\": \"caf\\u00e9 \\u4f60\\u597d\\nline two\"}\n"
                        "{\"text\": \"\"}\n");
    spit(c / "sub" / "c.txt", "In a subfolder: na\xC3\xAFve \xF0\x9F\x98\x80\n");
    spit(c / ".hidden", "not a document");
    spit(dir / "extra.txt", "The extra input, given on its own.");
    return {{c.string(), (dir / "extra.txt").string()},
            {shakespeare, "Second document.\n\nWith an empty line, and   spaces.\n", "JSON line one",
             "caf\xC3\xA9 \xE4\xBD\xA0\xE5\xA5\xBD\nline two", "", "In a subfolder: na\xC3\xAFve \xF0\x9F\x98\x80\n",
             "The extra input, given on its own."}};
}

std::vector<std::string> prepare_args(const Corpus& c, const std::string& tokenizer, const fs::path& out,
                                      std::vector<std::string> more = {}) {
    std::vector<std::string> args = {"data", "prepare", "--tokenizer", tokenizer, "--output", out.string()};
    for (const std::string& in : c.inputs) args.insert(args.end(), {"--input", in});
    args.insert(args.end(), more.begin(), more.end());
    return args;
}

int32_t le32(const std::string& b, size_t at) {
    return static_cast<int32_t>(static_cast<uint32_t>(static_cast<unsigned char>(b[at])) |
                                static_cast<uint32_t>(static_cast<unsigned char>(b[at + 1])) << 8 |
                                static_cast<uint32_t>(static_cast<unsigned char>(b[at + 2])) << 16 |
                                static_cast<uint32_t>(static_cast<unsigned char>(b[at + 3])) << 24);
}

// The checks llm.c's dataloader makes on opening a GPT-2 shard, then its uint16 tokens.
std::vector<int32_t> load_like_llmc(const fs::path& path) {
    CAPTURE(path);
    const std::string b = slurp(path);
    REQUIRE(b.size() >= 1024);
    CHECK(le32(b, 0) == 20240520);   // magic
    CHECK(le32(b, 4) == 1);          // version
    const int32_t ntok = le32(b, 8);
    CHECK(ntok > 0);
    REQUIRE(b.size() == 1024 + 2 * static_cast<size_t>(ntok));
    for (size_t i = 12; i < 1024; ++i) REQUIRE(b[i] == 0);
    std::vector<int32_t> ids(static_cast<size_t>(ntok));
    for (size_t i = 0; i < ids.size(); ++i)
        ids[i] = static_cast<unsigned char>(b[1024 + 2 * i]) | static_cast<unsigned char>(b[1025 + 2 * i]) << 8;
    return ids;
}

// The shard files of `out`, in llm.c's order (val first, then train by number), checked and read.
std::vector<std::vector<int32_t>> load_shards(const fs::path& out, const std::string& name) {
    std::vector<std::vector<int32_t>> shards;
    for (int i = 0;; ++i) {
        const fs::path p = out / fmt::format("{}_{}_{:06d}.bin", name, i == 0 ? "val" : "train", i);
        if (!fs::exists(p)) break;
        shards.push_back(load_like_llmc(p));
    }
    return shards;
}

std::vector<int32_t> concat(const std::vector<std::vector<int32_t>>& shards) {
    std::vector<int32_t> all;
    for (const auto& s : shards) all.insert(all.end(), s.begin(), s.end());
    return all;
}

nlohmann::json read_meta(const fs::path& out) { return nlohmann::json::parse(slurp(out / "meta.json")); }

std::vector<std::string> shard_bytes(const fs::path& out, const std::string& name) {
    std::vector<std::string> all;
    for (int i = 0; fs::exists(out / fmt::format("{}_{}_{:06d}.bin", name, i == 0 ? "val" : "train", i)); ++i)
        all.push_back(slurp(out / fmt::format("{}_{}_{:06d}.bin", name, i == 0 ? "val" : "train", i)));
    return all;
}

ino_t inode(const fs::path& p) {
    struct stat st {};
    ::stat(p.c_str(), &st);
    return st.st_ino;
}

}  // namespace

TEST_CASE("data prepare --tokenizer gpt2: every document starts with <|endoftext|>, llm.c's names, meta.json") {
    const fs::path dir = make_temp_dir("prepare_gpt2");
    const Corpus c = make_corpus(dir);
    const fs::path out = dir / "shards";
    check_ok(run_ampgrad(prepare_args(c, "gpt2", out, {"--shard-tokens", "300", "--threads", "2"})));
    const auto shards = load_shards(out, "shards");
    REQUIRE(shards.size() >= 3);
    for (size_t i = 0; i + 1 < shards.size(); ++i) CHECK(shards[i].size() == 300);
    CHECK(shards.back().size() <= 300);
    const std::vector<int32_t> all = concat(shards);
    REQUIRE(all.front() == 50256);
    const data::Tokenizer gpt2 = data::Tokenizer::gpt2();
    std::vector<std::string> docs;
    for (int32_t id : all) {
        if (id == 50256) docs.emplace_back();
        else docs.back() += gpt2.decode_one(id);
    }
    CHECK(docs == c.documents);

    const nlohmann::json meta = read_meta(out);
    CAPTURE(meta.dump(2));
    CHECK(meta["status"] == "complete");
    CHECK(meta["name"] == "shards");
    CHECK(meta["dtype"] == "uint16");
    CHECK(meta["shard_tokens"] == 300);
    CHECK(meta["val_tokens"] == 0);
    CHECK(meta["tokenizer"]["spec"] == "gpt2");
    CHECK(meta["tokenizer"]["kind"] == "bpe");
    CHECK(meta["tokenizer"]["vocab_size"] == 50257);
    CHECK(meta["tokenizer"]["eot_token"] == 50256);
    CHECK(meta["tokenizer"]["files"][0]["sha256"] == "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930");
    CHECK(meta["total_tokens"] == all.size());
    CHECK(meta["documents"] == c.documents.size());
    REQUIRE(meta["inputs"].size() == 5);
    CHECK(meta["inputs"][0]["path"] == fs::absolute(dir / "corpus" / "a.txt").lexically_normal().string());
    CHECK(meta["inputs"][0]["bytes"] == 3000);
    CHECK(meta["inputs"][2]["jsonl"] == true);
    REQUIRE(meta["shards"].size() == shards.size());
    CHECK(meta["shards"][0]["file"] == "shards_val_000000.bin");
    CHECK(meta["shards"][1]["file"] == "shards_train_000001.bin");
    CHECK(meta["shards"][1]["split"] == "train");
    CHECK(meta["shards"].back()["tokens"] == shards.back().size());
}

TEST_CASE("data prepare: 1 and 2 threads write the same shards; byte and char tokenizers have no separator") {
    const fs::path dir = make_temp_dir("prepare_threads");
    const Corpus c = make_corpus(dir);
    for (const char* tok : {"byte", "char"}) {
        CAPTURE(tok);
        const fs::path one = dir / (std::string(tok) + "1"), two = dir / (std::string(tok) + "2");
        check_ok(run_ampgrad(prepare_args(c, tok, one, {"--shard-tokens", "700", "--threads", "1", "--name", "x"})));
        check_ok(run_ampgrad(prepare_args(c, tok, two, {"--shard-tokens", "700", "--threads", "2", "--name", "x"})));
        const auto bytes = shard_bytes(one, "x");
        CHECK(bytes.size() >= 2);
        CHECK(bytes == shard_bytes(two, "x"));
        CHECK(slurp(one / "meta.json") == slurp(two / "meta.json"));
        const nlohmann::json meta = read_meta(one);
        CHECK(meta["tokenizer"]["eot_token"].is_null());
        std::string joined;
        for (const std::string& d : c.documents) joined += d;
        std::vector<int32_t> ids = concat(load_shards(one, "x"));
        data::Tokenizer t = std::string(tok) == "byte"
                                ? data::Tokenizer::bytes()
                                : data::Tokenizer::from_code_points(meta["tokenizer"]["code_points"].get<std::vector<uint32_t>>());
        CHECK(meta["tokenizer"]["vocab_size"] == t.vocab_size());
        CHECK(t.decode(ids) == joined);
    }
}

TEST_CASE("data prepare --val-tokens: the validation shard holds the first N tokens, training shards follow") {
    const fs::path dir = make_temp_dir("prepare_val");
    const Corpus c = make_corpus(dir);
    const fs::path whole = dir / "whole", split = dir / "split";
    check_ok(run_ampgrad(prepare_args(c, "gpt2", whole, {"--shard-tokens", "100000", "--name", "s"})));
    check_ok(run_ampgrad(prepare_args(c, "gpt2", split, {"--shard-tokens", "400", "--val-tokens", "123", "--name", "s"})));
    const auto all = load_shards(whole, "s");
    REQUIRE(all.size() == 1);   // everything fits the validation shard: no train shard
    const auto shards = load_shards(split, "s");
    REQUIRE(shards.size() >= 2);
    CHECK(shards[0].size() == 123);
    CHECK(shards[1].size() == std::min<size_t>(400, all[0].size() - 123));
    CHECK(concat(shards) == all[0]);
    CHECK(read_meta(split)["val_tokens"] == 123);
}

TEST_CASE("data prepare re-run: resumes after the shards done, leaves a complete folder, refuses other settings") {
    const fs::path dir = make_temp_dir("prepare_resume");
    const Corpus c = make_corpus(dir);
    const fs::path out = dir / "out";
    const auto args = prepare_args(c, "gpt2", out, {"--shard-tokens", "200"});
    check_ok(run_ampgrad(args));
    const std::vector<std::string> original = shard_bytes(out, "out");
    const size_t n = original.size();
    REQUIRE(n >= 5);
    // An interrupted run: the last two shards missing, meta.json in progress, temporaries left.
    nlohmann::json meta = read_meta(out);
    meta["status"] = "in_progress";
    meta["shards"].erase(meta["shards"].begin() + static_cast<std::ptrdiff_t>(n - 2), meta["shards"].end());
    meta.erase("total_tokens");
    spit(out / "meta.json", meta.dump());
    fs::remove(out / fmt::format("out_train_{:06d}.bin", n - 1));
    fs::remove(out / fmt::format("out_train_{:06d}.bin", n - 2));
    spit(out / fmt::format("out_train_{:06d}.bin.tmp-99999", n - 2), "half a shard");
    spit(out / "meta.json.tmp-99999", "{");
    const ino_t kept_inode = inode(out / "out_train_000001.bin");
    ProgramResult r = run_ampgrad(args);
    check_ok(r);
    CHECK(r.output.find(fmt::format("({} kept from an earlier run)", n - 2)) != std::string::npos);
    CHECK(shard_bytes(out, "out") == original);
    CHECK(inode(out / "out_train_000001.bin") == kept_inode);   // kept, not written again
    CHECK_FALSE(fs::exists(out / "meta.json.tmp-99999"));
    CHECK_FALSE(fs::exists(out / fmt::format("out_train_{:06d}.bin.tmp-99999", n - 2)));
    CHECK(read_meta(out)["status"] == "complete");

    r = run_ampgrad(args);   // complete: nothing to do
    check_ok(r);
    CHECK(r.output.find("is complete already") != std::string::npos);
    // A shard whose header no longer matches meta.json is written again.
    fs::resize_file(out / "out_train_000001.bin", 1024 + 20);
    check_ok(run_ampgrad(args));
    CHECK(shard_bytes(out, "out") == original);

    // Other settings or inputs: refused, unless --overwrite.
    auto other = prepare_args(c, "gpt2", out, {"--shard-tokens", "500"});
    check_fails(run_ampgrad(other), {"--overwrite", "shard_tokens was 200, now 500"});
    CHECK(shard_bytes(out, "out") == original);
    check_fails(run_ampgrad(prepare_args(c, "byte", out, {"--shard-tokens", "200"})), {"--overwrite", "tokenizer"});
    spit(dir / "extra.txt", "The extra input, changed.");
    check_fails(run_ampgrad(args), {"--overwrite", "inputs"});
    other.push_back("--overwrite");
    check_ok(run_ampgrad(other));
    const auto rewritten = load_shards(out, "out");
    CHECK(rewritten.front().size() == 500);
    CHECK(read_meta(out)["shard_tokens"] == 500);
    CHECK_FALSE(fs::exists(out / fmt::format("out_train_{:06d}.bin", rewritten.size())));   // the old ones are gone
}

TEST_CASE("data prepare: a corrupt .jsonl line is a one-line error naming the file and line, and no shard looks whole") {
    const fs::path dir = make_temp_dir("prepare_bad_jsonl");
    const char* root = std::getenv("AMPGRAD_SOURCE_ROOT");
    spit(dir / "a.txt", slurp(std::string(root) + "/data/tinyshakespeare.txt").substr(0, 20000));
    spit(dir / "b.jsonl", "{\"text\": \"fine\"}\n{\"text\": \"broken\n{\"text\": \"after\"}\n");
    const fs::path out = dir / "out";
    const ProgramResult r = run_ampgrad({"data", "prepare", "--input", (dir / "a.txt").string(), "--input",
                                         (dir / "b.jsonl").string(), "--tokenizer", "gpt2", "--output", out.string(),
                                         "--shard-tokens", "1000"});
    check_fails(r, {(dir / "b.jsonl").string() + ": line 2", "not valid JSON"});
    for (const auto& e : fs::directory_iterator(out)) {
        const std::string name = e.path().filename().string();
        CHECK(name.find(".tmp-") == std::string::npos);
        if (e.path().extension() == ".bin") load_like_llmc(e.path());
    }
    CHECK(read_meta(out)["status"] == "in_progress");
    // Bad flags and inputs.
    check_fails(run_ampgrad({"data", "prepare", "--input", (dir / "missing").string(), "--tokenizer", "gpt2", "--output",
                             out.string()}), {"missing", "not there"});
    check_fails(run_ampgrad({"data", "prepare", "--input", (dir / "a.txt").string(), "--tokenizer", "nope", "--output",
                             out.string()}), {"--tokenizer \"nope\""});
    check_fails(run_ampgrad({"data", "prepare", "--input", dir.string(), "--tokenizer", "byte", "--output",
                             (dir / "inside").string()}), {"is inside the input folder"});
    CHECK_FALSE(fs::exists(dir / "inside"));
    check_fails(run_ampgrad({"data", "prepare", "--input", (dir / "a.txt").string(), "--tokenizer", "byte", "--output",
                             (dir / "named").string(), "--name", "a/b"}), {"--name \"a/b\""});
    CHECK_FALSE(fs::exists(dir / "named"));
}

TEST_CASE("train --tokenizer gpt2: GPT-2's BPE built in, no files needed") {
    const fs::path dir = make_temp_dir("train_gpt2");
    const char* root = std::getenv("AMPGRAD_SOURCE_ROOT");
    spit(dir / "text.txt", slurp(std::string(root) + "/data/tinyshakespeare.txt").substr(0, 20000));
    const ProgramResult r = run_ampgrad({"train", "--n-layer", "1", "--n-embd", "32", "--n-head", "2", "--block-size", "16",
                                         "--batch-size", "4", "--steps", "2", "--warmup", "1", "--eval-every", "0",
                                         "--eval-iters", "1", "--sample-tokens", "5", "--tokenizer", "gpt2", "--data",
                                         (dir / "text.txt").string(), "--out", (dir / "run").string()});
    check_ok(r);
    CHECK(r.output.find("bpe tokenizer") != std::string::npos);
}

// The whole path a user takes: prepare shards, then train on the folder with no --tokenizer (the
// folder's meta.json names it: a char tokenizer's characters travel in it), sample from the checkpoint.
TEST_CASE("data prepare -> train --data DIR: the tokenizer comes from meta.json; the run samples") {
    const fs::path dir = make_temp_dir("prepare_train");
    const char* root = std::getenv("AMPGRAD_SOURCE_ROOT");
    spit(dir / "text.txt", slurp(std::string(root) + "/data/tinyshakespeare.txt").substr(0, 60000));
    for (const std::string tok : {"char", "gpt2"}) {
        CAPTURE(tok);
        const fs::path shards = dir / ("shards_" + tok), run = dir / ("run_" + tok);
        check_ok(run_ampgrad({"data", "prepare", "--input", (dir / "text.txt").string(), "--tokenizer", tok, "--output",
                              shards.string(), "--shard-tokens", "8000", "--val-tokens", "2000"}));
        const ProgramResult r = run_ampgrad({"train", "--data", shards.string(), "--n-layer", "1", "--n-embd", "32",
                                             "--n-head", "2", "--block-size", "16", "--batch-size", "4", "--steps", "3",
                                             "--warmup", "1", "--eval-every", "0", "--eval-iters", "1", "--sample-tokens",
                                             "8", "--out", run.string()});
        check_ok(r);
        CHECK(r.output.find(tok == "char" ? "(char tokenizer)" : "(bpe tokenizer)") != std::string::npos);
        check_ok(run_ampgrad({"sample", "--ckpt", run.string(), "--tokens", "4"}));
    }
}
