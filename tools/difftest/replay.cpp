// replay.cpp: the ampgrad side of the differential tester (tools/difftest/difftest.py, docs/testing.md).
// Reads one JSON case per line on stdin, runs it, writes one JSON result per line on stdout:
//   case:   {"id", "inputs": [{"dtype","shape","data","layout","requires_grad"}], "prog": [{"op","args","kw"}],
//            "outputs": [reg...], "douts": [tensor|null...], "double": bool, "vs": [tensor|null...]}
//   result: {"id", "stage": "ok"|"forward"|"backward"|"double", "error": "Class: message",
//            "outputs": [...], "grads": [...], "grads2": [...]}
// An argument or output reference is either i (input i, after its layout: "c" contiguous, "t" a
// transposed base, "s" a stride-2 slice, "e" an expanded dim 0) or [s, j] (output j of step s).
// Gradients are taken with respect to the bases (the leaves). Op table: tools/difftest/replay_ops.cpp.
#include <cmath>
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include "ampgrad/ampgrad.h"
#include "tools/difftest/replay_ops.hpp"

using json = nlohmann::json;
using namespace ampgrad;

namespace {

DType parse_dtype(const std::string& s) {
    if (s == "f32") return kFloat32;
    if (s == "f64") return kFloat64;
    if (s == "f16") return kFloat16;
    if (s == "bf16") return kBFloat16;
    if (s == "i64") return kInt64;
    if (s == "i32") return kInt32;
    return kBool;
}

double number(const json& v) {
    if (v.is_string()) {
        std::string s = v.get<std::string>();
        return s == "nan" ? NAN : (s == "inf" ? INFINITY : -INFINITY);
    }
    return v.get<double>();
}

// a contiguous tensor from {"dtype","shape","data"}
Tensor decode(const json& j) {
    Shape shape = j.at("shape").get<Shape>();
    DType dt = parse_dtype(j.at("dtype").get<std::string>());
    if (dt == kInt64 || dt == kInt32 || dt == kBool) {
        std::vector<int64_t> v;
        for (const auto& x : j.at("data")) v.push_back(x.get<int64_t>());
        Tensor t = tensor(v, shape);
        return dt == kBool ? ne(t, zeros({}, TensorOptions(kInt64))) : t.to(dt);
    }
    std::vector<double> v;
    for (const auto& x : j.at("data")) v.push_back(number(x));
    return tensor(v, shape, TensorOptions(kFloat64)).to(dt);
}

json encode(const Tensor& t) {
    if (!t.defined()) return nullptr;
    json data = json::array();
    Tensor c = t.detach();
    if (is_floating(c.dtype())) {
        for (double x : c.to(kFloat64).contiguous().to_vector<double>()) {
            if (std::isnan(x)) data.push_back("nan");
            else if (std::isinf(x)) data.push_back(x > 0 ? "inf" : "-inf");
            else data.push_back(x);
        }
    } else {
        for (int64_t x : c.to(kInt64).contiguous().to_vector<int64_t>()) data.push_back(x);
    }
    return json{{"dtype", std::string(dtype_name(t.dtype()))}, {"shape", t.sizes()}, {"data", data}};
}

// the input as the op sees it, from its leaf base
Tensor apply_layout(const Tensor& base, const std::string& layout) {
    if (layout == "t") return base.transpose(-1, -2);
    if (layout == "s") {
        Shape s = base.sizes();
        int64_t n = s.back() / 2;
        s.back() = n;
        s.push_back(2);
        return base.view(s).select(-1, 0);
    }
    if (layout == "e") {
        Shape s = base.sizes();
        s[0] = 3;
        return base.expand(s);
    }
    return base;
}

std::string error_class(const std::exception& e) {
    if (dynamic_cast<const ShapeError*>(&e)) return "ShapeError";
    if (dynamic_cast<const DTypeError*>(&e)) return "DTypeError";
    if (dynamic_cast<const IndexError*>(&e)) return "IndexError";
    if (dynamic_cast<const ValueError*>(&e)) return "ValueError";
    if (dynamic_cast<const AutogradError*>(&e)) return "AutogradError";
    return "Error";
}

// One case's program, run on its inputs: the leaves (as decoded), the registers the program reads
// (the leaves in their layouts, then each step's outputs) and the case's outputs.
struct CaseRun {
    tensor_list leaves, regs;
    std::vector<tensor_list> steps;

