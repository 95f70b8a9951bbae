// resume_flags.hpp: `ampgrad train --resume DIR` with run flags (issue 23): no flag is silently
// ignored. The resumed run is rebuilt from the checkpoint's run config, so each run flag typed
// beside --resume is compared with the saved value:
//   - the same value: fine (a resume command may repeat the run's flags);
//   - --steps: takes effect; the schedule then spans the new count (docs/gpt.md §5);
//   - --batch-size, --grad-accum: take effect on a --deterministic run that keeps its global batch
//     (another world size: docs/determinism.md);
//   - --zero and --preset: handled by Trainer::resume and check_preset;
//   - --hellaswag, --hellaswag-every, --hellaswag-limit: take effect (app/hellaswag_eval.hpp's apply_hellaswag_flags);
//   - any other flag with another value: ValueError naming the flag, both values and what to do.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/run_config.hpp"

namespace ampgrad::app {

struct ResumeOverrides {
    std::optional<int64_t> steps;   // --steps N differing from the saved run's
    // A --deterministic run resumed at another world size (issue 35): --batch-size and --grad-accum may
    // change together when the global batch (their product) stays the saved one.
    std::optional<int64_t> batch_size, grad_accum;
};

// typed: the flags' values as parsed (defaults where not typed); flags_given: the names of the flags
// typed ("--lr", ...; others, such as "--out", are ignored); saved: the checkpoint's run_config.
ResumeOverrides check_resume_flags(const RunConfig& typed, const std::vector<std::string>& flags_given,
                                   const nlohmann::json& saved, const std::string& dir);

}  // namespace ampgrad::app
