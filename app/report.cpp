// report.cpp: the progress line, the JSONL metrics and the gnuplot plots (app/report.hpp).
#include "app/report.hpp"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <sys/wait.h>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/checkpoint.hpp"
#include "core/atomic_file.hpp"
#include "core/device_properties.hpp"
#include "core/error.hpp"

namespace ampgrad::app {

std::optional<double> mfu_per_token_per_s(const LanguageModel& lm, const std::string& device, int world) {
    if (device != "cuda") return std::nullopt;
    const std::optional<double> peak = peak_dense_bf16_flops(device_properties(Device(kCUDA, 0)).name);
    if (!peak) return std::nullopt;
    return lm.llmc_flops_per_token() / (*peak * static_cast<double>(world));
}

namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;

// ---- plots ----

namespace {

// A metrics.jsonl record write_plots can draw: a train record with its numbers and "skipped", or an
// eval record with its losses. Anything else (a line cut short by a crash, a record an older or
// newer build wrote differently) is left out of the plot rather than stopping it.
bool is_plottable(const nlohmann::json& j) {
    if (!j.is_object() || !j.contains("kind") || !j["kind"].is_string() || !j.contains("step") || !j["step"].is_number())
        return false;
    auto numbers = [&](std::initializer_list<const char*> keys) {
        for (const char* k : keys)
            if (!j.contains(k) || !(j[k].is_number() || j[k].is_null())) return false;
        return true;
    };
    if (j["kind"] == "train") return numbers({"loss", "lr", "scale"}) && j.contains("skipped") && j["skipped"].is_boolean();
    return j["kind"] == "eval" && numbers({"train_loss", "val_loss"});
}

}  // namespace

// ---- progress line ----

ProgressLine::ProgressLine(int64_t total_steps, int64_t first_step, bool in_place, int64_t every)
    : total_(total_steps), first_step_(first_step), every_(std::max<int64_t>(every, 1)), in_place_(in_place),
      start_(clock_type::now()), last_draw_(), since_(clock_type::now()) {}

namespace {

std::string duration_text(double seconds) {
    if (!std::isfinite(seconds) || seconds < 0) return "?";
    const int64_t s = static_cast<int64_t>(seconds + 0.5);
    return s >= 3600 ? fmt::format("{}h{:02d}m", s / 3600, (s / 60) % 60) : fmt::format("{}m{:02d}s", s / 60, s % 60);
}

}  // namespace

std::string ProgressLine::format(const TrainStats& s) {
    const double elapsed = std::chrono::duration<double>(clock_type::now() - start_).count();
    const double done = static_cast<double>(s.step - first_step_);
    const double eta = done > 0 ? elapsed / done * static_cast<double>(total_ - s.step) : NAN;
    const std::string zero = s.zero_stage >= 0 ? fmt::format(" | zero {} {:.2f} MB/rank", s.zero_stage,
                                                             static_cast<double>(s.state_bytes.total()) / 1e6)
                                              : "";
    const std::string ranks = s.world_size > 1 ? fmt::format(" | {} ranks, batch {}", s.world_size, s.global_batch) : "";
    const std::string accum = s.grad_accum > 1 ? fmt::format(" | {} tok/step ({} micro)", s.tokens, s.grad_accum) : "";
    const std::string mfu =
        mfu_per_token_per_s_ ? fmt::format(" | MFU {:.1f}%", 100.0 * tokens_per_s_ * *mfu_per_token_per_s_) : "";
    const std::string trains =
        parameter_counts_ ? fmt::format(" | trains {:.3f}M of {:.3f}M params", parameter_counts_->first / 1e6,
                                        parameter_counts_->second / 1e6)
                          : "";
    return fmt::format("step {:>{}}/{} | loss {:.4f} | {:.0f} tok/s{} | lr {:.2e} | scale {:g} | skipped {} | "
                       "gnorm {:.3f}{}{}{}{} | ETA {}", s.step, std::to_string(total_).size(), total_, s.loss, tokens_per_s_,
                       mfu, s.lr, s.scale, s.skipped_total, s.grad_norm, zero, ranks, accum, trains, duration_text(eta));
}

void ProgressLine::update(const TrainStats& s) {
    tokens_since_ += s.tokens;
    const auto now = clock_type::now();
    const double window = std::chrono::duration<double>(now - since_).count();
    if (window >= 0.5 || tokens_per_s_ == 0.0) {
        tokens_per_s_ = window > 0 ? static_cast<double>(tokens_since_) / window : 0.0;
        tokens_since_ = 0;
        since_ = now;
    }
    if (in_place_) {
        if (std::chrono::duration<double>(now - last_draw_).count() < 0.1 && s.step != total_) return;
        last_draw_ = now;
        std::printf("\r\033[K%s", format(s).c_str());
        line_open_ = true;
    } else if (s.step % every_ == 0 || s.step == total_ || s.step == first_step_ + 1) {
        std::printf("%s\n", format(s).c_str());
    }
    std::fflush(stdout);
}

void ProgressLine::message(const std::string& line) {
    if (line_open_) std::printf("\r\033[K");
    std::printf("%s\n", line.c_str());
    line_open_ = false;
    std::fflush(stdout);
}

void ProgressLine::finish() {
    if (line_open_) std::printf("\n");
    line_open_ = false;
    std::fflush(stdout);
}

// ---- metrics ----

MetricsLog::MetricsLog(const std::string& path, int64_t resume_step) : path_(path) {
    if (resume_step >= 0 && fs::exists(path)) {
        std::ifstream in(path);
        std::string line, kept;
        while (std::getline(in, line)) {
            try {
                if (nlohmann::json::parse(line).value("step", int64_t{0}) <= resume_step) kept += line + "\n";
            } catch (const nlohmann::json::exception&) {   // a line cut short by a crash
            }
        }
        write_file_atomic(path, kept);
    }
    out_.open(path, std::ios::app);
    if (!out_) throw IOError(fmt::format("metrics: cannot open {} for writing", path));
}

void MetricsLog::write(const std::string& line) {
    out_ << line << '\n';
    out_.flush();
    if (!out_) throw IOError(fmt::format("metrics: writing {} failed (is the disk full?)", path_));
}

void MetricsLog::train(const TrainStats& s, double tokens_per_s, double elapsed_s, std::optional<double> mfu) {
    nlohmann::json j = {{"kind", "train"}, {"step", s.step}, {"loss", s.loss}, {"lr", s.lr},
                        {"scale", s.scale}, {"skipped", s.skipped}, {"skipped_total", s.skipped_total},
                        {"tokens_per_s", tokens_per_s}, {"elapsed_s", elapsed_s}, {"tokens_per_step", s.tokens},
                        {"grad_accum", s.grad_accum}, {"data_ms", 1e3 * s.data_seconds},
                        {"memory_peak_bytes", s.peak_bytes}};
    if (mfu) j["mfu"] = *mfu;
    if (!s.fp8.is_null()) j["fp8"] = s.fp8;   // saturated amaxes / collapsed scales, and each layer's amaxes
    j["grad_norm"] = std::isfinite(s.grad_norm) ? nlohmann::json(s.grad_norm) : nlohmann::json(nullptr);
    if (s.world_size > 1) {   // several processes: how many, and the batch of all of them
        j["world_size"] = s.world_size;
        j["global_batch"] = s.global_batch;
    }
    if (s.zero_stage >= 0) {   // --zero: the stage and rank 0's model-state bytes (each rank holds about the same)
        j["zero_stage"] = s.zero_stage;
        j["model_state_bytes_per_rank"] = {{"params", s.state_bytes.params}, {"grads", s.state_bytes.grads},
                                           {"optimizer", s.state_bytes.optimizer}, {"total", s.state_bytes.total()}};
    }
    write(j.dump());
}

void MetricsLog::record(const nlohmann::json& j) { write(j.dump()); }

void MetricsLog::eval(const EvalStats& e) {
    nlohmann::json j = {{"kind", "eval"}, {"step", e.step}, {"train_loss", e.train_loss}, {"val_loss", e.val_loss},
                        {"protocol", e.protocol}};
    if (e.exact_match) j["exact_match"] = *e.exact_match;
    write(j.dump());
}

// ---- plots ----

std::vector<std::string> write_plots(const std::string& metrics_path, const std::string& dir) {
    ampgrad::create_directories(dir, "plot");
    // gnuplot reads plain columns: train.dat (step loss lr scale grad_norm skipped), eval.dat.
    std::ifstream in(metrics_path);
    if (!in) throw IOError(fmt::format("plot: cannot read {}", metrics_path));
    std::ostringstream train, eval, skips;
    std::string line;
    while (std::getline(in, line)) {
        nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
        if (!is_plottable(j)) continue;   // a line cut short by a crash, or not a record of ours
        if (j.value("kind", "") == "train") {
            const double gn = j["grad_norm"].is_number() ? j["grad_norm"].get<double>() : NAN;
            train << j["step"] << ' ' << j["loss"] << ' ' << j["lr"] << ' ' << j["scale"] << ' '
                  << (std::isfinite(gn) ? fmt::format("{}", gn) : "NaN") << '\n';
            if (j["skipped"].get<bool>()) skips << j["step"] << ' ' << j["scale"] << '\n';
        } else if (j.value("kind", "") == "eval") {
            eval << j["step"] << ' ' << j["train_loss"] << ' ' << j["val_loss"] << '\n';
        }
    }
    const fs::path d(dir);
    write_file_atomic((d / "train.dat").string(), train.str());
    write_file_atomic((d / "eval.dat").string(), eval.str());
    write_file_atomic((d / "skipped.dat").string(), skips.str().empty() ? "0 NaN\n" : skips.str());
    const bool have_eval = !eval.str().empty();
    std::string script = fmt::format(
        "set terminal pngcairo size 900,540 noenhanced\nset grid\nset key top right\nset xlabel 'step'\ncd '{}'\n"
        "set output 'loss.png'\nset ylabel 'loss (nats/token)'\nset title 'training loss'\n"
        "plot 'train.dat' using 1:2 with lines lw 1 lc rgb '#9ecae1' title 'train (batch)'{}\n"
        "set output 'scale.png'\nset logscale y 2\nset ylabel 'loss scale'\nset title 'loss scale (x: skipped steps)'\n"
        "plot 'train.dat' using 1:4 with steps lw 2 title 'scale', 'skipped.dat' using 1:2 with points pt 2 ps 1.5 "
        "lc rgb 'red' title 'skipped step'\nunset logscale y\n"
        "set output 'grad_norm.png'\nset ylabel 'gradient norm (before clipping)'\nset title 'gradient norm'\n"
        "plot 'train.dat' using 1:5 with lines title 'grad norm'\n"
        "set output 'lr.png'\nset ylabel 'learning rate'\nset title 'learning rate'\n"
        "plot 'train.dat' using 1:3 with lines lw 2 title 'lr'\n",
        d.string(), have_eval ? ", 'eval.dat' using 1:2 with linespoints lw 2 title 'train (eval)', 'eval.dat' using "
                                "1:3 with linespoints lw 2 title 'validation (eval)'" : "");
    write_file_atomic((d / "plots.gp").string(), script);
    const std::string command = fmt::format("gnuplot '{}' 2>'{}'", (d / "plots.gp").string(), (d / "gnuplot.log").string());
    const int rc = std::system(command.c_str());
    if (rc != 0)
        throw IOError(fmt::format("plot: gnuplot failed (exit {}; is gnuplot installed? see {})",
                                  WIFEXITED(rc) ? WEXITSTATUS(rc) : rc, (d / "gnuplot.log").string()));
    std::vector<std::string> files;
    for (const char* name : {"loss.png", "scale.png", "grad_norm.png", "lr.png"}) files.push_back((d / name).string());
    return files;
}

}  // namespace ampgrad::app
