// amp_policy.cpp: prints the autocast policy table and explains why an op runs in a given dtype.
//   amp_policy                                    # the table, by category
//   amp_policy explain matmul f32 f16             # inputs' dtypes; autocast on for cpu, bf16
//   amp_policy explain softmax bf16 --autocast f16 --device cuda
//   amp_policy explain exp f32 --autocast off
//   amp_policy trace                              # run a tiny model under autocast, explain each op
#include <ampgrad/ampgrad.h>

#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

using namespace ampgrad;

namespace {

int usage() {
    std::cerr << "usage: amp_policy [explain OP DTYPE... [--autocast f16|bf16|off] [--device cpu|cuda] | trace]\n"
                 "  DTYPE: f32 f16 bf16 f64 i64 i32 bool\n";
    return 2;
}

bool parse_dtype(const std::string& s, DType& out) {
    for (DType d : {kFloat32, kFloat16, kBFloat16, kFloat64, kInt64, kInt32, kBool})
        if (dtype_name(d) == s) { out = d; return true; }
    return false;
}

void print_table() { std::cout << amp::policy_table_text(); }

int explain(const std::vector<std::string>& args) {
    if (args.empty()) return usage();
    std::string op = args[0];
    DeviceType device = kCPU;
    std::string autocast = "";
    std::vector<DType> dtypes;
    for (size_t i = 1; i < args.size(); ++i) {
        if (args[i] == "--autocast" && i + 1 < args.size()) autocast = args[++i];
        else if (args[i] == "--device" && i + 1 < args.size()) device = Device(args[++i]).type;
        else {
            DType d;
            if (!parse_dtype(args[i], d)) return usage();
            dtypes.push_back(d);
        }
    }
    AutocastStates state{};
    for (size_t t = 0; t < kNumDeviceTypes; ++t)
        state[t] = AutocastState{false, autocast::default_dtype(static_cast<DeviceType>(t))};
    AutocastState& s = state[device_type_index(device)];
    s.enabled = autocast != "off";
    if (autocast == "f16") s.dtype = kFloat16;
    if (autocast == "bf16") s.dtype = kBFloat16;
    std::vector<amp::CastInput> inputs;
    for (DType d : dtypes) inputs.push_back({true, d, device});
    std::cout << "autocast " << (s.enabled ? "on" : "off") << " for " << device_type_name(device)
              << (s.enabled ? std::string(", dtype ") + std::string(dtype_name(s.dtype)) : "") << "\n";
    std::cout << amp::explain(op, inputs, state);
    return 0;
}

// A tiny transformer-ish block under autocast, with every decision recorded and explained.
int trace() {
    manual_seed(0);
    Tensor x = randn({4, 8});                                              // (B,C)
    Tensor w1 = randn({16, 8}).requires_grad_(true), w2 = randn({8, 16}).requires_grad_(true);
    Tensor ln_w = ones({16}).requires_grad_(true), ln_b = zeros({16}).requires_grad_(true);
    amp::AutocastRecorder recorder;
    Tensor loss;
    {
        amp::AutocastGuard autocast(kCPU);
        Tensor h = linear(x, w1);                                          // (B,16) bf16
        h = F::layer_norm(h, {16}, ln_w, ln_b);                            // (B,16) f32
        Tensor y = linear(h, w2);                                          // (B,8) bf16
        Tensor p = F::softmax(y, -1);                                      // (B,8) f32
        loss = sum(p * p);                                                 // () f32
    }
    std::cout << "x (4,8) f32 -> linear(w1) -> layer_norm -> linear(w2) -> softmax -> sum, under AutocastGuard(kCPU)\n\n"
              << recorder.str() << "\nloss dtype: " << dtype_name(loss.dtype()) << "\n";
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    std::vector<std::string> args(argv + 1, argv + argc);
    if (args.empty()) {
        print_table();
        return 0;
    }
    if (args[0] == "explain") return explain({args.begin() + 1, args.end()});
    if (args[0] == "trace") return trace();
    return usage();
}
