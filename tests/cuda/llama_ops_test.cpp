// llama_ops_test.cpp: issue 25's ops through autograd on cuda:0 against the CPU: F::rms_norm on a
// non-contiguous input, F::apply_rotary_emb in both layouts (gradients of x, cos and sin),
// scaled_dot_product_attention with enable_gqa (fused path, causal), lerp, the new elementwise math
// (sin ... atan2, logical_xor), and a two-layer grouped-query models::Llama whose loss and every
// parameter gradient match. The kernel tests (rms_norm_test, rotary_test, attention_gqa_test,
// lerp_test, elementwise_test) call the backends directly; these also run the op layer's host code
// (contiguous copies, expands, casts, the broadcast reductions of backward) with GPU tensors.
// Skipped without a GPU.
#include <functional>

#include "tests/cuda/cuda_test_util.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

namespace {

using Op = std::function<Tensor(const tensor_list&)>;

// y = op(inputs) on the CPU and on cuda:0: y and, for a seeded dy, every input's gradient agree.
void check_op(const Op& op, const tensor_list& inputs, Tolerance tol) {
    tensor_list host, gpu;
    for (const Tensor& t : inputs) {
        host.push_back(t.clone().requires_grad_(true));
        gpu.push_back(to_gpu(t).requires_grad_(true));
    }
    Tensor yh = op(host), yg = op(gpu);
    CHECK(yg.device() == kGpu);
    CHECK_GPU_CLOSE(yg, yh, tol);
    Tensor dy = sample(yh.sizes(), yh.dtype(), 7);
    yh.backward(dy);
    yg.backward(to_gpu(dy));
    for (size_t i = 0; i < inputs.size(); ++i) {
        CAPTURE(i);
        REQUIRE(gpu[i].grad().defined());
        CHECK_GPU_CLOSE(gpu[i].grad(), host[i].grad(), tol);
    }
}

}  // namespace

TEST_CASE("cuda F::rms_norm, F::apply_rotary_emb, grouped-query sdpa, lerp: the CPU's values and gradients" *
          skip_without_gpu()) {
    for (DType dtype : kFloatDTypes) {
        CAPTURE(dtype_name(dtype));
        const Tolerance tol = tol_for(dtype, 16.0);
        // (3,16,5) seen as (3,5,16): the op makes x contiguous before the row kernel
        check_op([](const tensor_list& t) { return F::rms_norm(t[0].transpose(1, 2), {16}, t[1]); },
                 {sample({3, 16, 5}, dtype, 1), sample({16}, dtype, 2)}, tol);
        for (bool interleaved : {false, true}) {
            CAPTURE(interleaved);
            // x (B,NH,T,HS) a transposed view; cos, sin (T,HS) broadcast over batch and heads
            check_op([interleaved](const tensor_list& t) {
                return F::apply_rotary_emb(t[0].transpose(1, 2), t[1], t[2], interleaved);
            }, {sample({2, 5, 3, 8}, dtype, 3), sample({5, 8}, dtype, 4), sample({5, 8}, dtype, 5)}, tol);
        }
        // q (2,4,9,8) against k, v (2,2,9,8): two query heads per kv head; dk, dv summed over each group
        check_op([](const tensor_list& t) {
            return F::scaled_dot_product_attention(t[0], t[1], t[2], {}, 0.0, /*is_causal=*/true, std::nullopt,
                                                   /*enable_gqa=*/true);
        }, {sample({2, 4, 9, 8}, dtype, 6), sample({2, 2, 9, 8}, dtype, 7), sample({2, 2, 9, 8}, dtype, 8)}, tol);
        check_op([](const tensor_list& t) { return lerp(t[0], t[1], t[2]); },
                 {sample({4, 6}, dtype, 9), sample({6}, dtype, 10), sample({4, 1}, dtype, 11)}, tol);
        check_op([](const tensor_list& t) { return lerp(t[0], t[1], 0.75); },
                 {sample({4, 6}, dtype, 12), sample({4, 6}, dtype, 13)}, tol);
    }
}

TEST_CASE("cuda sin, cos, exp2, log1p, expm1, erf, fmod, remainder, atan2: the CPU's values and gradients" *
          skip_without_gpu()) {
    const std::vector<Op> ops = {
        [](const tensor_list& t) { return sin(t[0]) + cos(t[1]); },
        [](const tensor_list& t) { return exp2(t[0]) * erf(t[1]); },
        [](const tensor_list& t) { return log1p(abs(t[0])) + expm1(t[1]); },
        [](const tensor_list& t) { return fmod(t[0], t[1]); },
        [](const tensor_list& t) { return remainder(t[0], t[1]); },
        [](const tensor_list& t) { return atan2(t[0], t[1]); },
    };
    for (DType dtype : kFloatDTypes) {
        CAPTURE(dtype_name(dtype));
        for (size_t i = 0; i < ops.size(); ++i) {
            CAPTURE(i);
            check_op(ops[i], {sample({5, 7}, dtype, 20 + i) * 3.0, sample({5, 7}, dtype, 40 + i)}, tol_for(dtype));
        }
    }
    Tensor a = sample({4, 5}, kInt32, 60), b = sample({4, 5}, kFloat32, 61);
    CHECK_EXACT(logical_xor(to_gpu(a), to_gpu(b)), logical_xor(a, b));
}

TEST_CASE("cuda models::Llama with grouped-query attention: the CPU's loss and every parameter gradient" *
          skip_without_gpu()) {
    models::LlamaConfig cfg;
    cfg.vocab_size = 64, cfg.hidden_size = 32, cfg.intermediate_size = 48, cfg.num_hidden_layers = 2;
    cfg.num_attention_heads = 4, cfg.num_key_value_heads = 2, cfg.max_position_embeddings = 16;
    auto make = [&] {
        manual_seed(42);
        return models::Llama(cfg);
    };
    models::Llama cpu_model = make(), gpu_model = make();
    gpu_model.to(kGpu);
    manual_seed(43);
    Tensor idx = randint(0, cfg.vocab_size, {2, 12}), targets = randint(0, cfg.vocab_size, {2, 12});   // (B,T)
    Tensor loss_cpu = cpu_model.forward(idx, targets), loss_gpu = gpu_model.forward(to_gpu(idx), to_gpu(targets));
    const Tolerance loss_tol{1e-5, 1e-5}, grad_tol{1e-5, 1e-4};        // f32: GEMMs sum in other orders
    CHECK_GPU_CLOSE(loss_gpu.detach(), loss_cpu.detach(), loss_tol);
    loss_cpu.backward();
    loss_gpu.backward();
    const nn::NamedTensors gpu_params = gpu_model.named_parameters();
    int checked = 0;
    for (const auto& [name, p] : cpu_model.named_parameters()) {
        CAPTURE(name);
        const Tensor& g = gpu_params.at(name).grad();
        REQUIRE(g.defined());
        CHECK_GPU_CLOSE(g, p.grad(), grad_tol);
        ++checked;
    }
    CHECK(checked == static_cast<int>(cpu_model.parameters().size()));
}
