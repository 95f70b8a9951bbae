// gpt_parity_test.cpp: models::GPT against the same model in PyTorch (tools/fixtures/gpt.py).
// Both start from the same initial weights, loaded here through safetensors
// (tests/fixtures/gpt_parity_init.safetensors, written by PyTorch with the tied head stored once),
// and train in fp32 with AdamW (weight decay on matrices only, betas 0.9/0.99), gradient clipping
// at 1.0 and a constant learning rate, on the same 60 batches. Every step's loss must match
// PyTorch's to 2e-5 relative (float32 GEMMs sum in a different order, so bit equality is not expected).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>

#include "io/safetensors.hpp"
#include "tests/support/check_close.hpp"
#include "tests/support/fixtures.hpp"

using namespace ampgrad;

TEST_CASE("PyTorch parity: 60 fp32 AdamW steps from the same safetensors weights, loss by loss") {
    testing::Fixture fx = testing::load_fixture("gpt_parity");
    models::GPTConfig cfg;
    cfg.vocab_size = static_cast<int64_t>(fx.param("V"));
    cfg.block_size = static_cast<int64_t>(fx.param("T"));
    cfg.n_embd = static_cast<int64_t>(fx.param("C"));
    cfg.n_layer = static_cast<int64_t>(fx.param("L"));
    cfg.n_head = static_cast<int64_t>(fx.param("NH"));
    models::GPT model(cfg);
    io::SafetensorsFile init = io::load_safetensors(std::string(std::getenv("AMPGRAD_FIXTURES")) +
                                                    "/gpt_parity_init.safetensors");
    CHECK(init.tied.at("lm_head.weight") == "transformer.wte.weight");
    model.load_state_dict(init.tensors);
    CHECK(model.lm_head->parameters()[0].is_same(model.wte->weight));   // still tied after loading

    optim::ParamGroup decay, other;
    decay.options["weight_decay"] = fx.param("weight_decay");
    other.options["weight_decay"] = 0.0;
    for (const Tensor& p : model.parameters()) (p.dim() >= 2 ? decay : other).params.push_back(p);
    optim::AdamW opt({decay, other}, optim::AdamWOptions(fx.param("lr")).betas({fx.param("beta1"), fx.param("beta2")})
                                         .eps(fx.param("eps")));
    const Tensor& x = fx.at("x");                                        // (steps,B,T)
    const Tensor& y = fx.at("y");
    std::vector<double> expected = fx.at("losses").to_vector<double>();
    double worst = 0.0;
    for (int64_t s = 0; s < static_cast<int64_t>(expected.size()); ++s) {
        Tensor loss = model.forward(x.select(0, s).contiguous(), y.select(0, s).contiguous());
        opt.zero_grad();
        loss.backward();
        nn::utils::clip_grad_norm_(model.parameters(), fx.param("clip"));
        opt.step();
        const double got = loss.item<double>(), rel = std::abs(got - expected[s]) / std::abs(expected[s]);
        worst = std::max(worst, rel);
        CAPTURE(s);
        CHECK(rel < 2e-5);
    }
    MESSAGE("loss " << expected.front() << " -> " << expected.back() << "; worst relative difference " << worst);
    CHECK(expected.back() < 0.5 * expected.front());                      // the run learns something
}
