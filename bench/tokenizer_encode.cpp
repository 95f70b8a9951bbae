// tokenizer_encode.cpp: GPT-2 BPE encoding throughput of data::BpeTokenizer on one thread: the
// text (default: the bundled Tiny Shakespeare) encoded whole, once per repeat (each call starts
// with an empty word cache). Prints one JSON line: MB/s (wall, median; and thread CPU), the load
// time of the rank file, and the number of ids. bench/tokenizer_encode.py runs it beside Hugging
// Face `tokenizers` and tiktoken (docs/benchmarks.md, "Tokenizer").
#include <ampgrad/ampgrad.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <ctime>

#include "bench/bench_util.hpp"

using namespace ampgrad;

namespace {

double thread_cpu_seconds() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"GPT-2 BPE encode throughput (one thread)"};
    std::string ranks, text_file;
    int repeats = 7;
    app.add_option("--ranks", ranks, "a tiktoken rank file (gpt2.tiktoken)")->required();
    app.add_option("--text", text_file, "text to encode (default: the bundled Tiny Shakespeare)");
    app.add_option("--repeats", repeats, "timed encodes (the median is reported)");
    CLI11_PARSE(app, argc, argv);

    double t0 = bench::now_seconds();
    const data::BpeTokenizer tok = data::BpeTokenizer::from_tiktoken(ranks);
    const double load_s = bench::now_seconds() - t0;
    const std::string text = text_file.empty() ? std::string(data::tiny_shakespeare()) : data::read_text_file(text_file);
    size_t n_ids = tok.encode(text).size();   // warm-up
    std::vector<double> wall, cpu;
    for (int r = 0; r < repeats; ++r) {
        const double w = bench::now_seconds(), c = thread_cpu_seconds();
        n_ids = tok.encode(text).size();
        cpu.push_back(thread_cpu_seconds() - c);
        wall.push_back(bench::now_seconds() - w);
    }
    const double mb = static_cast<double>(text.size()) / 1e6;
    std::printf("{\"impl\": \"ampgrad\", \"bytes\": %zu, \"ids\": %zu, \"mb_per_s\": %.3f, \"cpu_mb_per_s\": %.3f, "
                "\"load_ms\": %.1f}\n", text.size(), n_ids, mb / bench::median(wall), mb / bench::median(cpu),
                1e3 * load_s);
    return 0;
}