    Tensor& ref(const json& a) {
        if (a.is_number()) return regs.at(a.get<size_t>());
        return steps.at(a[0].get<size_t>()).at(a[1].get<size_t>());
    }
    void load_inputs(const json& inputs) {
        for (const auto& in : inputs) {
            Tensor base = decode(in);
            if (in.value("requires_grad", false)) base.requires_grad_(true);
            leaves.push_back(base);
            regs.push_back(apply_layout(base, in.value("layout", std::string("c"))));
        }
    }
    void run_program(const json& prog) {
        for (const auto& step : prog) {
            tensor_list args;
            for (const auto& a : step.at("args")) args.push_back(ref(a));
            steps.push_back(difftest::run_op(step.at("op").get<std::string>(), args, step.value("kw", json::object())));
        }
    }
};

// The second derivative: the gradient of sum_i <g_i, v_i> with respect to the leaves (null where
// nothing depends on a leaf).
json second_grads(const json& c, const tensor_list& g, const tensor_list& wrt, const std::vector<size_t>& wrt_index,
                  size_t n_leaves) {
    Tensor total;
    for (size_t i = 0; i < wrt.size(); ++i) {
        const json& v = c.at("vs")[wrt_index[i]];
        if (!g[i].defined() || !g[i].requires_grad() || v.is_null()) continue;
        Tensor term = (g[i] * decode(v).to(g[i].dtype())).sum().to(kFloat64);
        total = total.defined() ? total + term : term;
    }
    json grads2 = json::array();
    for (size_t i = 0; i < n_leaves; ++i) grads2.push_back(nullptr);
    if (total.defined()) {
        tensor_list g2 = autograd::grad({total}, wrt, {}, std::nullopt, false, true);
        for (size_t i = 0; i < wrt.size(); ++i) grads2[wrt_index[i]] = encode(g2[i]);
    }
    return grads2;
}

json run_case(const json& c) {
    json r{{"id", c.at("id")}};
    std::string stage = "forward";
    try {
        CaseRun run;
        run.load_inputs(c.at("inputs"));
        run.run_program(c.at("prog"));
        tensor_list outs, douts;
        json out_json = json::array();
        for (size_t i = 0; i < c.at("outputs").size(); ++i) {
            Tensor o = run.ref(c.at("outputs")[i]);
            out_json.push_back(encode(o));
            const json& d = c.at("douts")[i];
            if (!d.is_null() && o.requires_grad()) { outs.push_back(o); douts.push_back(decode(d)); }
        }
        r["outputs"] = out_json;
        tensor_list wrt;
        std::vector<size_t> wrt_index;
        for (size_t i = 0; i < run.leaves.size(); ++i)
            if (run.leaves[i].requires_grad()) { wrt.push_back(run.leaves[i]); wrt_index.push_back(i); }
        if (outs.empty() || wrt.empty()) { r["stage"] = "ok"; return r; }
        stage = "backward";
        const bool dbl = c.value("double", false);
        tensor_list g = autograd::grad(outs, wrt, douts, true, dbl, true);
        json grads = json::array();
        for (size_t i = 0; i < run.leaves.size(); ++i) grads.push_back(nullptr);
        for (size_t i = 0; i < wrt.size(); ++i) grads[wrt_index[i]] = encode(g[i]);
        r["grads"] = grads;
        if (dbl) {
            stage = "double";
            r["grads2"] = second_grads(c, g, wrt, wrt_index, run.leaves.size());
        }
        r["stage"] = "ok";
    } catch (const std::exception& e) {
        r["stage"] = stage;
        r["error"] = error_class(e) + ": " + e.what();
    }
    return r;
}

}  // namespace

int main() {
    std::ios::sync_with_stdio(false);
    std::string line;
    while (std::getline(std::cin, line)) {
        if (line.empty()) continue;
        json c = json::parse(line);
        std::cout << run_case(c).dump(-1, ' ', false, json::error_handler_t::replace) << "\n" << std::flush;
    }
    return 0;
}
