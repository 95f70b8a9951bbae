// hellaswag_eval_test.cpp: app/hellaswag_eval: the multiple-choice scorer against independent
// computations (one unpadded forward per candidate with cross_entropy on the ending alone, for a
// GPT and a Llama; PyTorch's logits of the tiny Hugging Face GPT-2 fixture), a constructed case where
// acc and acc_norm disagree, and the `ampgrad` program: eval --hellaswag on a trained checkpoint,
// train --hellaswag-every writing metrics.jsonl, --resume changing the flags, and bad input.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "ampgrad/ampgrad.h"
#include "app/hellaswag_eval.hpp"
#include "tests/app/run_program.hpp"
#include "tests/data/hellaswag_fixture.hpp"
#include "tests/support/fixtures.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;
namespace fs = std::filesystem;

namespace {

struct Reference {   // one candidate, scored on its own
    double sum = 0.0, mean = 0.0;
};

// Candidate i of ex as its own (1,L) sequence (left-truncated to `context` tokens), one forward, and
// the mean cross-entropy of the ending's tokens that have a token before them.
Reference score_alone(app::LanguageModel& lm, const data::HellaswagExample& ex, size_t i, const data::Tokenizer& tok,
                      int64_t context) {
    std::vector<int32_t> ids = tok.encode(ex.ctx);
    const std::vector<int32_t> end = tok.encode(" " + ex.endings[i]);
    ids.insert(ids.end(), end.begin(), end.end());
    const size_t drop = ids.size() > static_cast<size_t>(context) ? ids.size() - static_cast<size_t>(context) : 0;
    const std::vector<int64_t> kept(ids.begin() + static_cast<std::ptrdiff_t>(drop), ids.end());
    const int64_t L = static_cast<int64_t>(kept.size());
    const int64_t first = std::max<int64_t>(1, L - static_cast<int64_t>(end.size()));   // the first scored position
    const Tensor idx = tensor(kept, {1, L});                                             // (1,L)
    const Tensor logits = lm.forward(idx).select(0, 0);                                  // (L,V)
    const Tensor loss = F::cross_entropy(logits.narrow(0, first - 1, L - first), idx.select(0, 0).narrow(0, first, L - first));
    Reference r;
    r.mean = loss.item<double>();
    r.sum = r.mean * static_cast<double>(L - first);
    return r;
}

int argmin4(const std::array<double, 4>& v) { return static_cast<int>(std::min_element(v.begin(), v.end()) - v.begin()); }

void check_against_unpadded(const std::string& model) {
    CAPTURE(model);
    app::RunConfig cfg;
    cfg.model = model;
    cfg.preset = model == "gpt" ? "nano" : "llama-nano";
    cfg.n_layer = 2;
    const int64_t context = 48;   // the fixture's longer rows are left-truncated
    cfg.block_size = context;
    manual_seed(11);
    std::shared_ptr<app::LanguageModel> lm = app::LanguageModel::make(cfg, 256, 0);
    NoGradGuard no_grad;
    lm->module()->eval();
    const data::Tokenizer tok = data::Tokenizer::bytes();
    const std::vector<data::HellaswagExample> examples = data::parse_hellaswag(kHellaswagFixture, "fixture");
    const app::LogitsFn forward = [&](const Tensor& idx) { return lm->forward(idx); };
    std::vector<data::HellaswagBatch> batches;
    int64_t right = 0, right_norm = 0, truncated = 0;
    for (const data::HellaswagExample& ex : examples) {
        CAPTURE(ex.line);
        batches.push_back(data::render_hellaswag(ex, tok, context));
        const app::HellaswagScores s = app::score_hellaswag(forward, batches.back(), Device(kCPU));
        std::array<double, 4> sums{}, means{};
        for (size_t i = 0; i < 4; ++i) {
            CAPTURE(i);
            const Reference ref = score_alone(*lm, ex, i, tok, context);
            sums[i] = ref.sum, means[i] = ref.mean;
            CHECK(s.sum_loss[i] == doctest::Approx(ref.sum).epsilon(2e-6));
            CHECK(s.mean_loss[i] == doctest::Approx(ref.mean).epsilon(2e-6));
            CHECK(s.char_loss[i] == doctest::Approx(ref.sum / static_cast<double>(batches.back().ending_chars[i])).epsilon(2e-6));
            truncated += batches.back().truncated[i] > 0;
        }
        CHECK(s.pred == argmin4(sums));
        CHECK(s.pred_norm == argmin4(means));
        right += argmin4(sums) == ex.label;
        right_norm += argmin4(means) == ex.label;
    }
    CHECK(truncated > 0);   // the truncation is part of what was checked
    const app::HellaswagResult r = app::evaluate_hellaswag(*lm, batches);
    CHECK(r.examples == kHellaswagFixtureExamples);
    CHECK(r.acc == doctest::Approx(static_cast<double>(right) / kHellaswagFixtureExamples));
    CHECK(r.acc_norm == doctest::Approx(static_cast<double>(right_norm) / kHellaswagFixtureExamples));
    CHECK(app::evaluate_hellaswag(*lm, batches, 2).examples == 2);
}

// Logits the same at every position: token 'a' at 5, the other 255 bytes at 0.
Tensor favour_a(const Tensor& idx) {
    const int64_t B = idx.size(0), T = idx.size(1), V = 256;
    std::vector<float> v(static_cast<size_t>(B * T * V), 0.0f);
    for (size_t k = 'a'; k < v.size(); k += V) v[k] = 5.0f;
    return tensor(v, {B, T, V});
}

// A tiny run with the byte tokenizer (it spells any text), with --hellaswag FILE unless FILE is empty.
std::vector<std::string> tiny_run(const std::string& out, const std::string& hellaswag) {
    std::vector<std::string> args = {"train", "--n-layer", "1", "--n-embd", "32", "--n-head", "2", "--block-size", "32",
                                     "--batch-size", "4", "--steps", "4", "--warmup", "1", "--eval-every", "0",
                                     "--eval-iters", "1", "--sample-tokens", "0", "--tokenizer", "byte", "--dropout", "0.1", "--progress",
                                     "plain", "--out", out};
    if (!hellaswag.empty()) args.insert(args.end(), {"--hellaswag", hellaswag});
    return args;
}

// step -> the "hellaswag" records of OUT/metrics.jsonl.
std::map<int64_t, nlohmann::json> hellaswag_records(const std::string& out) {
    std::map<int64_t, nlohmann::json> records;
    std::ifstream in(out + "/metrics.jsonl");
    std::string line;
    while (std::getline(in, line)) {
        nlohmann::json j = nlohmann::json::parse(line);
        if (j["kind"] == "hellaswag") records[j["step"].get<int64_t>()] = j;
    }
    return records;
}

void check_fails(const ProgramResult& r, const std::vector<std::string>& facts) {
    CAPTURE(r.output);
    CHECK(r.exit_code > 0);
    CHECK(r.signal == 0);
    for (const std::string& fact : facts) CHECK(r.output.find(fact) != std::string::npos);
}

}  // namespace

