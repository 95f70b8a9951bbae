// fp8_recipe.hpp: fp8 training recipes over nn::Linear layers (docs/fp8.md §6-9).
//   delayed     Transformer Engine's DelayedScaling: per layer and tensor role (input, weight,
//               grad_output) an amax history of amax_history_len steps; after each step
//                 amax  = max(history) ("max") or history[0] ("most_recent"),
//                 scale = (fp8_max / amax) / 2^margin, the old scale kept where amax is 0 or not finite,
//               and the history rolls by one with its first row cleared. Step t quantises with the
//               scale computed after step t-1: that is the "delay". HYBRID: e4m3 forward, e5m2 gradients.
//   tensorwise, rowwise   torchao's current scaling: each tensor's own amax (autograd/ops/fp8_linear.hpp).
// Fp8Training attaches an Fp8LinearState to each nn::Linear, keeps the histories, updates them
// after each step with tensor ops only (no host sync), reduces the amaxes across data-parallel
// ranks through a callback (all_reduce MAX, as TE does), saves them in checkpoints, and reports
// saturated amaxes and collapsed scales by layer and role (the GradScaler's provenance, for fp8).
//
//   amp::Fp8Training fp8(model, amp::Fp8Recipe{});                      // delayed, HYBRID, margin 0
//   { amp::AutocastGuard autocast(kCPU, fp8.recipe()); loss = model(x); }   // Linear layers in fp8
//   loss.backward(); optimizer.step();
//   fp8.update();                                                       // histories roll, scales move
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "autograd/ops/fp8_linear.hpp"
#include "nn/linear.hpp"
#include "nn/module.hpp"

namespace ampgrad::amp {

enum class Fp8AmaxAlgo : uint8_t { kMax, kMostRecent };   // TE's amax_compute_algo

struct Fp8Recipe {
    Fp8Scaling scaling = Fp8Scaling::kDelayed;
    int margin = 0;                          // delayed: scale / 2^margin
    int64_t amax_history_len = 1024;         // delayed: TE's default window (also the history logged)
    Fp8AmaxAlgo amax_compute_algo = Fp8AmaxAlgo::kMax;
    bool keep_first_last_in_bf16 = true;     // the first and last nn::Linear stay in bf16 (as TE and torchao advise)

    void check() const;                      // ValueError naming the bad field
};
Fp8Scaling parse_fp8_scaling(const std::string& name);   // "delayed" | "tensorwise" | "rowwise"; ValueError

// What went wrong in one layer and role on one step.
struct Fp8Event {
    std::string layer;                       // the Linear's module path, e.g. "transformer.h.0.attn.c_attn"
    Fp8Role role = Fp8Role::kInput;
    bool saturated = false;                  // amax * scale used > fp8_max: values were clipped to ±max
    bool collapsed = false;                  // amax not finite, or the scale left f32's range: the old scale was kept
    double amax = 0.0;
    double scale = 0.0;                      // the scale this step used
    std::string str() const;                 // "fp8: amax saturated in transformer.h.0.mlp.c_fc grad_output (...)"
};

class Fp8Training {
public:
    // Attaches a fresh Fp8LinearState to each nn::Linear of `model` (in module order), but the first
    // and the last when recipe.keep_first_last_in_bf16. The layers use it inside an fp8 AutocastGuard.
    Fp8Training(nn::Module& model, Fp8Recipe recipe);
    ~Fp8Training();                          // detaches the states from the layers
    Fp8Training(const Fp8Training&) = delete;
    Fp8Training& operator=(const Fp8Training&) = delete;

    const Fp8Recipe& recipe() const { return recipe_; }
    std::vector<std::string> layer_names() const;

    // After each optimiser step: all amaxes of this step (one (layers,3) tensor) go through
    // reduce_max when given (data parallel: all_reduce MAX), then each layer's scales are updated
    // (delayed), saturation and collapse are flagged, and the histories roll. Tensor ops only.
    void update(const std::function<void(Tensor&)>& reduce_max = {});
    // The last update's problems, by layer and role (HOST SYNC: reads the flags).
    std::vector<Fp8Event> events() const;
    // Each layer's last amax and scale per role, and its history (the newest `rows` rows), as JSON
    // for metrics.jsonl (HOST SYNC).
    nlohmann::json amax_json(int64_t rows = 1) const;

    // Checkpoint state: "fp8.<layer>.amax_history" (L,3) and "fp8.<layer>.scale" (3), f32.
    nn::NamedTensors state_tensors() const;
    void load_state_tensors(const nn::NamedTensors& tensors);   // ValueError on a missing or mis-shaped entry

    struct Layer {
        std::string name;
        std::shared_ptr<nn::Linear> linear;
        std::shared_ptr<Fp8LinearState> state;
        Tensor amax_history;                 // (L,3) f32; state->amax is a view of its row 0
    };
    const std::vector<Layer>& layers() const { return layers_; }

private:
    Fp8Recipe recipe_;
    std::vector<Layer> layers_;
    Tensor maxima_;                          // (3) f32 each role's fp8 maximum, on the layers' device
    Tensor last_amax_;                       // (layers,3) the amaxes of the last update
    Tensor last_scale_;                      // (layers,3) the scales that step used
    Tensor saturated_;                       // (layers,3) bool
    Tensor collapsed_;                       // (layers,3) bool
};

}  // namespace ampgrad::amp
