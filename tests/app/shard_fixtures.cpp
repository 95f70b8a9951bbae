// shard_fixtures.cpp: token shards and checkpoint parameters for tests/app (tests/app/shard_fixtures.hpp).
#include "tests/app/shard_fixtures.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include <fmt/format.h>

#include "app/trainer.hpp"
#include "autograd/ops/ops.hpp"
#include "data/text.hpp"
#include "data/token_shards.hpp"

namespace ampgrad::testing {

std::string write_text_shards(const std::string& dir, int64_t val_tokens, int64_t shard_tokens, int64_t total_tokens,
                              const std::string& name) {
    std::filesystem::create_directories(dir);
    const std::string_view text = data::tiny_shakespeare();
    auto write = [&](const std::string& file, int64_t first, int64_t n) {
        data::ShardWriter w((std::filesystem::path(dir) / file).string(), data::ShardDtype::kUint16);
        std::vector<int32_t> ids(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) ids[static_cast<size_t>(i)] = static_cast<unsigned char>(text[static_cast<size_t>(first + i)]);
        w.append(ids);
        w.finish();
    };
    write(fmt::format("{}_val_000000.bin", name), 0, val_tokens);
    int shard = 1;
    for (int64_t first = val_tokens; first < total_tokens; first += shard_tokens, ++shard)
        write(fmt::format("{}_train_{:06d}.bin", name, shard), first, std::min(shard_tokens, total_tokens - first));
    return dir;
}

std::vector<std::pair<std::string, std::vector<double>>> checkpoint_parameters(const std::string& out_or_dir) {
    std::unique_ptr<app::Trainer> t = app::Trainer::resume(out_or_dir, std::nullopt, /*for_inference=*/true);
    std::vector<std::pair<std::string, std::vector<double>>> out;
    for (const auto& [name, p] : t->model().module()->named_parameters())
        out.emplace_back(name, p.detach().to(kFloat64).contiguous().to_vector<double>());
    return out;
}

ParameterDifference parameter_difference(const std::string& a, const std::string& b) {
    const auto pa = checkpoint_parameters(a), pb = checkpoint_parameters(b);
    if (pa.size() != pb.size()) return {INFINITY, INFINITY};
    ParameterDifference d;
    double count = 0.0;
    for (size_t i = 0; i < pa.size(); ++i) {
        if (pa[i].first != pb[i].first || pa[i].second.size() != pb[i].second.size()) return {INFINITY, INFINITY};
        for (size_t k = 0; k < pa[i].second.size(); ++k) {
            const double diff = std::abs(pa[i].second[k] - pb[i].second[k]);
            d.max = std::max(d.max, diff);
            d.mean += diff;
            count += 1.0;
        }
    }
    d.mean /= count;
    return d;
}

}  // namespace ampgrad::testing
