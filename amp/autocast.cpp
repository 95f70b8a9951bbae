// autocast.cpp: AutocastGuard, the cast cache, and the op hook (autocast_inputs) that every op in
// the policy table calls first, installed in core/autocast_state.hpp at load time. The decisions
// themselves are made by decide_casts() in autocast_policy.cpp; this file only applies them.
#include "amp/autocast.hpp"

#include "amp/fp8_recipe.hpp"

#include <map>
#include <memory>
#include <tuple>

#include "autograd/autograd_meta.hpp"
#include "autograd/grad_mode.hpp"
#include "autograd/ops/ops.hpp"
#include "core/error.hpp"
#include "core/profiler.hpp"

namespace ampgrad::amp {

namespace {

thread_local AutocastRecorder* t_recorder = nullptr;

// ---- the cast cache ----
struct CacheKey {
    const TensorImpl* source;
    DType target;
    bool grad_mode;                          // fix for pytorch #112583: no_grad casts stay separate
    auto operator<=>(const CacheKey&) const = default;
};
struct CacheEntry {
    std::weak_ptr<TensorImpl> source;        // guards against a freed tensor's address being reused
    uint32_t version = 0;                    // fix for stale casts: recast after an in-place update
    Tensor cast;
};
struct CastCache {
    std::map<CacheKey, CacheEntry> entries;
    AutocastCacheStats stats;
};
thread_local CastCache t_cache;

// PyTorch caches only f32 -> lower-precision casts of leaves that require grad and are not views:
// the weights, which every forward casts again otherwise.
bool cacheable(const Tensor& t, DType target) {
    if (!autocast::cache_enabled() || t.dtype() != kFloat32 || !is_reduced_float(target)) return false;
    if (!t.is_leaf() || !t.requires_grad()) return false;
    const autograd::AutogradMeta* meta = autograd::maybe_meta(t);
    return !(meta && meta->is_differentiable_view);
}

// The profiler's args of a cast for `op`: the tensor cast and the dtype it becomes.
std::string cast_span_args(std::string_view op, const Tensor& t, DType target) {
    return fmt::format("{{\"op\": {}, \"input\": {}, \"to\": \"{}\"}}", profiler::json_string(op),
                       profiler::json_string(t.describe()), dtype_name(target));
}

// A cast the profiler sees as an "autocast.cast" span (core/profiler.hpp).
Tensor traced_cast(std::string_view op, const Tensor& t, DType target) {
    profiler::Span span("autocast", "autocast.cast", [&] { return cast_span_args(op, t, target); });
    return to_dtype(t, target);
}

// Returns the cast of t to target, from the cache when allowed; sets hit when it came from it. A hit
// is an "autocast.cache_hit" span (no work: it marks the reuse on the timeline).
Tensor cached_cast(std::string_view op, const Tensor& t, DType target, bool& hit) {
    hit = false;
    if (!cacheable(t, target)) return traced_cast(op, t, target);
    CacheKey key{t.impl(), target, GradMode::is_enabled()};
    auto it = t_cache.entries.find(key);
    if (it != t_cache.entries.end()) {
        CacheEntry& e = it->second;
        bool same_tensor = e.source.lock().get() == t.impl();
        if (same_tensor && e.version == t._version()) {
            ++t_cache.stats.hits;
            hit = true;
            profiler::Span span("autocast", "autocast.cache_hit", [&] { return cast_span_args(op, t, target); });
            return e.cast;
        }
        if (same_tensor) ++t_cache.stats.stale;
    }
    Tensor cast = traced_cast(op, t, target);
    t_cache.entries[key] = CacheEntry{t.impl_ptr(), t._version(), cast};
    ++t_cache.stats.misses;
    t_cache.stats.size = static_cast<int64_t>(t_cache.entries.size());
    return cast;
}

}  // namespace

// ---- state queries (the state itself is core's: core/autocast_state.hpp) ----

DType default_autocast_dtype(DeviceType device) { return autocast::default_dtype(device); }
bool is_autocast_enabled(DeviceType device) { return autocast::state(device).enabled; }
DType get_autocast_dtype(DeviceType device) { return autocast::state(device).dtype; }
bool is_autocast_cache_enabled() { return autocast::cache_enabled(); }
int autocast_nesting() { return autocast::nesting(); }
bool autocast_active() { return autocast::active(); }
AutocastStates current_autocast_state() { return autocast::states(); }

// ---- AutocastGuard ----

namespace {
DType checked_dtype(DeviceType device, std::optional<DType> dtype) {
    DType d = dtype.value_or(default_autocast_dtype(device));
    if (!is_reduced_float(d))
        throw AmpError(fmt::format("AutocastGuard: unsupported autocast dtype for {}: {}; expected f16 or bf16",
                                   device_type_name(device), dtype_name(d)));
    return d;
}
}  // namespace

AutocastGuard::AutocastGuard(DeviceType device, std::optional<DType> dtype, bool enabled, bool cache_enabled)
    : guard_(device, AutocastState{enabled, checked_dtype(device, dtype)}, cache_enabled), fp8_scope_(false) {}

AutocastGuard::AutocastGuard(DeviceType device, const Fp8Recipe& recipe)
    : guard_(device, AutocastState{true, kBFloat16}, true), fp8_scope_(true) {
    recipe.check();
}

AutocastGuard::~AutocastGuard() = default;

// ---- cache ----

AutocastCacheStats autocast_cache_stats() {
    AutocastCacheStats s = t_cache.stats;
    s.size = static_cast<int64_t>(t_cache.entries.size());
    return s;
}

void clear_autocast_cache() {
    t_cache.entries.clear();
    t_cache.stats = {};
}

// ---- recorder ----

AutocastRecorder::AutocastRecorder() : previous_(t_recorder) { t_recorder = this; }
AutocastRecorder::~AutocastRecorder() { t_recorder = previous_; }

std::string AutocastRecorder::str() const {
    std::string out;
    for (const CastEvent& e : events_) {
        out += explain(e.op, e.inputs, e.state);
        for (size_t i = 0; i < e.cache_hits.size(); ++i)
            if (e.cache_hits[i]) out += fmt::format("  input {}: cast taken from the cache\n", i);
    }
    return out;
}

namespace detail {
bool set_autocast_suspended(bool suspended) { return autocast::set_suspended(suspended); }
}  // namespace detail

// ---- the op hook (AMPGRAD_AUTOCAST in autograd/ops/autocast_hook.hpp calls it through core) ----

void autocast_inputs(std::string_view op, std::initializer_list<Tensor*> args) {
    const PolicyEntry* entry = find_policy(op);
    if (!entry) return;                                  // not an autocast op: normal promotion
    std::vector<CastInput> inputs;
    inputs.reserve(args.size());
    for (const Tensor* t : args) {
        if (!t || !t->defined()) inputs.push_back(CastInput{false, kFloat32, kCPU});
        else inputs.push_back(CastInput{true, t->dtype(), t->device().type});
    }
    const AutocastStates state = autocast::states();
    if (entry->policy == CastPolicy::kBanned) {
        for (const CastInput& in : inputs)
            if (in.defined && state[device_type_index(in.device)].enabled) throw AmpError(banned_message(op));
        return;
    }
    std::vector<std::optional<DType>> casts = decide_casts(entry->policy, inputs, state);
    std::vector<bool> hits(args.size(), false);
    size_t i = 0;
    for (Tensor* t : args) {
        if (casts[i]) {
            bool hit = false;
            *t = cached_cast(op, *t, *casts[i], hit);
            hits[i] = hit;
        }
        ++i;
    }
    if (t_recorder) t_recorder->events_.push_back(CastEvent{std::string(op), inputs, casts, hits, state});
}

// Installs the policy and the cache's cleanup in core at load time.
[[maybe_unused]] static const bool g_hooks_installed = (autocast::set_cast_hook(&autocast_inputs),
                                                 autocast::set_exit_hook(&clear_autocast_cache), true);

}  // namespace ampgrad::amp
