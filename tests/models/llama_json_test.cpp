// llama_json_test.cpp: models/llama_json: LlamaConfig <-> transformers' config.json, in both rope
// layouts (4.x top-level rope_theta/rope_scaling, 5.x rope_parameters), defaults, and errors naming the key.
#include <doctest/doctest.h>

#include "tests/support/check_close.hpp"

using namespace ampgrad;
using models::LlamaConfig;

TEST_CASE("config.json: round trip, transformers 4.x and 5.x rope layouts, errors naming the key") {
    LlamaConfig c;
    c.vocab_size = 13, c.hidden_size = 32, c.intermediate_size = 64, c.num_hidden_layers = 2;
    c.num_attention_heads = 4, c.num_key_value_heads = 2, c.max_position_embeddings = 16;
    c.head_dim = 12, c.rope_theta = 500000.0, c.rope_scaling = nn::Llama3RopeScaling{32.0, 1.0, 4.0, 8192};
    nlohmann::json j = models::to_hf_json(c);
    CHECK(j.at("model_type") == "llama");
    CHECK(models::llama_config_from_hf_json(j) == c);
    nlohmann::json v5 = j;   // transformers 5.x: theta and scaling inside rope_parameters
    v5.erase("rope_scaling");
    v5.erase("rope_theta");
    v5["rope_parameters"] = {{"rope_type", "llama3"}, {"rope_theta", 500000.0}, {"factor", 32.0},
                             {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0},
                             {"original_max_position_embeddings", 8192}};
    CHECK(models::llama_config_from_hf_json(v5) == c);
    nlohmann::json no_kv = j;
    no_kv.erase("num_key_value_heads");
    CHECK(models::llama_config_from_hf_json(no_kv).num_key_value_heads == 4);   // default: MHA
    nlohmann::json bad = j;
    bad.erase("hidden_size");
    CHECK_THROWS_WITH_AS(models::llama_config_from_hf_json(bad), doctest::Contains("\"hidden_size\" is missing"),
                         ValueError);
    bad = j;
    bad["rope_scaling"]["rope_type"] = "yarn";
    CHECK_THROWS_WITH_AS(models::llama_config_from_hf_json(bad), doctest::Contains("\"yarn\" is not supported"),
                         ValueError);
}