TEST_CASE("hellaswag scorer: the padded (4,T) batch gives each candidate's unpadded ending loss (GPT, Llama)") {
    check_against_unpadded("gpt");
    check_against_unpadded("llama");
}

// PyTorch as the oracle, through the committed fixture of tools/fixtures/hf_gpt2.py: transformers'
// logits for two rows of 5 tokens. Four candidates made of those rows (two cut short and padded with
// 0) must score what those logits give, position by position.
TEST_CASE("hellaswag scorer: the scores of transformers' logits for the tiny GPT-2 fixture") {
    const Fixture ref = load_fixture("hf_gpt2_reference");
    const std::shared_ptr<models::GPT> gpt =
        models::from_pretrained((fs::path(std::getenv("AMPGRAD_FIXTURES")) / "hf_gpt2" / "lm").string()).gpt();
    NoGradGuard no_grad;
    gpt->eval();
    const std::vector<int64_t> idx = ref.at("idx").to_vector<int64_t>();      // (2,5)
    const std::vector<float> logits = ref.at("logits").to_vector<float>();    // (2,5,260)
    const int64_t T = 5, V = 260;
    // candidate: (source row, tokens kept, first ending position)
    const std::array<std::array<int64_t, 3>, 4> rows = {{{0, 5, 2}, {1, 5, 3}, {0, 3, 1}, {1, 4, 2}}};
    data::HellaswagBatch b;
    b.T = T;
    b.ids.assign(4 * T, 0);
    b.mask.assign(4 * T, 0);
    b.ending_chars = {3, 2, 2, 2};
    std::array<double, 4> want{};
    for (size_t i = 0; i < 4; ++i) {
        const auto [src, kept, first] = rows[i];
        b.lengths[i] = kept;
        for (int64_t t = 0; t < kept; ++t) {
            b.ids[i * T + static_cast<size_t>(t)] = static_cast<int32_t>(idx[static_cast<size_t>(src * T + t)]);
            b.mask[i * T + static_cast<size_t>(t)] = t >= first;
            if (t < first) continue;
            const float* row = &logits[static_cast<size_t>((src * T + t - 1) * V)];   // predicts token t
            double z = 0.0;
            for (int64_t v = 0; v < V; ++v) z += std::exp(static_cast<double>(row[v]));
            want[i] += std::log(z) - row[idx[static_cast<size_t>(src * T + t)]];
        }
    }
    const app::HellaswagScores s =
        app::score_hellaswag([&](const Tensor& x) { return gpt->forward(x); }, b, Device(kCPU));
    for (size_t i = 0; i < 4; ++i) {
        CAPTURE(i);
        CHECK(s.sum_loss[i] == doctest::Approx(want[i]).epsilon(1e-5));
        CHECK(s.scored[i] == rows[i][1] - rows[i][2]);
    }
    CHECK(s.pred == argmin4(want));
}

