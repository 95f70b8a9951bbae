// quantize_nf4_test.cpp: models::quantize_base_nf4 on a toy Llama: every Linear but lm_head in NF4,
// the bytes per parameter QLoRA's memory figure gives (0.5625 at block 64, ~0.516 with double
// quantisation), and the model still runs forward and backward, close to its dense self.
#include <doctest/doctest.h>

#include "tests/support/check_close.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

namespace {

models::LlamaConfig toy_config() {
    models::LlamaConfig c;
    c.vocab_size = 13, c.hidden_size = 64, c.intermediate_size = 128, c.num_hidden_layers = 2;
    c.num_attention_heads = 4, c.num_key_value_heads = 2, c.max_position_embeddings = 16;
    return c;
}

}  // namespace

TEST_CASE("quantize_base_nf4: all Linear layers but lm_head, at 0.5625 bytes per parameter") {
    manual_seed(3);
    models::Llama model(toy_config());
    Tensor idx = tensor(std::vector<int64_t>{1, 5, 9, 2, 7, 3}, {1, 6});
    Tensor dense_logits = model.forward(idx).detach();
    const size_t dense_count = model.named_parameters().size();

    models::NF4Summary s = models::quantize_base_nf4(model);
    CHECK(s.layers == 2 * 7);                                           // q, k, v, o, gate, up, down per layer
    const int64_t per_layer = 2 * 64 * 64 + 2 * 32 * 64 + 3 * 128 * 64;   // q, o (64,64); k, v (32,64); the mlp
    CHECK(s.parameters == 2 * per_layer);
    CHECK(s.bytes_per_parameter() == doctest::Approx(0.5625));
    CHECK(model.named_parameters().size() == dense_count - 14);
    CHECK(model.state_dict().contains("lm_head.weight"));                // excluded: still dense
    CHECK(!model.state_dict().contains("model.layers.0.self_attn.q_proj.weight"));
    CHECK(models::quantize_base_nf4(model).layers == 0);                // already quantised: skipped

    Tensor logits = model.forward(idx);
    CHECK_CLOSE(logits, dense_logits, (Tolerance{0.5, 0.0}));              // 4-bit weights: near, not equal
    model.forward(idx, tensor(std::vector<int64_t>{5, 9, 2, 7, 3, 1}, {1, 6})).backward();
    CHECK(model.lm_head->weight.grad().defined());
}

TEST_CASE("quantize_base_nf4 with double quantisation and an exclusion list") {
    models::Llama model(toy_config());
    models::NF4Summary s = models::quantize_base_nf4(model, {"lm_head", "down_proj"}, NF4Options{.double_quant = true});
    CHECK(s.layers == 2 * 6);
    CHECK(s.bytes_per_parameter() > 0.5);
    CHECK(s.bytes_per_parameter() < 0.52);                              // 4 + 8/64 bits + the second level
    CHECK(model.state_dict().contains("model.layers.1.mlp.down_proj.weight"));
}
