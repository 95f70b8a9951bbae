// shard_filler.cpp: tokens into llm.c-named shards of a fixed size (data/shard_filler.hpp).
#include "data/shard_filler.hpp"

#include <algorithm>
#include <filesystem>

#include <fmt/format.h>

#include "core/error.hpp"

namespace ampgrad::data {

std::string shard_file_name(const std::string& name, int64_t index) {
    return fmt::format("{}_{}_{:06d}.bin", name, shard_split(index), index);
}

const char* shard_split(int64_t index) { return index == 0 ? "val" : "train"; }

void check_shard_plan(const ShardPlan& plan) {
    if (plan.shard_tokens < 1 || plan.shard_tokens > INT32_MAX)
        throw ValueError(fmt::format("data prepare: --shard-tokens {}: expected 1 to {} (the shard header's count is an "
                                     "int32)", plan.shard_tokens, INT32_MAX));
    if (plan.val_tokens < 0 || plan.val_tokens > INT32_MAX)
        throw ValueError(fmt::format("data prepare: --val-tokens {}: expected 0 (a whole shard) to {}", plan.val_tokens,
                                     INT32_MAX));
}

ShardFiller::ShardFiller(ShardPlan plan, std::set<int64_t> keep, std::function<void(const ShardRecord&)> on_shard_done)
    : plan_(std::move(plan)), keep_(std::move(keep)), on_shard_done_(std::move(on_shard_done)) {
    check_shard_plan(plan_);
}

int64_t ShardFiller::capacity(int64_t index) const {
    return index == 0 && plan_.val_tokens > 0 ? plan_.val_tokens : plan_.shard_tokens;
}

void ShardFiller::append(std::span<const int32_t> tokens) {
    if (finished_) throw InternalError("ShardFiller: append after finish()");
    while (!tokens.empty()) {
        if (in_current_ == 0 && !keep_.contains(index_) && !writer_) {
            const std::string path = (std::filesystem::path(plan_.dir) / shard_file_name(plan_.name, index_)).string();
            writer_ = std::make_unique<ShardWriter>(path, plan_.dtype);
        }
        const int64_t room = capacity(index_) - in_current_;
        const size_t n = static_cast<size_t>(std::min<int64_t>(room, static_cast<int64_t>(tokens.size())));
        if (writer_) writer_->append(tokens.data(), n);
        in_current_ += static_cast<int64_t>(n);
        total_tokens_ += static_cast<int64_t>(n);
        tokens = tokens.subspan(n);
        if (in_current_ == capacity(index_)) close_current();
    }
}

void ShardFiller::close_current() {
    ShardRecord r{index_, shard_file_name(plan_.name, index_), in_current_, writer_ == nullptr};
    if (writer_) {
        writer_->finish();
        writer_.reset();
    }
    done_.push_back(r);
    ++index_;
    in_current_ = 0;
    if (on_shard_done_) on_shard_done_(r);
}

void ShardFiller::finish() {
    if (finished_) return;
    finished_ = true;
    if (in_current_ > 0) close_current();
}

}  // namespace ampgrad::data