TEST_CASE("hellaswag scorer: acc (summed loss) and acc_norm (per token) disagree on a long ending vs a short one") {
    const data::HellaswagExample ex{.ctx = "Q:", .endings = {"b", std::string(30, 'a'), "bbbbbbbb", "xyz"}, .label = 1};
    const data::HellaswagBatch b = data::render_hellaswag(ex, data::Tokenizer::bytes(), 64);
    const app::HellaswagScores s = app::score_hellaswag(favour_a, b, Device(kCPU));
    const double z = std::log(std::exp(5.0) + 255.0), a = z - 5.0;   // the loss of 'a', of any other byte
    const std::array<double, 4> sums = {2 * z, z + 30 * a, 9 * z, 4 * z};   // the leading space costs z
    const std::array<double, 4> tokens = {2, 31, 9, 4}, chars = {1, 30, 8, 3};
    for (size_t i = 0; i < 4; ++i) {
        CAPTURE(i);
        CHECK(s.sum_loss[i] == doctest::Approx(sums[i]).epsilon(1e-6));
        CHECK(s.mean_loss[i] == doctest::Approx(sums[i] / tokens[i]).epsilon(1e-6));
        CHECK(s.char_loss[i] == doctest::Approx(sums[i] / chars[i]).epsilon(1e-6));
    }
    CHECK(s.pred == 0);             // " b": the fewest nats in all
    CHECK(s.pred_norm == 1);        // the 30 a's: the fewest nats per token
    CHECK(s.pred_char_norm == 1);
    // Three examples, right answers 1, 1, 0: acc 1/3, acc_norm 2/3, reported apart.
    std::vector<data::HellaswagBatch> batches = {b, b, b};
    batches[2].label = 0;
    const app::HellaswagResult r = app::evaluate_hellaswag(favour_a, Device(kCPU), batches);
    CHECK(r.examples == 3);
    CHECK(r.acc == doctest::Approx(1.0 / 3.0));
    CHECK(r.acc_norm == doctest::Approx(2.0 / 3.0));
    CHECK(r.acc_char_norm == doctest::Approx(2.0 / 3.0));
    const app::HellaswagResult first = app::evaluate_hellaswag(favour_a, Device(kCPU), batches, 1);
    CHECK(first.examples == 1);
    CHECK(first.acc == 0.0);
    CHECK(first.acc_norm == 1.0);
    CHECK(app::hellaswag_text("f.jsonl", r) == "hellaswag f.jsonl: 3 examples, acc 0.3333, acc_norm 0.6667 (summed / "
                                               "per-token-mean log-likelihood of each ending); acc_char_norm 0.6667 "
                                               "(per character, lm-eval's acc_norm)");
}

TEST_CASE("run config: the --hellaswag fields are saved, and a config saved before them reads as none") {
    app::RunConfig cfg;
    cfg.hellaswag = "val.jsonl", cfg.hellaswag_every = 50, cfg.hellaswag_limit = 200;
    const app::RunConfig back = app::run_config_from_json(app::to_json(cfg));
    CHECK(back.hellaswag == "val.jsonl");
    CHECK(back.hellaswag_every == 50);
    CHECK(back.hellaswag_limit == 200);
    nlohmann::json old = app::to_json(cfg);
    for (const char* key : {"hellaswag", "hellaswag_every", "hellaswag_limit"}) old.erase(key);
    const app::RunConfig older = app::run_config_from_json(old);
    CHECK(older.hellaswag.empty());
    CHECK(older.hellaswag_every == 0);
    CHECK(older.hellaswag_limit == 0);
    cfg.task = "addition";
    CHECK_THROWS_WITH_AS(cfg.validate(), doctest::Contains("--hellaswag val.jsonl: scores endings of a text"), ValueError);
}

