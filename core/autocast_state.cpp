// autocast_state.cpp: the thread-local autocast state and the hooks amp/ installs.
#include "core/autocast_state.hpp"

namespace ampgrad::autocast {

namespace {
constexpr std::array<DType, kNumDeviceTypes> kDefaultDtype = {
#define AMPGRAD_AUTOCAST_DEFAULT(e, name, autocast_dtype) autocast_dtype,
    AMPGRAD_DEVICE_TYPES(AMPGRAD_AUTOCAST_DEFAULT)
#undef AMPGRAD_AUTOCAST_DEFAULT
};

AutocastStates initial_states() {
    AutocastStates s{};
    for (size_t i = 0; i < kNumDeviceTypes; ++i) s[i] = AutocastState{false, kDefaultDtype[i]};
    return s;
}

// ---- per-thread state (PyTorch keeps the same fields thread-local) ----
thread_local AutocastStates t_state = initial_states();
thread_local bool t_any_enabled = false;     // some t_state[i].enabled
thread_local bool t_suspended = false;       // set by the engine for the duration of backward
thread_local bool t_cache_enabled = true;
thread_local int t_nesting = 0;

// Installed once by amp/ at load time; read on every autocast op.
CastHook g_cast_hook = nullptr;
ExitHook g_exit_hook = nullptr;

void refresh_any_enabled() {
    t_any_enabled = false;
    for (const AutocastState& s : t_state) t_any_enabled = t_any_enabled || s.enabled;
}
}  // namespace

DType default_dtype(DeviceType device) { return kDefaultDtype[device_type_index(device)]; }
AutocastStates states() { return t_state; }
AutocastState state(DeviceType device) { return t_state[device_type_index(device)]; }
bool cache_enabled() { return t_cache_enabled; }
int nesting() { return t_nesting; }
bool active() { return t_any_enabled && !t_suspended; }

bool set_suspended(bool suspended) {
    bool previous = t_suspended;
    t_suspended = suspended;
    return previous;
}

StateGuard::StateGuard(DeviceType device, AutocastState state, bool cache_enabled)
    : device_(device), previous_(t_state[device_type_index(device)]), previous_cache_enabled_(t_cache_enabled) {
    t_state[device_type_index(device)] = state;
    t_cache_enabled = cache_enabled;
    refresh_any_enabled();
    ++t_nesting;
}

StateGuard::~StateGuard() {
    if (--t_nesting == 0 && g_exit_hook) g_exit_hook();      // the outermost region ends
    t_state[device_type_index(device_)] = previous_;
    t_cache_enabled = previous_cache_enabled_;
    refresh_any_enabled();
}

void set_cast_hook(CastHook hook) { g_cast_hook = hook; }
void set_exit_hook(ExitHook hook) { g_exit_hook = hook; }

void cast_inputs(std::string_view op, std::initializer_list<Tensor*> args) {
    if (g_cast_hook) g_cast_hook(op, args);
}

}  // namespace ampgrad::autocast
