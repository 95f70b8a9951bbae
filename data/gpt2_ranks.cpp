// gpt2_ranks.cpp: GPT-2's BPE ranks (data/gpt2.tiktoken, tiktoken's rank file) embedded with the
// assembler's .incbin, as data/corpus.cpp embeds Tiny Shakespeare (the path comes from meson as
// AMPGRAD_GPT2_RANKS_PATH), so `--tokenizer gpt2` needs no file at run time.
#include <string_view>

#include "data/bpe_tokenizer.hpp"

#ifndef AMPGRAD_GPT2_RANKS_PATH
#error "AMPGRAD_GPT2_RANKS_PATH must name data/gpt2.tiktoken (set by meson.build)"
#endif

asm(".section .rodata\n"
    ".balign 16\n"
    ".globl ampgrad_gpt2_ranks_begin\n"
    ".hidden ampgrad_gpt2_ranks_begin\n"
    "ampgrad_gpt2_ranks_begin:\n"
    ".incbin \"" AMPGRAD_GPT2_RANKS_PATH "\"\n"
    ".globl ampgrad_gpt2_ranks_end\n"
    ".hidden ampgrad_gpt2_ranks_end\n"
    "ampgrad_gpt2_ranks_end:\n"
    ".byte 0\n"
    ".previous\n");

extern "C" __attribute__((visibility("hidden"))) const char ampgrad_gpt2_ranks_begin[];
extern "C" __attribute__((visibility("hidden"))) const char ampgrad_gpt2_ranks_end[];

namespace ampgrad::data {

std::string_view gpt2_tiktoken_ranks() {
    return {ampgrad_gpt2_ranks_begin, static_cast<size_t>(ampgrad_gpt2_ranks_end - ampgrad_gpt2_ranks_begin)};
}

}  // namespace ampgrad::data
