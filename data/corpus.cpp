// corpus.cpp: data/tinyshakespeare.txt embedded with the assembler's .incbin (the path comes from
// meson as AMPGRAD_CORPUS_PATH), between two symbols, read-only.
#include <cstddef>

#include "data/text.hpp"

#ifndef AMPGRAD_CORPUS_PATH
#error "AMPGRAD_CORPUS_PATH must name data/tinyshakespeare.txt (set by meson.build)"
#endif

asm(".section .rodata\n"
    ".balign 16\n"
    ".globl ampgrad_corpus_begin\n"
    ".hidden ampgrad_corpus_begin\n"
    "ampgrad_corpus_begin:\n"
    ".incbin \"" AMPGRAD_CORPUS_PATH "\"\n"
    ".globl ampgrad_corpus_end\n"
    ".hidden ampgrad_corpus_end\n"
    "ampgrad_corpus_end:\n"
    ".byte 0\n"
    ".previous\n");

extern "C" __attribute__((visibility("hidden"))) const char ampgrad_corpus_begin[];
extern "C" __attribute__((visibility("hidden"))) const char ampgrad_corpus_end[];

namespace ampgrad::data {

std::string_view tiny_shakespeare() {
    return {ampgrad_corpus_begin, static_cast<size_t>(ampgrad_corpus_end - ampgrad_corpus_begin)};
}

}  // namespace ampgrad::data
