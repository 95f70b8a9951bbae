// peft_resave.cpp: writes a LoRA adapter with ampgrad, and the logits ampgrad computes with it, for
// tools/fixtures/peft_lora.py to load in PEFT (PeftModel.from_pretrained) and compare.
//
//   build/tools/peft_resave resave BASE_DIR ADAPTER_DIR OUT_DIR BxT IDS    (PEFT's adapter, re-saved)
//   build/tools/peft_resave fresh  BASE_DIR ADAPTER_DIR OUT_DIR BxT IDS    (ADAPTER_DIR's config, new random A and B)
// IDS: the batch's B*T token ids, comma-separated. OUT_DIR/ampgrad_logits.json: {"logits": [...]}, (B,T,V) flat.
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "ampgrad/ampgrad.h"

namespace {

using namespace ampgrad;

Tensor parse_ids(const std::string& shape, const std::string& ids) {
    const size_t x = shape.find('x');
    const int64_t b = std::stoll(shape.substr(0, x)), t = std::stoll(shape.substr(x + 1));
    std::vector<int64_t> values;
    std::stringstream in(ids);
    for (std::string item; std::getline(in, item, ',');) values.push_back(std::stoll(item));
    return tensor<int64_t>(values, {b, t});
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 7) {
        std::fprintf(stderr, "usage: %s resave|fresh BASE_DIR ADAPTER_DIR OUT_DIR BxT IDS\n", argv[0]);
        return 2;
    }
    const std::string mode = argv[1], base = argv[2], adapter = argv[3], out = argv[4];
    try {
        auto lm = models::from_pretrained(base).causal_lm();
        models::LoraConfig config;
        if (mode == "resave") {
            config = models::load_peft_adapter(*lm, adapter);
        } else {
            config = models::read_peft_config(adapter);
            config.init_lora_weights = "false";   // random A and B: the adapter changes the logits
            manual_seed(1234);
            models::apply_lora(models::as_module(*lm), config);
        }
        config.base_model_name_or_path = base;
        models::save_peft_adapter(*lm, config, out);
        NoGradGuard no_grad;
        models::as_module(*lm).eval();
        Tensor logits = lm->forward(parse_ids(argv[5], argv[6])).to(kFloat64).contiguous();   // (B,T,V)
        nlohmann::json j = {{"logits", logits.to_vector<double>()}};
        std::ofstream(out + "/ampgrad_logits.json") << j.dump();
        std::printf("%s: %s -> %s\n", mode.c_str(), adapter.c_str(), out.c_str());
    } catch (const std::exception& e) {
        std::fprintf(stderr, "peft_resave: error: %s\n", e.what());
        return 1;
    }
    return 0;
}
