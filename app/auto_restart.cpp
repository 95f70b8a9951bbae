// auto_restart.cpp: --resume auto, the restart record and the step file (app/auto_restart.hpp).
#include "app/auto_restart.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>

#include "app/checkpoint.hpp"
#include "app/report.hpp"
#include "app/run_config.hpp"
#include "core/error.hpp"

namespace ampgrad::app {

namespace fs = std::filesystem;

std::optional<std::string> newest_checkpoint(const std::string& out) {
    if (!fs::exists(fs::path(out) / "checkpoints" / "latest")) return std::nullopt;
    const std::string dir = resolve_checkpoint(out);   // throws when `latest` names no checkpoint
    read_checkpoint_state(dir);                         // throws on a truncated or corrupt state.json
    return dir;
}

std::optional<RestartRound> restart_round_from_env() {
    const char* count = std::getenv("AMPGRAD_RESTART_COUNT");
    if (count == nullptr || *count == '\0') return std::nullopt;
    char* end = nullptr;
    const long long n = std::strtoll(count, &end, 10);
    if (*end != '\0' || n < 0)
        throw ValueError(fmt::format("AMPGRAD_RESTART_COUNT={}: not a restart count (a whole number >= 0)", count));
    if (n == 0) return std::nullopt;
    const char* cause = std::getenv("AMPGRAD_RESTART_CAUSE");
    return RestartRound{n, cause != nullptr ? cause : ""};
}

nlohmann::json restart_record(const RestartRound& round, int64_t step, const std::optional<std::string>& resumed_from) {
    return {{"kind", "restart"}, {"step", step}, {"restart", round.count}, {"cause", round.cause},
            {"resumed_from", resumed_from ? nlohmann::json(*resumed_from) : nlohmann::json(nullptr)}};
}

void note_restart(MetricsLog& metrics, int64_t step, const std::string& resumed_from) {
    const std::optional<RestartRound> round = restart_round_from_env();
    if (!round) return;
    const std::optional<std::string> from = resumed_from.empty() ? std::nullopt : std::optional<std::string>(resumed_from);
    metrics.record(restart_record(*round, step, from));
    const std::string how = from ? fmt::format("resumed at step {}", step) : "no checkpoint yet, started fresh";
    std::printf("restart %lld (%s): %s\n", static_cast<long long>(round->count), round->cause.c_str(), how.c_str());
}

StepFile::StepFile() {
    const char* path = std::getenv("AMPGRAD_STEP_FILE");
    if (path == nullptr || *path == '\0') return;
    fd_ = ::open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) throw IOError(fmt::format("AMPGRAD_STEP_FILE={}: cannot open it for writing", path));
}

StepFile::~StepFile() {
    if (fd_ >= 0) ::close(fd_);
}

void StepFile::starting(int64_t step) {
    if (fd_ < 0) return;
    // Fixed width, so that a shorter number never leaves a longer one's tail behind.
    const std::string text = fmt::format("{:>20}\n", step);
    if (::pwrite(fd_, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size()))
        throw IOError(fmt::format("AMPGRAD_STEP_FILE: writing step {} failed", step));
}

StepLayout step_layout(const RunConfig& cfg, int world) {
    if (cfg.batch_size % world == 0) return {cfg.batch_size / world, cfg.grad_accum};
    const int64_t global = cfg.batch_size * cfg.grad_accum;   // sequences per step
    const int64_t most = std::max<int64_t>(1, cfg.batch_size / world);   // no larger micro-batches than the run's
    for (int64_t accum = 1; accum <= global / world; ++accum)
        if (global % (world * accum) == 0 && global / (world * accum) <= most) return {global / (world * accum), accum};
    throw ValueError(fmt::format(
        "--batch-size {} is not divisible by the {} processes, and the global batch of {} sequences per step "
        "(--batch-size {} x {} micro-step(s)) cannot be split evenly over them either: run on a number of processes "
        "that divides {}", cfg.batch_size, world, global, cfg.batch_size, cfg.grad_accum, global));
}

std::string elastic_layout_text(const RunConfig& cfg, int world, const StepLayout& layout) {
    if (cfg.batch_size % world == 0) return "";
    return fmt::format("{} processes cannot share --batch-size {} equally: {} micro-steps of {} sequences per rank keep "
                       "the global batch of {} sequences per step", world, cfg.batch_size, layout.accum, layout.micro,
                       cfg.batch_size * cfg.grad_accum);
}

}  // namespace ampgrad::app
