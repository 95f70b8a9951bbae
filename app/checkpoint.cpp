// checkpoint.cpp: atomic checkpoint directories (app/checkpoint.hpp), and Trainer::save/resume.
#include "app/checkpoint.hpp"

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

#include "app/trainer.hpp"
#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "core/error_context.hpp"
#include "core/json_file.hpp"
#include "core/philox.hpp"
#include "io/safetensors.hpp"
#include "zero/checkpoint.hpp"

namespace ampgrad::app {

namespace fs = std::filesystem;

namespace {

[[noreturn]] void fail(const std::string& what, const std::string& path) {
    throw IOError(fmt::format("{} {}: {}", what, path, std::strerror(errno)));
}

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw IOError(fmt::format("checkpoint: cannot read {}: {}", path, std::strerror(errno)));
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

// Fault injection for tests/app: AMPGRAD_TEST_STOP_IN_SAVE=N stops the process (SIGSTOP) in the
// middle of the save of step N, after model.safetensors is written, so a test can SIGKILL it there.
void maybe_stop_for_test(int64_t step) {
    const char* at = std::getenv("AMPGRAD_TEST_STOP_IN_SAVE");
    if (at != nullptr && std::atoll(at) == step) ::raise(SIGSTOP);
}

}  // namespace

nlohmann::json read_checkpoint_state(const std::string& dir) {
    const std::string path = (fs::path(dir) / "state.json").string();
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(read_file(path));
    } catch (const nlohmann::json::exception& e) {
        throw IOError(fmt::format("checkpoint {}: truncated or corrupt JSON: {}", path, e.what()));
    }
    if (!j.is_object() || !j.contains("format") || j["format"] != "ampgrad-gpt-checkpoint")
        throw IOError(fmt::format("checkpoint {}: not an ampgrad GPT checkpoint (no \"format\": "
                                  "\"ampgrad-gpt-checkpoint\")", path));
    for (const char* key : {"step", "run_config", "model_config", "tokenizer", "rng", "precision"})
        if (!j.contains(key)) throw IOError(fmt::format("checkpoint {}: the key \"{}\" is missing", path, key));
    for (const char* key : {"run_config", "model_config", "tokenizer", "rng", "precision"})
        if (!j[key].is_object()) throw FormatError(fmt::format("checkpoint {}: \"{}\" is not an object", path, key));
    if (!j["step"].is_number_integer() || !j["run_config"].contains("preset") || !j["run_config"]["preset"].is_string())
        throw FormatError(fmt::format("checkpoint {}: \"step\" is not an integer or \"run_config\" has no \"preset\" "
                                      "string", path));
    return j;
}

void write_checkpoint_files(const CheckpointContent& content, const std::string& dir) {
    io::save_safetensors((fs::path(dir) / "model.safetensors").string(), content.model,
                         {{"format", "pt"}, {"step", std::to_string(content.step)}});
    maybe_stop_for_test(content.step);
    io::save_safetensors((fs::path(dir) / "optimizer.safetensors").string(), content.optimizer);
    write_file_atomic((fs::path(dir) / "state.json").string(), content.state.dump(2) + "\n");
}