TEST_CASE("ampgrad train --hellaswag-every writes metrics.jsonl records; eval --hellaswag prints the line; --resume") {
    const fs::path dir = make_temp_dir("hellaswag_app");
    const std::string fixture = write_hellaswag_fixture(dir), out = (dir / "run").string();
    ProgramResult r = run_ampgrad(plus(tiny_run(out, fixture), {"--hellaswag-every", "2"}));
    CAPTURE(r.output);
    REQUIRE(r.exit_code == 0);
    CHECK(r.output.find("hellaswag: " + fixture + ", 5 examples, every 2 steps and at the end") != std::string::npos);
    CHECK(r.output.find("hellaswag step 2: 5 examples, acc ") != std::string::npos);
    CHECK(r.output.find("hellaswag step 4: 5 examples, acc ") != std::string::npos);
    std::map<int64_t, nlohmann::json> records = hellaswag_records(out);
    REQUIRE(records.size() == 2);
    for (const auto& [step, j] : records) {
        CAPTURE(step);
        CHECK((step == 2 || step == 4));
        CHECK(j.at("hellaswag_examples") == 5);
        for (const char* key : {"hellaswag_acc", "hellaswag_acc_norm", "hellaswag_acc_char_norm"}) {
            const double v = j.at(key).get<double>();
            CHECK(v * 5 == doctest::Approx(std::round(v * 5)));   // a count out of 5
        }
    }
    // The evaluations leave the training as it was: the same weights as a run without --hellaswag.
    const std::string plain = (dir / "plain").string();
    REQUIRE(run_ampgrad(tiny_run(plain, "")).exit_code == 0);
    CHECK(read_bytes(fs::path(out) / "checkpoints" / "step-00000004" / "model.safetensors") ==
          read_bytes(fs::path(plain) / "checkpoints" / "step-00000004" / "model.safetensors"));
    // The checkpoint evaluates as the run did at its last step.
    r = run_ampgrad({"eval", "--ckpt", out, "--hellaswag", fixture});
    REQUIRE(r.exit_code == 0);
    const nlohmann::json& last = records.at(4);
    CHECK(r.output.find(fmt::format("hellaswag {}: 5 examples, acc {:.4f}, acc_norm {:.4f} (summed / per-token-mean "
                                    "log-likelihood of each ending); acc_char_norm {:.4f}", fixture,
                                    last.at("hellaswag_acc").get<double>(), last.at("hellaswag_acc_norm").get<double>(),
                                    last.at("hellaswag_acc_char_norm").get<double>())) != std::string::npos);
    r = run_ampgrad({"eval", "--ckpt", out, "--hellaswag", fixture, "--limit", "2"});
    REQUIRE(r.exit_code == 0);
    CHECK(r.output.find("hellaswag " + fixture + ": 2 examples, acc ") != std::string::npos);
    // --resume may change the --hellaswag flags (not the training): every step now, 3 examples.
    r = run_ampgrad(plus(tiny_run(out, fixture), {"--steps", "6", "--hellaswag-every", "1", "--hellaswag-limit", "3",
                                                  "--resume", out}));
    REQUIRE(r.exit_code == 0);
    records = hellaswag_records(out);
    CHECK(records.size() == 4);   // 2, 4, then 5 and 6
    CHECK(records.at(5).at("hellaswag_examples") == 3);
    CHECK(records.at(6).at("hellaswag_examples") == 3);
    std::ifstream state_file(fs::path(out) / "checkpoints" / "step-00000006" / "state.json");
    REQUIRE(state_file.good());
    const nlohmann::json state = nlohmann::json::parse(state_file);
    CHECK(state.at("run_config").at("hellaswag_every") == 1);
    CHECK(state.at("run_config").at("hellaswag_limit") == 3);
    CHECK(state.at("run_config").at("hellaswag") == fixture);
    fs::remove_all(dir);
}

TEST_CASE("--hellaswag: a malformed file, a tokenizer that cannot spell it and misplaced flags are named") {
    const fs::path dir = make_temp_dir("hellaswag_bad");
    const std::string fixture = write_hellaswag_fixture(dir);
    const std::string bad = write_hellaswag_fixture(dir, "bad.jsonl", "{\"ctx\": \"x\", \"label\": 0, \"endings\": [\"a\"]}\n");
    check_fails(run_ampgrad(tiny_run((dir / "a").string(), bad)),
                {bad + ":1: the field \"endings\" has 1 entries; HellaSwag's layout has exactly 4"});
    std::vector<std::string> chars = tiny_run((dir / "b").string(), fixture);
    chars[std::find(chars.begin(), chars.end(), "byte") - chars.begin()] = "char";   // Tiny Shakespeare's 65 characters
    // Line 5 is the first with a character Tiny Shakespeare lacks ('[').
    check_fails(run_ampgrad(chars), {fixture + ": hellaswag example at line 5", "a byte or BPE tokenizer does"});
    check_fails(run_ampgrad({"eval", "--limit", "3"}), {"--limit"});
    check_fails(run_ampgrad(plus(tiny_run((dir / "c").string(), fixture), {"--task", "addition"})),
                {"needs --task text"});
    check_fails(run_ampgrad(plus(tiny_run((dir / "d").string(), fixture), {"--hellaswag-every", "-1"})),
                {"--hellaswag-every"});
    fs::remove_all(dir);
}
