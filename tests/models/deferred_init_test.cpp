// deferred_init_test.cpp: deferred initialisation (issue 23): nn::init::SkipInitGuard builds
// nn::Linear, nn::Embedding, nn::LayerNorm and models::GPT without drawing or filling their
// parameters, and io::load_state_dict then reads each tensor straight into its parameter. Building
// then loading allocates every parameter once (no tensor allocation during the load) and writes it
// once (its version counter is 1: the load's write only), with the saved values.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <unistd.h>

#include "autograd/ops/ops.hpp"
#include "core/allocator.hpp"
#include "core/error.hpp"
#include "core/philox.hpp"
#include "io/safetensors.hpp"
#include "models/gpt.hpp"
#include "nn/embedding.hpp"
#include "nn/init.hpp"
#include "nn/layer_norm.hpp"
#include "nn/linear.hpp"

using namespace ampgrad;
namespace fs = std::filesystem;

namespace {

const models::GPTConfig kConfig{.vocab_size = 65, .block_size = 16, .n_layer = 2, .n_head = 2, .n_embd = 32};

// Bytes of the module's distinct state tensors (the tied head, one memory under two names, counted once).
int64_t state_bytes(const nn::Module& m) {
    int64_t total = 0;
    std::vector<const void*> seen;
    for (const auto& [name, t] : m.state_dict()) {
        if (std::find(seen.begin(), seen.end(), t.raw_data()) != seen.end()) continue;
        seen.push_back(t.raw_data());
        total += t.numel() * static_cast<int64_t>(t.element_size());
    }
    return total;
}

std::string saved_gpt(const fs::path& dir) {
    manual_seed(5);
    models::GPT trained(kConfig);
    const std::string path = (dir / "gpt.safetensors").string();
    io::save_state_dict(trained, path);
    return path;
}

}  // namespace

TEST_CASE("SkipInitGuard: Linear, Embedding, LayerNorm allocate but neither draw nor fill; nested; ends with its scope") {
    const GeneratorState rng = get_rng_state();
    {
        nn::init::SkipInitGuard outer;
        nn::init::SkipInitGuard inner;
        nn::Linear fc(3, 4);
        nn::Embedding emb(5, 2);
        nn::LayerNorm ln(Shape{4});
        for (const Tensor& p : {fc.weight, fc.bias, emb.weight, ln.weight, ln.bias}) {
            CHECK(p.defined());
            CHECK(p._version() == 0);                                  // never written
        }
        CHECK(fc.weight.sizes() == Shape{4, 3});
        CHECK(nn::init::skipping_init());
    }
    CHECK_FALSE(nn::init::skipping_init());
    CHECK(get_rng_state().offset == rng.offset);                      // no random number was drawn
    nn::Linear after(3, 4);                                            // the guard is gone: initialised
    CHECK(after.weight._version() == 1);
    CHECK(get_rng_state().offset > rng.offset);
}

TEST_CASE("a GPT built under SkipInitGuard, then loaded: each parameter allocated once and written once") {
    const fs::path dir = fs::temp_directory_path() / ("ampgrad_deferred_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    const std::string path = saved_gpt(dir);
    manual_seed(5);
    models::GPT reference(kConfig);                                    // the saved values

    const GeneratorState rng = get_rng_state();
    const AllocatorStats before = memory_stats(Device(kCPU));
    std::unique_ptr<models::GPT> model;
    {
        nn::init::SkipInitGuard skip;
        model = std::make_unique<models::GPT>(kConfig);
    }
    const AllocatorStats built = memory_stats(Device(kCPU));
    CHECK(get_rng_state().offset == rng.offset);                       // nothing drawn
    CHECK(built.allocated_bytes - before.allocated_bytes == state_bytes(*model));
    for (const auto& [name, p] : model->named_parameters()) {
        CAPTURE(name);
        CHECK(p._version() == 0);
    }

    io::load_state_dict(*model, path);
    const AllocatorStats loaded = memory_stats(Device(kCPU));
    CHECK(loaded.num_allocs == built.num_allocs);                      // the load allocated no tensor
    CHECK(loaded.peak_allocated_bytes <= std::max(built.peak_allocated_bytes, built.allocated_bytes));
    auto want = reference.named_parameters();
    for (const auto& [name, p] : model->named_parameters()) {
        CAPTURE(name);
        CHECK(p._version() == 1);                                      // written once: by the load
        CHECK(p.to_vector<float>() == want.at(name).to_vector<float>());
    }
    CHECK(model->wte->weight.raw_data() == model->lm_head->named_parameters().at("weight").raw_data());   // still tied

    // Built the usual way, wpe is written three times: nn::Embedding's own N(0, 1), GPT's N(0, 0.02),
    // then the load.
    models::GPT eager(kConfig);
    io::load_state_dict(eager, path);
    CHECK(eager.wpe->weight._version() == 3);
    fs::remove_all(dir);
}

TEST_CASE("io::load_state_dict into another dtype casts through a copy, and keeps load_state_dict's errors") {
    const fs::path dir = fs::temp_directory_path() / ("ampgrad_deferred_dt_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    const std::string path = saved_gpt(dir);
    manual_seed(5);
    models::GPT reference(kConfig);
    models::GPT half(kConfig);
    half.to(kFloat16);
    io::load_state_dict(half, path);
    CHECK(half.wpe->weight.to_vector<float>() == reference.wpe->weight.to(kFloat16).to_vector<float>());
    models::GPTConfig wider = kConfig;
    wider.n_embd = 64;
    models::GPT other(wider);
    CHECK_THROWS_WITH_AS(io::load_state_dict(other, path), doctest::Contains("size mismatch for transformer.wpe.weight"),
                         ShapeError);
    nn::Linear fc(3, 4);
    CHECK_THROWS_WITH_AS(io::load_state_dict(fc, path), doctest::Contains("Missing key(s) in state_dict: \"weight\""),
                         ValueError);
    fs::remove_all(dir);
}