std::string publish_checkpoint(const CheckpointContent& content, const std::string& root, int keep) {
    ampgrad::create_directories(root, "checkpoint");
    const std::string name = fmt::format("step-{:08d}", content.step);
    const fs::path final_dir = fs::path(root) / name;
    const fs::path tmp = fs::path(root) / fmt::format(".{}.tmp-{}", name, ::getpid());
    try {
        fs::remove_all(tmp);
        ampgrad::create_directories(tmp.string(), "checkpoint");
        write_checkpoint_files(content, tmp.string());
        fsync_directory(tmp.string());
        if (fs::exists(final_dir)) fs::remove_all(final_dir);   // re-saving the same step
        if (::rename(tmp.c_str(), final_dir.c_str()) != 0) fail("cannot rename into place", final_dir.string());
        fsync_directory(root);
        write_file_atomic((fs::path(root) / "latest").string(), name + "\n");
    } catch (...) {
        std::error_code ignored;
        fs::remove_all(tmp, ignored);
        throw;
    }
    // Prune: older step-* directories beyond `keep`, and temporary directories of dead saves.
    std::vector<std::string> steps;
    for (const auto& entry : fs::directory_iterator(root)) {
        const std::string n = entry.path().filename().string();
        if (n.rfind("step-", 0) == 0 && entry.is_directory()) steps.push_back(n);
        if (n.rfind(".step-", 0) == 0 && n.find(fmt::format(".tmp-{}", ::getpid())) == std::string::npos) {
            std::error_code ignored;
            fs::remove_all(entry.path(), ignored);
        }
    }
    std::sort(steps.begin(), steps.end());
    for (size_t i = 0; i + static_cast<size_t>(keep) < steps.size(); ++i)
        if (steps[i] != name) fs::remove_all(fs::path(root) / steps[i]);
    return final_dir.string();
}

std::string save_checkpoint(const Trainer& trainer, const std::string& root, int keep) {
    return publish_checkpoint(trainer.checkpoint_content(), root, keep);
}

// ---- Trainer's side ----

constexpr const char* kZeroFp8File = "fp8.safetensors";   // --zero --prec fp8 (save_zero, restore_zero_fp8)

CheckpointContent Trainer::checkpoint_content() const {
    return {step_, model_->module()->state_dict(), precision_->state_tensors(), state_json()};
}

void Trainer::save(const std::string& dir) const { write_checkpoint_files(checkpoint_content(), dir); }

// --zero: every rank writes its partition; rank 0 adds state.json (and, with --prec fp8, fp8.safetensors:
// the amax histories and scales, the same on every rank once reduced) before the manifest names the files.
std::string Trainer::save_zero(const std::string& root, int keep, bool node_local) const {
    const data::SamplerState s = sampler_ ? sampler_->state() : addition_state_;
    zero::SaveOptions o;
    o.client_state = {{"sampler", {{"seed", s.seed}, {"offset", s.offset}}}, {"data_position", data_position_}};
    o.keep = keep;
    o.node_local = node_local;   // then each host's first rank writes state.json too (its RNG and sampler are unused)
    const nlohmann::json state = rank_ == 0 || node_local ? state_json() : nlohmann::json();
    const nn::NamedTensors fp8_state = zero_->fp8() ? zero_->fp8()->state_tensors() : nn::NamedTensors{};
    o.write_extra = [&state, &fp8_state](const std::string& dir) {
        write_file_atomic((fs::path(dir) / "state.json").string(), state.dump(2) + "\n");
        if (!fp8_state.empty()) io::save_safetensors((fs::path(dir) / kZeroFp8File).string(), fp8_state);
    };
    return zero::save_checkpoint(zero_->engine(), root, fmt::format("step-{:08d}", step_), o);
}

nlohmann::json Trainer::state_json() const {
    const GeneratorState rng = get_rng_state();
    nlohmann::json state = {
        {"format", "ampgrad-gpt-checkpoint"}, {"version", 1}, {"step", step_},
        {"run_config", to_json(cfg_)}, {"model_config", model_->config_json()},
        {"tokenizer", tokenizer_to_json(corpus_.tokenizer)},
        {"rng", {{"seed", rng.seed}, {"offset", rng.offset}}},
        {"lr_schedule", {{"name", "warmup_cosine"}, {"lr", cfg_.lr}, {"min_lr", cfg_.min_lr},
                         {"warmup_iters", cfg_.warmup}, {"lr_decay_iters", cfg_.steps},
                         {"last_epoch", step_}, {"next_lr", lr_at(step_)}}},
        {"precision", zero_ ? nlohmann::json{{"mode", cfg_.prec}, {"zero_stage", zero_->stage()},
                                             {"world_size", world_size_}, {"skipped_steps", zero_->skipped_steps()}}
                            : precision_->state_json()}};
    const data::SamplerState s = sampler_ ? sampler_->state() : addition_state_;
    state["sampler"] = {{"seed", s.seed}, {"offset", s.offset}};
    if (shards_)   // the place in the shards: windows consumed (all ranks), and what the shards were
        state["data"] = {{"kind", "token_shards"}, {"position", data_position_}, {"train", shards_->train->describe()}};
    if (ddp_) {
        state["data_parallel"] = {{"world_size", world_size_}, {"saved_by_rank", rank_}};
        if (const auto learned = ddp_->learned_buckets())   // the first step after a resume uses these buckets
            state["data_parallel"]["buckets"] = {{"ready_order", learned->ready_order}, {"hook_counts", learned->hook_counts}};
    }
    return state;
}

