// replay_ops.cpp: the op table of the differential tester's replay program. Each entry maps a
// name and keyword arguments onto one ampgrad call; tools/difftest/torch_ops.py holds the same
// names with the PyTorch calls they must agree with.
#include "tools/difftest/replay_ops.hpp"

#include <cmath>
#include <functional>
#include <map>

namespace ampgrad::difftest {

namespace {

using json = nlohmann::json;
using OpFn = std::function<tensor_list(tensor_list&, const json&)>;

// a number, or "nan" / "inf" / "-inf" (JSON has no literals for them)
double num(const json& v) {
    if (!v.is_string()) return v.get<double>();
    std::string s = v.get<std::string>();
    return s == "nan" ? NAN : (s == "inf" ? INFINITY : -INFINITY);
}

std::optional<double> opt_double(const json& kw, const char* key) {
    if (!kw.contains(key) || kw.at(key).is_null()) return std::nullopt;
    return num(kw.at(key));
}

Shape dims_of(const json& kw, const char* key = "dims") {
    if (!kw.contains(key) || kw.at(key).is_null()) return {};
    return kw.at(key).get<Shape>();
}

DType dtype_of(const std::string& s) {
    if (s == "f64") return kFloat64;
    if (s == "f16") return kFloat16;
    if (s == "bf16") return kBFloat16;
    if (s == "i64") return kInt64;
    if (s == "bool") return kBool;
    return kFloat32;
}

F::Reduction reduction_of(const std::string& r) {
    return r == "none" ? F::Reduction::kNone : (r == "sum" ? F::Reduction::kSum : F::Reduction::kMean);
}

#define UNARY(name, expr) {name, [](tensor_list& a, const json&) { return tensor_list{expr}; }}
#define BINARY(name, expr) {name, [](tensor_list& a, const json&) { return tensor_list{expr}; }}

const std::map<std::string, OpFn>& table() {
    static const std::map<std::string, OpFn> ops = {
        // elementwise
        UNARY("neg", neg(a[0])), UNARY("exp", exp(a[0])), UNARY("log", log(a[0])), UNARY("sqrt", sqrt(a[0])),
        UNARY("rsqrt", rsqrt(a[0])), UNARY("abs", abs(a[0])), UNARY("square", square(a[0])),
        UNARY("reciprocal", reciprocal(a[0])), UNARY("tanh", tanh(a[0])), UNARY("sigmoid", sigmoid(a[0])),
        UNARY("relu", relu(a[0])), UNARY("gelu", gelu(a[0], false)), UNARY("gelu_tanh", gelu(a[0], true)),
        UNARY("silu", silu(a[0])), UNARY("isfinite", isfinite(a[0])), UNARY("logical_not", logical_not(a[0])),
        {"clamp", [](tensor_list& a, const json& k) { return tensor_list{clamp(a[0], opt_double(k, "lo"), opt_double(k, "hi"))}; }},
        UNARY("sin", sin(a[0])), UNARY("cos", cos(a[0])), UNARY("exp2", exp2(a[0])), UNARY("log1p", log1p(a[0])),
        UNARY("expm1", expm1(a[0])), UNARY("erf", erf(a[0])), UNARY("sign", sign(a[0])), UNARY("floor", floor(a[0])),
        UNARY("ceil", ceil(a[0])), UNARY("round", round(a[0])), UNARY("trunc", trunc(a[0])),
        BINARY("fmod", fmod(a[0], a[1])), BINARY("remainder", remainder(a[0], a[1])), BINARY("atan2", atan2(a[0], a[1])),
        BINARY("lerp", lerp(a[0], a[1], a[2])), BINARY("logical_xor", logical_xor(a[0], a[1])),
        {"lerp_s", [](tensor_list& a, const json& k) { return tensor_list{lerp(a[0], a[1], num(k.at("s")))}; }},
        {"rms_norm", [](tensor_list& a, const json& k) {
             return tensor_list{F::rms_norm(a[0], k.at("shape").get<Shape>(), a.size() > 1 ? a[1] : Tensor(), opt_double(k, "eps"))}; }},
        {"apply_rotary_emb", [](tensor_list& a, const json& k) {
             return tensor_list{F::apply_rotary_emb(a[0], a[1], a[2], k.value("interleaved", false))}; }},
        {"tril", [](tensor_list& a, const json& k) { return tensor_list{tril(a[0], k.at("diagonal").get<int64_t>())}; }},
        {"triu", [](tensor_list& a, const json& k) { return tensor_list{triu(a[0], k.at("diagonal").get<int64_t>())}; }},
        {"masked_fill", [](tensor_list& a, const json& k) { return tensor_list{masked_fill(a[0], a[1], num(k.at("s")))}; }},
        {"repeat_interleave", [](tensor_list& a, const json& k) {
             std::optional<int64_t> dim;
             if (k.contains("dim") && !k.at("dim").is_null()) dim = k.at("dim").get<int64_t>();
             return tensor_list{repeat_interleave(a[0], k.at("repeats").get<int64_t>(), dim)}; }},
        {"chunk", [](tensor_list& a, const json& k) { return chunk(a[0], k.at("chunks").get<int64_t>(), k.at("dim").get<int64_t>()); }},
        {"repeat", [](tensor_list& a, const json& k) { return tensor_list{repeat(a[0], k.at("repeats").get<Shape>())}; }},
        {"flip", [](tensor_list& a, const json& k) { return tensor_list{flip(a[0], k.at("dims").get<Shape>())}; }},
        {"roll", [](tensor_list& a, const json& k) {
             return tensor_list{roll(a[0], k.at("shifts").get<Shape>(), k.at("dims").get<Shape>())}; }},
        {"cumsum", [](tensor_list& a, const json& k) { return tensor_list{cumsum(a[0], k.at("dim").get<int64_t>())}; }},
        {"slice", [](tensor_list& a, const json& k) {
             auto bound = [&](const char* key) {
                 return k.at(key).is_null() ? std::nullopt : std::optional<int64_t>(k.at(key).get<int64_t>()); };
             return tensor_list{slice(a[0], k.at("dim").get<int64_t>(), bound("start"), bound("end"),
                                      k.at("step").get<int64_t>())}; }},
        {"sort", [](tensor_list& a, const json& k) {
             auto [v, i] = sort(a[0], k.at("dim").get<int64_t>(), k.at("descending").get<bool>(), true);
             return tensor_list{v, i}; }},
        {"argsort", [](tensor_list& a, const json& k) {
             return tensor_list{argsort(a[0], k.at("dim").get<int64_t>(), k.at("descending").get<bool>(), true)}; }},
        {"topk", [](tensor_list& a, const json& k) {
             return tensor_list{topk(a[0], k.at("k").get<int64_t>(), k.at("dim").get<int64_t>(), k.at("largest").get<bool>()).first}; }},
        {"sdpa_gqa", [](tensor_list& a, const json& k) {
             return tensor_list{F::scaled_dot_product_attention(a[0], a[1], a[2], a.size() > 3 ? a[3] : Tensor(), 0.0,
                                                                k.value("is_causal", false), std::nullopt, true)}; }},
        {"gather", [](tensor_list& a, const json& k) { return tensor_list{gather(a[0], k.at("dim").get<int64_t>(), a[1])}; }},
        {"scatter", [](tensor_list& a, const json& k) {
             return tensor_list{scatter(a[0], k.at("dim").get<int64_t>(), a[1], a[2])}; }},
        {"scatter_v", [](tensor_list& a, const json& k) {
             return tensor_list{scatter(a[0], k.at("dim").get<int64_t>(), a[1], num(k.at("s")))}; }},
        {"scatter_add", [](tensor_list& a, const json& k) {
             return tensor_list{scatter_add(a[0], k.at("dim").get<int64_t>(), a[1], a[2])}; }},
        {"index_select", [](tensor_list& a, const json& k) {
             return tensor_list{index_select(a[0], k.at("dim").get<int64_t>(), a[1])}; }},
        {"index_add", [](tensor_list& a, const json& k) {
             return tensor_list{index_add(a[0], k.at("dim").get<int64_t>(), a[1], a[2], num(k.at("alpha")))}; }},
        {"take_along_dim", [](tensor_list& a, const json& k) {
             std::optional<int64_t> dim;
             if (k.contains("dim") && !k.at("dim").is_null()) dim = k.at("dim").get<int64_t>();
             return tensor_list{take_along_dim(a[0], a[1], dim)}; }},
        {"one_hot", [](tensor_list& a, const json& k) {
             return tensor_list{F::one_hot(a[0], k.at("num_classes").get<int64_t>())}; }},
        {"repeat_interleave_t", [](tensor_list& a, const json& k) {
             std::optional<int64_t> dim;
             if (k.contains("dim") && !k.at("dim").is_null()) dim = k.at("dim").get<int64_t>();
             return tensor_list{repeat_interleave(a[0], a[1], dim)}; }},
        {"repeat_interleave_r", [](tensor_list& a, const json&) { return tensor_list{repeat_interleave(a[0])}; }},
        {"add", [](tensor_list& a, const json& k) { return tensor_list{add(a[0], a[1], k.value("alpha", 1.0))}; }},
        {"sub", [](tensor_list& a, const json& k) { return tensor_list{sub(a[0], a[1], k.value("alpha", 1.0))}; }},
        BINARY("mul", mul(a[0], a[1])), BINARY("div", div(a[0], a[1])), BINARY("maximum", maximum(a[0], a[1])),
        BINARY("minimum", minimum(a[0], a[1])), BINARY("pow", pow(a[0], a[1])), BINARY("eq", eq(a[0], a[1])),
        BINARY("ne", ne(a[0], a[1])), BINARY("lt", lt(a[0], a[1])), BINARY("le", le(a[0], a[1])),
        BINARY("gt", gt(a[0], a[1])), BINARY("ge", ge(a[0], a[1])), BINARY("logical_and", a[0] & a[1]),
        BINARY("logical_or", a[0] | a[1]), BINARY("where", where(a[0], a[1], a[2])),
        {"where_s", [](tensor_list& a, const json& k) { return tensor_list{where(a[0], a[1], num(k.at("s")))}; }},
        {"add_s", [](tensor_list& a, const json& k) { return tensor_list{add(a[0], num(k.at("s")))}; }},
        {"mul_s", [](tensor_list& a, const json& k) { return tensor_list{mul(a[0], num(k.at("s")))}; }},
        {"div_s", [](tensor_list& a, const json& k) { return tensor_list{div(a[0], num(k.at("s")))}; }},
        {"rdiv_s", [](tensor_list& a, const json& k) { return tensor_list{div(num(k.at("s")), a[0])}; }},
        {"rsub_s", [](tensor_list& a, const json& k) { return tensor_list{rsub(a[0], num(k.at("s")))}; }},
        {"pow_s", [](tensor_list& a, const json& k) { return tensor_list{pow(a[0], num(k.at("s")))}; }},
        {"rpow_s", [](tensor_list& a, const json& k) { return tensor_list{pow(num(k.at("s")), a[0])}; }},
        // reductions
        {"sum", [](tensor_list& a, const json& k) {
             return tensor_list{k.at("dims").is_null() ? sum(a[0]) : sum(a[0], dims_of(k), k.value("keepdim", false))}; }},
        {"mean", [](tensor_list& a, const json& k) {
             return tensor_list{k.at("dims").is_null() ? mean(a[0]) : mean(a[0], dims_of(k), k.value("keepdim", false))}; }},
        {"max_dim", [](tensor_list& a, const json& k) {
             auto [v, i] = max(a[0], k.at("dim").get<int64_t>(), k.value("keepdim", false)); return tensor_list{v, i}; }},
        {"min_dim", [](tensor_list& a, const json& k) {
             auto [v, i] = min(a[0], k.at("dim").get<int64_t>(), k.value("keepdim", false)); return tensor_list{v, i}; }},
        UNARY("max_all", max(a[0])), UNARY("min_all", min(a[0])),
        {"amax", [](tensor_list& a, const json& k) { return tensor_list{amax(a[0], dims_of(k), k.value("keepdim", false))}; }},
        {"amin", [](tensor_list& a, const json& k) { return tensor_list{amin(a[0], dims_of(k), k.value("keepdim", false))}; }},
        {"argmax", [](tensor_list& a, const json& k) { return tensor_list{argmax(a[0], k.at("dim").get<int64_t>(), k.value("keepdim", false))}; }},
        {"argmin", [](tensor_list& a, const json& k) { return tensor_list{argmin(a[0], k.at("dim").get<int64_t>(), k.value("keepdim", false))}; }},
        {"logsumexp", [](tensor_list& a, const json& k) { return tensor_list{logsumexp(a[0], k.at("dim").get<int64_t>(), k.value("keepdim", false))}; }},
        {"logsumexp_dims", [](tensor_list& a, const json& k) { return tensor_list{logsumexp(a[0], dims_of(k), k.value("keepdim", false))}; }},
        UNARY("norm_all", norm(a[0])),
        {"norm", [](tensor_list& a, const json& k) { return tensor_list{norm(a[0], num(k.at("p")), dims_of(k), k.value("keepdim", false))}; }},
        {"var", [](tensor_list& a, const json& k) {
             return tensor_list{var(a[0], k.at("dim").get<int64_t>(), k.value("unbiased", true), k.value("keepdim", false))}; }},
        {"var_c", [](tensor_list& a, const json& k) { return tensor_list{var(a[0], dims_of(k), num(k.at("correction")), k.value("keepdim", false))}; }},
        {"std", [](tensor_list& a, const json& k) { return tensor_list{ampgrad::std(a[0], dims_of(k), num(k.at("correction")), k.value("keepdim", false))}; }},
        UNARY("prod_all", prod(a[0])),
        {"prod_dim", [](tensor_list& a, const json& k) { return tensor_list{prod(a[0], k.at("dim").get<int64_t>(), k.value("keepdim", false))}; }},
        {"sum_to", [](tensor_list& a, const json& k) { return tensor_list{sum_to(a[0], k.at("shape").get<Shape>())}; }},
        // views and shape ops
        {"view", [](tensor_list& a, const json& k) { return tensor_list{view(a[0], k.at("shape").get<Shape>())}; }},
        {"reshape", [](tensor_list& a, const json& k) { return tensor_list{reshape(a[0], k.at("shape").get<Shape>())}; }},
        {"transpose", [](tensor_list& a, const json& k) { return tensor_list{transpose(a[0], k.at("d0").get<int64_t>(), k.at("d1").get<int64_t>())}; }},
        {"permute", [](tensor_list& a, const json& k) { return tensor_list{permute(a[0], k.at("dims").get<Shape>())}; }},
        {"unsqueeze", [](tensor_list& a, const json& k) { return tensor_list{unsqueeze(a[0], k.at("dim").get<int64_t>())}; }},
        {"squeeze", [](tensor_list& a, const json& k) { return tensor_list{squeeze(a[0], k.at("dim").get<int64_t>())}; }},
        UNARY("squeeze_all", a[0].squeeze()),
        {"expand", [](tensor_list& a, const json& k) { return tensor_list{expand(a[0], k.at("shape").get<Shape>())}; }},
        {"narrow", [](tensor_list& a, const json& k) {
             return tensor_list{narrow(a[0], k.at("dim").get<int64_t>(), k.at("start").get<int64_t>(), k.at("length").get<int64_t>())}; }},
        {"select", [](tensor_list& a, const json& k) { return tensor_list{select(a[0], k.at("dim").get<int64_t>(), k.at("index").get<int64_t>())}; }},
        {"split", [](tensor_list& a, const json& k) { return split(a[0], k.at("size").get<int64_t>(), k.at("dim").get<int64_t>()); }},
        {"cat", [](tensor_list& a, const json& k) { return tensor_list{cat(a, k.at("dim").get<int64_t>())}; }},
        {"stack", [](tensor_list& a, const json& k) { return tensor_list{stack(a, k.at("dim").get<int64_t>())}; }},
        UNARY("contiguous", contiguous(a[0])), UNARY("clone", clone(a[0])),
        {"to", [](tensor_list& a, const json& k) { return tensor_list{to_dtype(a[0], dtype_of(k.at("dtype").get<std::string>()))}; }},
        {"flatten", [](tensor_list& a, const json& k) { return tensor_list{a[0].flatten(k.at("start").get<int64_t>(), k.at("end").get<int64_t>())}; }},
        // linear algebra
        BINARY("matmul", matmul(a[0], a[1])), BINARY("mm", mm(a[0], a[1])), BINARY("bmm", bmm(a[0], a[1])),
        {"linear", [](tensor_list& a, const json&) { return tensor_list{linear(a[0], a[1], a.size() > 2 ? a[2] : Tensor())}; }},
        // in place: the output is the modified tensor itself
        {"add_", [](tensor_list& a, const json& k) { return tensor_list{add_(a[0], a[1], k.value("alpha", 1.0))}; }},
        {"mul_", [](tensor_list& a, const json&) { return tensor_list{mul_(a[0], a[1])}; }},
        {"zero_", [](tensor_list& a, const json&) { return tensor_list{zero_(a[0])}; }},
        {"fill_", [](tensor_list& a, const json& k) { return tensor_list{fill_(a[0], num(k.at("value")))}; }},
        {"copy_", [](tensor_list& a, const json&) { return tensor_list{copy_(a[0], a[1])}; }},
        {"clamp_", [](tensor_list& a, const json& k) { return tensor_list{clamp_(a[0], opt_double(k, "lo"), opt_double(k, "hi"))}; }},
        {"add_s_", [](tensor_list& a, const json& k) { return tensor_list{a[0].add_(num(k.at("s")))}; }},
        {"mul_s_", [](tensor_list& a, const json& k) { return tensor_list{a[0].mul_(num(k.at("s")))}; }},
        // nn.functional
        {"softmax", [](tensor_list& a, const json& k) { return tensor_list{F::softmax(a[0], k.at("dim").get<int64_t>())}; }},
        {"log_softmax", [](tensor_list& a, const json& k) { return tensor_list{F::log_softmax(a[0], k.at("dim").get<int64_t>())}; }},
        {"layer_norm", [](tensor_list& a, const json& k) {
             return tensor_list{F::layer_norm(a[0], k.at("shape").get<Shape>(), a.size() > 1 ? a[1] : Tensor(),
                                              a.size() > 2 ? a[2] : Tensor(), k.value("eps", 1e-5))}; }},
        {"dropout", [](tensor_list& a, const json& k) { return tensor_list{F::dropout(a[0], num(k.at("p")), k.at("training").get<bool>())}; }},
        {"embedding", [](tensor_list& a, const json& k) {
             std::optional<int64_t> pad;
             if (k.contains("padding_idx") && !k.at("padding_idx").is_null()) pad = k.at("padding_idx").get<int64_t>();
             return tensor_list{F::embedding(a[0], a[1], pad)}; }},
        {"cross_entropy", [](tensor_list& a, const json& k) {
             F::CrossEntropyOptions o;
             if (a.size() > 2) o.weight = a[2];
             o.ignore_index = k.value("ignore_index", int64_t{-100});
             o.reduction = reduction_of(k.value("reduction", std::string("mean")));
             o.label_smoothing = k.value("label_smoothing", 0.0);
             return tensor_list{F::cross_entropy(a[0], a[1], o)}; }},
        {"ce_fused", [](tensor_list& a, const json& k) { return tensor_list{F::cross_entropy(a[0], a[1], k.value("ignore_index", int64_t{-100}))}; }},
        BINARY("mse_loss", F::mse_loss(a[0], a[1])),
        BINARY("bce_logits", F::binary_cross_entropy_with_logits(a[0], a[1])),
        BINARY("bce", F::binary_cross_entropy(a[0], a[1])),
        {"sdpa", [](tensor_list& a, const json& k) {
             return tensor_list{F::scaled_dot_product_attention(a[0], a[1], a[2], a.size() > 3 ? a[3] : Tensor(), 0.0,
                                                                k.value("is_causal", false), opt_double(k, "scale"))}; }},
    };
    return ops;
}

#undef UNARY
#undef BINARY

}  // namespace

tensor_list run_op(const std::string& name, tensor_list args, const nlohmann::json& kw) {
    auto it = table().find(name);
    if (it == table().end()) throw ValueError("difftest: unknown op " + name);
    return it->second(args, kw);
}

}  // namespace ampgrad::difftest
