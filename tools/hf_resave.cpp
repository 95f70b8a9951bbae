// hf_resave.cpp: reads a Hugging Face model folder with models::from_pretrained and writes it back
// with models::save_pretrained (in the dtype given, default the file's f32). tools/fixtures/hf_gpt2.py
// runs it to check that transformers loads what ampgrad writes.
//
//   build/tools/hf_resave IN_DIR OUT_DIR [f32|f16|bf16]      (OUT_DIR "-": load only, e.g. to
//                                                           measure peak memory with /usr/bin/time -v)
#include <cstdio>
#include <string>

#include "ampgrad/ampgrad.h"

int main(int argc, char** argv) {
    using namespace ampgrad;
    if (argc < 3 || argc > 4) {
        std::fprintf(stderr, "usage: %s IN_DIR OUT_DIR [f32|f16|bf16]\n", argv[0]);
        return 2;
    }
    const std::string dtype = argc == 4 ? argv[3] : "f32";
    try {
        models::PretrainedOptions options;
        options.dtype = dtype == "f16" ? kFloat16 : dtype == "bf16" ? kBFloat16 : kFloat32;
        models::PretrainedModel m = models::from_pretrained(argv[1], options);
        if (std::string(argv[2]) != "-") models::save_pretrained(m, argv[2]);
        std::printf("%s (%s) -> %s\n", argv[1], m.architecture.c_str(), argv[2]);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "hf_resave: error: %s\n", e.what());
        return 1;
    }
    return 0;
}
