// memory_plan.cpp: the per-rank peak of a training run, term by term (app/memory_plan.hpp). Model
// states here, activations in app/activation_plan.cpp, the printed table and advice at the end.
#include "app/memory_plan.hpp"

#include <algorithm>
#include <numeric>

#include <fmt/format.h>

#include "amp/fp8_recipe.hpp"
#include "app/activation_plan.hpp"
#include "app/fp8_run.hpp"
#include "core/error.hpp"
#include "models/gpt.hpp"
#include "models/llama.hpp"
#include "models/model_family.hpp"
#include "models/qwen2.hpp"
#include "nn/init.hpp"
#include "zero/config.hpp"
#include "zero/layout.hpp"

namespace ampgrad::app {

namespace {

int64_t json_size(const nlohmann::json& j, std::initializer_list<const char*> keys) {
    for (const char* k : keys)
        if (j.contains(k) && j[k].is_number_integer()) return j[k].get<int64_t>();
    return 0;
}

// The vocabulary a preset is made with (GPT-2's 50257 for "gpt2" and "llama-124m"); a pretrained
// config's own V is kept by the family whatever this says.
int64_t preset_vocab(const RunConfig& run) {
    if (!run.pretrained_config.is_null()) return 0;
    if (run.model == "gpt") return models::GPTConfig::preset(run.preset).vocab_size;
    if (run.model == "llama") return models::LlamaConfig::preset(run.preset).vocab_size;
    if (run.model == "qwen2") return models::qwen2_preset(run.preset).vocab_size;
    return 256;
}

// The bytes one rank keeps between steps and adds at them; `model` the parameters' element size.
struct ModelStates {
    int64_t params = 0, grads = 0, optimizer = 0, master = 0;   // held across the step
    int64_t grads_at_step = 0;      // gradients that exist only from backward until the step ends
    int64_t step_work = 0;          // the step's temporaries (ZeRO: the f64 squares of the gradient norm)
    int64_t buckets = 0;            // ZeRO stages 2-3: the gradient bucket and its reduce-scatter buffers
    int64_t gathered_params = 0;    // ZeRO stage 3: full parameters gathered for forward/backward
};

// One process (no --zero): AdamW on the parameters, or fp16-master's f32 masters beside f16 weights.
ModelStates single_process_states(int64_t P, const std::string& prec) {
    ModelStates s;
    if (prec == "fp16-master") {
        s.params = 2 * P, s.master = 4 * P, s.optimizer = 8 * P;
        s.grads_at_step = 2 * P + 4 * P;   // f16 .grad, then the masters' f32 copy (amp/master_weights.cpp)
    } else {
        s.params = 4 * P, s.optimizer = 8 * P, s.grads_at_step = 4 * P;
    }
    return s;
}

// --zero STAGE on W ranks (zero/engine.cpp): an f32 master partition and AdamW's two moments on it;
// stages 0-1 keep the whole flat gradient in the model dtype (and, for f16 models, an f32 partition),
// stages 2-3 an f32 partition and a bucket.
ModelStates zero_states(const ModelShape& model, int64_t stage, int W, const std::string& prec) {
    const std::vector<int64_t>& numels = model.param_numels;
    const zero::FlatLayout layout(numels, stage == 0 ? 1 : W);   // stage 0 partitions nothing
    const int64_t P = layout.numel(), part = layout.partition_numel(), m = prec == "fp16-master" ? 2 : 4;
    const int64_t bucket = std::min<int64_t>(500000000, layout.padded_numel());   // reduce_bucket_size
    ModelStates s;
    s.params = stage == 3 ? part * m : P * m;
    s.master = 4 * part, s.optimizer = 8 * part;
    if (stage <= 1) {
        s.grads = layout.padded_numel() * m + (m == 4 ? 0 : 4 * part);
    } else {
        s.grads = 4 * part;
        // the bucket's gradients (model dtype), the packed send buffer (W chunks) and the receive chunk
        s.buckets = bucket * m + bucket * m + (bucket / W) * m;
    }
    // apply_step (zero/engine_step.cpp): the partition's squared norm in f64 (two casts and their
    // product, 3 x 8 bytes per element), the largest of the step's temporaries.
    s.step_work = 24 * part;
    // Stage 3 at backward's start (zero/stage3.cpp, gather_for_backward): the first module's backward
    // gathers its parameters and, in the same all-gather, those of the modules before it up to the
    // prefetch bucket (stage3_prefetch_bucket_size): the whole model, where it fits. While the gather
    // reassembles them, its receive buffer (W chunks, about as large) and the send chunk live too.
    const int64_t largest = *std::max_element(numels.begin(), numels.end());
    const int64_t gathered = std::min(P, zero::ZeroConfig().stage3_prefetch_bucket_size + largest);
    if (stage == 3) s.gathered_params = (2 * gathered + gathered / W) * m;
    return s;
}

void add(MemoryPlan& p, std::string name, int64_t bytes, std::string formula) {
    if (bytes > 0) p.terms.push_back({std::move(name), bytes, std::move(formula)});
}

// Autocast keeps a low-precision copy of every GEMM weight (the cast cache, then the Linear's saved
// weight) from the forward until that Linear's backward: all of them at backward's start.
// fp16-master's weights are f16 already: autocast has nothing to copy. Under fp8 the fp8 Linears
// quantise their f32 weight on each use and save the weight itself (nn/linear.cpp): only the bf16
// layers' weights are copied.
int64_t autocast_weight_copies(const ModelShape& m, const std::string& prec) {
    if (prec == "fp8") return 2 * (m.matmul_weight_numel - m.fp8_weight_numel);
    return prec == "bf16" || prec == "fp16" ? 2 * m.matmul_weight_numel : 0;
}

// --prec fp8: which Linears the recipe puts in fp8 (the same amp::Fp8Training a run attaches), their
// weights' elements and the histories and scales it keeps.
void add_fp8_layers(ModelShape& s, nn::Module& module, const RunConfig& run) {
    const amp::Fp8Training fp8(module, fp8_recipe_of(run));
    for (const amp::Fp8Training::Layer& layer : fp8.layers()) s.fp8_weight_numel += layer.linear->weight.numel();
    for (const auto& [name, t] : fp8.state_tensors()) s.fp8_state_bytes += t.numel() * static_cast<int64_t>(t.element_size());
}

}  // namespace

ModelShape model_shape(const RunConfig& run, int64_t vocab_size) {
    const models::ModelFamily& family = run.family();
    models::ModelSpec spec = run.model_spec(vocab_size > 0 ? vocab_size : preset_vocab(run));
    std::shared_ptr<models::CausalLM> lm;
    {
        nn::init::SkipInitGuard skip;   // sizes only: the parameters are allocated, never written
        lm = family.build(spec);
    }
    ModelShape s;
    s.family = family.name;
    s.context = family.context_length(spec);
    const nlohmann::json c = lm->config_json();
    s.n_layer = json_size(c, {"n_layer", "num_hidden_layers"});
    s.hidden = json_size(c, {"n_embd", "hidden_size"});
    s.n_head = json_size(c, {"n_head", "num_attention_heads"});
    s.n_kv_head = json_size(c, {"num_key_value_heads"});
    if (s.n_kv_head == 0) s.n_kv_head = s.n_head;
    s.head_size = json_size(c, {"head_dim"});
    if (s.head_size == 0) s.head_size = s.hidden / s.n_head;
    s.mlp_hidden = json_size(c, {"intermediate_size"});
    if (s.mlp_hidden == 0) s.mlp_hidden = 4 * s.hidden;
    s.vocab = lm->vocab_size();
    s.padded_vocab = json_size(c, {"padded_vocab_size"});
    if (s.padded_vocab == 0) s.padded_vocab = s.vocab;
    const std::shared_ptr<nn::Module> module = models::as_module(lm);
    bool separate_head = false;
    for (const auto& [name, p] : module->named_parameters())
        if (name.find("lm_head") != std::string::npos) separate_head = true;
    for (const auto& [name, p] : module->named_parameters()) {
        if (!p.requires_grad()) continue;
        s.num_parameters += p.numel();
        s.param_numels.push_back(p.numel());
        if (name.find(".0.") != std::string::npos) s.layer_numel += p.numel();   // h.0.*, layers.0.*
        const bool lookup_only = name.find("wpe") != std::string::npos ||
                                 (separate_head && name.find("embed_tokens") != std::string::npos);
        if (p.dim() == 2 && !lookup_only) s.matmul_weight_numel += p.numel();
    }
    for (const auto& [name, b] : module->named_buffers()) s.buffer_bytes += b.numel() * static_cast<int64_t>(b.element_size());
    if (run.prec == "fp8") add_fp8_layers(s, *module, run);
    return s;
}

namespace {

void check_request(const PlanRequest& r) {
    const RunConfig& run = r.run;
    if (r.world_size < 1) throw ValueError(fmt::format("plan: --world-size {} must be at least 1", r.world_size));
    if (r.world_size > 1 && run.zero < 0)
        throw ValueError(fmt::format("plan: --world-size {} needs --zero STAGE (0 is plain data parallelism)", r.world_size));
    if (run.zero > 3) throw ValueError(fmt::format("plan: --zero {} is not 0, 1, 2 or 3", run.zero));
    if (run.zero >= 0 && run.prec == "fp16")
        throw ValueError("plan: --prec fp16 (autocast + GradScaler) is not supported with --zero; use fp16-master");
    if (run.batch_size < 1 || run.batch_size % r.world_size != 0)
        throw ValueError(fmt::format("plan: --batch-size {} must be a positive multiple of --world-size {}",
                                     run.batch_size, r.world_size));
    const std::vector<std::string> precs = {"fp32", "bf16", "fp16", "fp16-master", "fp8"};
    if (std::find(precs.begin(), precs.end(), run.prec) == precs.end())
        throw ValueError(fmt::format("plan: --prec {} is not one of fp32, bf16, fp16, fp16-master, fp8", run.prec));
}

// The terms at the largest of three moments: backward's start (every activation saved), backward's
// end in stages 2-3 (the last gradient bucket packed and reduce-scattered) and the optimizer step.
void choose_peak(MemoryPlan& p, const ModelStates& s, const ActivationBytes& acts, int64_t weight_copies) {
    const int64_t held = s.params + s.grads + s.optimizer + s.master + p.model.buffer_bytes + p.model.fp8_state_bytes;
    const int64_t backward_start = held + s.gathered_params + weight_copies + acts.total();
    const int64_t backward_end = held + s.buckets;
    const int64_t step = held + s.grads_at_step + s.step_work;
    const int64_t peak = std::max({backward_start, backward_end, step});
    const bool at_backward = peak == backward_start, at_buckets = !at_backward && peak == backward_end;
    p.peak_moment = at_backward ? "start of backward" : at_buckets ? "end of backward" : "optimizer step";
    add(p, "parameters", s.params + p.model.buffer_bytes + (at_backward ? s.gathered_params : 0),
        fmt::format("{} elements, this rank's{}", p.model.num_parameters,
                    s.gathered_params > 0 && at_backward ? " + the gathered head (stage 3)" : ""));
    add(p, "gradients", s.grads + (at_backward || at_buckets ? 0 : s.grads_at_step), "flat buffers and .grad");
    add(p, "optimizer state", s.optimizer, "AdamW exp_avg + exp_avg_sq, f32");
    add(p, "master weights", s.master, "f32 copy of the parameters");
    add(p, "fp8 scaling state", p.model.fp8_state_bytes, "amax histories and scales of the fp8 Linears (--prec fp8)");
    if (at_backward) {
        add(p, "autocast weight copies", weight_copies, "2 bytes x GEMM weights (cast cache)");
        add(p, "activations: norms + residual", acts.norms, "norm inputs and statistics");
        add(p, "activations: attention", acts.attention, "q/k/v, rotary, SDPA out + lse, GEMM inputs");
        add(p, "activations: mlp", acts.mlp, "GEMM inputs, activation inputs/outputs");
        add(p, "activations: head + loss", acts.head_and_loss + acts.loss_backward,
            "final norm, head input, log-probabilities, dlogits");
    } else if (at_buckets) {
        add(p, "communication buckets", s.buckets, "bucket gradients, packed send buffer, receive chunk");
    } else {
        add(p, "optimizer step work", s.step_work, "f64 squares for the gradient norm");
    }
}

}  // namespace

MemoryPlan plan_memory(const PlanRequest& request) {
    check_request(request);
    const RunConfig& run = request.run;
    MemoryPlan p;
    p.model = model_shape(run, request.vocab_size);
    p.context = p.model.context;
    p.batch_per_rank = run.batch_size / request.world_size;
    const int64_t P = p.model.num_parameters;
    const ModelStates states = run.zero >= 0 ? zero_states(p.model, run.zero, request.world_size, run.prec)
                                             : single_process_states(P, run.prec);
    const ActivationBytes acts = activation_bytes(p.model, activation_dtypes(run.prec, run.zero >= 0), p.batch_per_rank, p.context,
                                                  run.checkpoint_blocks, run.device);
    choose_peak(p, states, acts, autocast_weight_copies(p.model, run.prec));
    int64_t rest = 0;
    for (const MemoryTerm& t : p.terms) rest += t.bytes;
    // The CPU allocator's counters are bytes as requested (cpu/allocator.cpp); CUDA's caching
    // allocator rounds blocks and splits segments: a rule-of-thumb 5% on top, not measured here.
    if (run.device == "cuda") add(p, "allocator overhead", rest / 20, "5% rule of thumb: block rounding, fragmentation");
    p.total_bytes = 0;
    for (const MemoryTerm& t : p.terms) p.total_bytes += t.bytes;
    const auto largest = std::max_element(p.terms.begin(), p.terms.end(),
                                          [](const MemoryTerm& a, const MemoryTerm& b) { return a.bytes < b.bytes; });
    p.largest = fmt::format("{} ({:.0f}%)", largest->name, 100.0 * static_cast<double>(largest->bytes) /
                                                              static_cast<double>(p.total_bytes));
    return p;
}

std::string format_bytes(int64_t bytes) {
    const double b = static_cast<double>(bytes);
    if (bytes >= (int64_t(1) << 30)) return fmt::format("{:.2f} GiB", b / (1 << 30));
    if (bytes >= (int64_t(1) << 20)) return fmt::format("{:.1f} MiB", b / (1 << 20));
    if (bytes >= (int64_t(1) << 10)) return fmt::format("{:.1f} KiB", b / (1 << 10));
    return fmt::format("{} B", bytes);
}

std::string format_plan(const MemoryPlan& p) {
    std::string out = fmt::format("peak per rank at the {}: {}\n", p.peak_moment, format_bytes(p.total_bytes));
    for (const MemoryTerm& t : p.terms)
        out += fmt::format("  {:<30} {:>12}  {:>5.1f}%  {}\n", t.name, format_bytes(t.bytes),
                           100.0 * static_cast<double>(t.bytes) / static_cast<double>(p.total_bytes), t.formula);
    out += fmt::format("largest: {}\n", p.largest);
    if (!p.advice.empty()) out += p.advice + "\n";
    return out;
}

}  // namespace ampgrad::app