std::unique_ptr<Trainer> Trainer::resume(const std::string& path, std::optional<int64_t> zero_stage, bool for_inference,
                                         const ResumeOverrides& layout) {
    const std::string dir = resolve_checkpoint(path);
    try {
        return resume_from(dir, zero_stage, for_inference, layout);
    } catch (const nlohmann::json::exception& e) {   // state.json (or a rank file's client state) of the wrong layout
        throw FormatError(fmt::format("checkpoint {}: {}", dir, json_error_text(e)));
    } catch (const Error& e) {   // a fact found deep in the load (a run config value, a tokenizer), said with the checkpoint
        rethrow_with_context(e, "checkpoint " + dir);
    }
}

std::unique_ptr<Trainer> Trainer::resume_from(const std::string& dir, std::optional<int64_t> zero_stage,
                                              bool for_inference, const ResumeOverrides& layout) {
    const nlohmann::json state = read_checkpoint_state(dir);
    RunConfig cfg = run_config_from_json(state.at("run_config"));
    const bool saved_zero = cfg.zero >= 0;
    if (for_inference) cfg.zero = -1;
    else if (zero_stage && !saved_zero)
        throw ValueError(fmt::format("--zero {}: checkpoint {} was saved without ZeRO; resume it without --zero",
                                     *zero_stage, dir));
    else if (zero_stage) cfg.zero = *zero_stage;
    if (layout.batch_size) cfg.batch_size = *layout.batch_size;   // --deterministic at another world size
    if (layout.grad_accum) cfg.grad_accum = *layout.grad_accum;
    std::unique_ptr<Trainer> t(new Trainer(cfg, tokenizer_from_json(state.at("tokenizer")), !for_inference));
    if (t->model_->config_json() != state.at("model_config"))
        throw ValueError(fmt::format("checkpoint {}: its model config {} does not match the rebuilt model {}", dir,
                                     state.at("model_config").dump(), t->model_->config_json().dump()));
    if (!for_inference) t->restore_data_position(state);   // sample and eval need no place in the data
    if (saved_zero) {
        t->step_ = state.at("step").get<int64_t>();
        if (for_inference) {
            zero::load_module_parameters(*t->model_->module(), dir);
            return t;
        }
        const zero::LoadResult r = zero::load_checkpoint(t->zero_->engine(), dir);   // and this rank's RNG
        zero::ZeroEngine& engine = t->zero_->engine();
        if (engine.micro_steps() % t->layout_.accum != 0)   // saved at another accumulation (an elastic restart)
            engine.restore_counters(engine.global_steps(), engine.global_steps() * t->layout_.accum, engine.skipped_steps());
        t->restore_zero_fp8(dir);
        const nlohmann::json& mine = r.client_state.is_null() ? r.all_client_states.at(0) : r.client_state;
        data::SamplerState s{mine.at("sampler").at("seed").get<uint64_t>(), mine.at("sampler").at("offset").get<uint64_t>()};
        if (r.client_state.is_null()) s.seed = cfg.seed + 1 + static_cast<uint64_t>(t->rank_);   // a rank the save did not have
        if (t->sampler_) t->sampler_->set_state(s);
        else t->addition_state_ = s;
        return t;
    }
    io::SafetensorsFile model = io::load_safetensors((fs::path(dir) / "model.safetensors").string());
    t->model_->module()->load_state_dict(model.tensors);
    io::SafetensorsFile opt = io::load_safetensors((fs::path(dir) / "optimizer.safetensors").string());
    t->precision_->load_state(opt.tensors, state.at("precision"));
    t->step_ = state.at("step").get<int64_t>();
    t->restore_rank_streams(state);
    t->restore_ddp_buckets(state);
    return t;
}

