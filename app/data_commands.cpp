// data_commands.cpp: `ampgrad data prepare` (app/data_commands.hpp): the tokenizer, a progress bar
// on stderr (MB/s, tokens, ETA by input bytes; in place on a terminal, a plain line every few
// seconds otherwise) and the summary on stdout. The work is data::prepare_token_shards.
#include "app/data_commands.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>

#include <fmt/format.h>

#include "data/prepare.hpp"

namespace ampgrad::app {

namespace {

std::string clock_text(double seconds) {
    const auto s = static_cast<int64_t>(seconds + 0.5);
    return s >= 3600 ? fmt::format("{}:{:02d}:{:02d}", s / 3600, s / 60 % 60, s % 60) : fmt::format("{}:{:02d}", s / 60, s % 60);
}

// The progress bar: redrawn at most 10 times a second in place, or a plain line every 5 s.
class PrepareBar {
public:
    explicit PrepareBar(bool in_place) : in_place_(in_place) {}
    ~PrepareBar() { end_line(); }

    void update(const data::PrepareProgress& p) {
        const double since = p.seconds - last_;
        if (since < (in_place_ ? 0.1 : 5.0) && p.input_bytes < p.total_input_bytes) return;
        last_ = p.seconds;
        const double mb = static_cast<double>(p.input_bytes) / 1e6, total_mb = static_cast<double>(p.total_input_bytes) / 1e6;
        const double rate = p.seconds > 0 ? mb / p.seconds : 0.0;
        const double pct = total_mb > 0 ? 100.0 * mb / total_mb : 100.0;
        const std::string eta = rate > 0 ? clock_text((total_mb - mb) / rate) : "?";
        constexpr int kWidth = 24;
        const int filled = static_cast<int>(pct / 100.0 * kWidth);
        const std::string line = fmt::format("[{}{}] {:5.1f}% {:.1f}/{:.1f} MB  {:.2f} MB/s  {} tokens  {} shards  ETA {}",
                                             std::string(static_cast<size_t>(filled), '#'),
                                             std::string(static_cast<size_t>(kWidth - filled), '.'), pct, mb, total_mb,
                                             rate, p.tokens, p.shards, eta);
        std::fprintf(stderr, in_place_ ? "\r\033[K%s" : "%s\n", line.c_str());
        open_ = in_place_;
    }
    void end_line() {
        if (open_) std::fputc('\n', stderr);
        open_ = false;
    }

private:
    bool in_place_, open_ = false;
    double last_ = 0;
};

}  // namespace

int run_data_prepare(const DataPrepareOptions& o) {
    const std::vector<data::InputFile> files = data::list_input_files(o.inputs);
    const data::PrepareTokenizer tok = data::resolve_prepare_tokenizer(o.tokenizer, files);
    data::PrepareOptions opts;
    opts.inputs = o.inputs;
    opts.output = o.output;
    opts.name = o.name;
    opts.shard_tokens = o.shard_tokens;
    opts.val_tokens = o.val_tokens;
    opts.threads = o.threads;
    opts.overwrite = o.overwrite;
    const bool in_place = o.progress == "line" || (o.progress == "auto" && ::isatty(STDERR_FILENO));
    PrepareBar bar(in_place);
    const data::PrepareResult r =
        data::prepare_token_shards(opts, files, tok, [&](const data::PrepareProgress& p) { bar.update(p); });
    bar.end_line();
    if (r.up_to_date) {
        std::printf("data prepare: %s is complete already (%zu shards, %lld tokens from %lld documents): nothing to do\n",
                    o.output.c_str(), r.shards.size(), static_cast<long long>(r.tokens), static_cast<long long>(r.documents));
        return 0;
    }
    const double mb = static_cast<double>(r.input_bytes) / 1e6;
    std::printf("data prepare: %zu files, %lld documents, %.1f MB -> %lld tokens (%s tokenizer, V=%lld, %s) in %zu "
                "shards in %s (%lld kept from an earlier run); %.2f s on %d threads, %.2f MB/s\n",
                files.size(), static_cast<long long>(r.documents), mb, static_cast<long long>(r.tokens),
                o.tokenizer.c_str(), static_cast<long long>(tok.tokenizer.vocab_size()),
                data::shard_dtype_name(data::shard_dtype_for_vocab(tok.tokenizer.vocab_size())), r.shards.size(),
                o.output.c_str(), static_cast<long long>(r.kept_shards), r.seconds, r.threads,
                r.seconds > 0 ? mb / r.seconds : 0.0);
    return 0;
}

}  // namespace ampgrad::app
