// resume_flags.cpp: run flags typed beside --resume, checked against the saved run (app/resume_flags.hpp).
#include "app/resume_flags.hpp"

#include <fmt/format.h>

#include "core/error.hpp"

namespace ampgrad::app {

namespace {

// "--batch-size" -> "batch_size", the flag's key in the run config's JSON (to_json(RunConfig)).
std::string run_config_key(const std::string& flag) {
    if (flag == "--data") return "data_file";
    std::string key = flag.rfind("--", 0) == 0 ? flag.substr(2) : flag;
    for (char& c : key)
        if (c == '-') c = '_';
    return key;
}

// A value as it is typed on the command line: strings without quotes.
std::string as_typed(const nlohmann::json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

// --batch-size and --grad-accum on a --deterministic resume: the same sequences per optimiser step.
void check_same_global_batch(ResumeOverrides& out, const nlohmann::json& saved, const std::string& dir) {
    if (!out.batch_size && !out.grad_accum) return;
    const int64_t saved_batch = saved.at("batch_size").get<int64_t>(), saved_accum = saved.at("grad_accum").get<int64_t>();
    if (!out.batch_size) out.batch_size = saved_batch;
    if (!out.grad_accum) out.grad_accum = saved_accum;
    if (*out.batch_size * *out.grad_accum != saved_batch * saved_accum)
        throw ValueError(fmt::format("--batch-size {} --grad-accum {}: the --deterministic run in {} was saved with "
                                     "--batch-size {} --grad-accum {}; a resume may change the layout but not the "
                                     "global batch of {} sequences per step", *out.batch_size, *out.grad_accum, dir,
                                     saved_batch, saved_accum, saved_batch * saved_accum));
}

}  // namespace

ResumeOverrides check_resume_flags(const RunConfig& typed, const std::vector<std::string>& flags_given,
                                   const nlohmann::json& saved, const std::string& dir) {
    const nlohmann::json now = to_json(typed);
    ResumeOverrides out;
    for (const std::string& flag : flags_given) {
        const std::string key = run_config_key(flag);
        if (key == "zero" || key == "preset" || !now.contains(key)) continue;   // not a run flag, or checked elsewhere
        if (key.starts_with("hellaswag")) continue;   // what is measured may change (apply_hellaswag_flags)
        if (!saved.contains(key) || saved.at(key) == now.at(key)) continue;
        if (key == "steps") {
            out.steps = typed.steps;
            continue;
        }
        if ((key == "batch_size" || key == "grad_accum") && saved.value("deterministic", false)) {
            (key == "batch_size" ? out.batch_size : out.grad_accum) = key == "batch_size" ? typed.batch_size : typed.grad_accum;
            continue;
        }
        throw ValueError(fmt::format(
            "{} {}: the run in {} was saved with {} {}, and a resumed run keeps its saved configuration (only --steps, "
            "--zero and the --hellaswag flags may change on --resume); drop {}, or start a new run without --resume",
            flag, as_typed(now.at(key)), dir, flag, as_typed(saved.at(key)), flag));
    }
    check_same_global_batch(out, saved, dir);
    return out;
}

}  // namespace ampgrad::app