// Data parallel: the buckets the saving run had learned, so that the first step after the resume
// reduces in the same layout (dist/reducer.hpp, LearnedBuckets). A checkpoint without them (saved
// before the first step, or by an older build) leaves DDP to learn them again.
void Trainer::restore_ddp_buckets(const nlohmann::json& state) {
    if (!ddp_ || !state.contains("data_parallel") || !state.at("data_parallel").contains("buckets")) return;
    const nlohmann::json& b = state.at("data_parallel").at("buckets");
    ddp_->restore_learned_buckets({b.at("ready_order").get<std::vector<int64_t>>(),
                                   b.at("hook_counts").get<std::vector<int64_t>>()});
}

// --zero --prec fp8: the amax histories and scales from fp8.safetensors. A ZeRO checkpoint saved before
// the file existed has none: the histories then start again from zero, as the run did at step 1.
void Trainer::restore_zero_fp8(const std::string& dir) {
    Fp8Run* fp8 = zero_->fp8();
    const fs::path file = fs::path(dir) / kZeroFp8File;
    if (!fp8 || !fs::exists(file)) return;
    fp8->load_state_tensors(io::load_safetensors(file.string()).tensors);
}

// Token shards: the saved place in the training stream, after checking that the shards are the
// ones the run was saved with (a run saved on a text file, resumed on shards, is refused too).
void Trainer::restore_data_position(const nlohmann::json& state) {
    const bool saved_shards = state.contains("data") && state.at("data").value("kind", "") == "token_shards";
    if (!shards_ && !saved_shards) return;
    if (!shards_ || !saved_shards)
        throw ValueError(fmt::format("--resume: the run was saved training on {}, and this one reads {}",
                                     saved_shards ? "token shards" : "a text file", shards_ ? "token shards" : "a text file"));
    data::check_same_data(state.at("data").at("train"), shards_->train->describe());
    data_position_ = state.at("data").at("position").get<uint64_t>();
}

// The sampler position and the RNG state of state.json. Data parallel: rank 0 saved them; every
// rank's streams advance alike (the same draws per step), so rank r continues its own streams
// (sampler seed + 1 + r, dropout seed + 7919 r) at the saved offsets.
void Trainer::restore_rank_streams(const nlohmann::json& state) {
    data::SamplerState s{state.at("sampler").at("seed").get<uint64_t>(), state.at("sampler").at("offset").get<uint64_t>()};
    GeneratorState rng{state.at("rng").at("seed").get<uint64_t>(), state.at("rng").at("offset").get<uint64_t>()};
    if (ddp_) {
        s.seed = cfg_.seed + 1 + static_cast<uint64_t>(rank_);
        rng.seed = cfg_.seed + 7919 * static_cast<uint64_t>(rank_);
    }
    if (sampler_) sampler_->set_state(s);
    else addition_state_ = s;
    set_rng_state(rng);
}

void check_checkpoint_preset(const std::optional<std::string>& given, const std::string& saved, const std::string& dir) {
    if (given && *given != saved)
        throw ValueError(fmt::format("checkpoint {} was trained with preset \"{}\", not \"{}\" (drop --preset, or "
                                     "train a new run)", dir, saved, *given));
}

}  // namespace ampgrad::app
