// custom_function.cpp: custom autograd Functions under autocast (torch.amp.custom_fwd/custom_bwd).
// A custom Function's backward runs with autocast suspended, so it would silently run in a different
// precision than its forward. CustomFwdScope/CustomBwdScope fix that:
//   - SafeLogSoftmax uses cast_inputs=f32: it always runs in f32, even inside a bf16 region;
//   - ScaledMatmul uses plain custom_fwd: forward and backward both follow the caller's autocast.
//   build/examples/amp_custom_function
#include <iostream>

#include "examples/amp/common.hpp"

namespace amp_examples::custom_function {

using autograd::AutogradContext;

// log_softmax over the last dim, written by hand: y = x - logsumexp(x). (N,C) -> (N,C)
struct SafeLogSoftmax : autograd::Function<SafeLogSoftmax> {
    static tensor_list forward(AutogradContext* ctx, Tensor x) {
        amp::CustomFwdScope fwd(ctx, kCPU, /*cast_inputs=*/kFloat32, {&x});   // x is f32 from here on
        Tensor y = x - logsumexp(x, -1, /*keepdim=*/true);                    // (N,C) f32
        ctx->save_for_backward({y});
        return {y};
    }
    static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
        amp::CustomBwdScope bwd(ctx, kCPU);                                    // autocast off, as in forward
        Tensor y = ctx->get_saved_variables()[0];
        Tensor dy = grads[0];                                                  // (N,C) f32
        return {dy - y.exp() * sum(dy, {-1}, /*keepdim=*/true)};
    }
};

// y = alpha * x @ w, differentiable in x and w.
struct ScaledMatmul : autograd::Function<ScaledMatmul> {
    static tensor_list forward(AutogradContext* ctx, Tensor x, Tensor w, double alpha) {
        amp::CustomFwdScope fwd(ctx, kCPU);                                    // records the autocast state
        ctx->save_for_backward({x, w});
        ctx->saved_data["alpha"] = alpha;
        return {matmul(x, w) * alpha};                                         // (N,K)@(K,C): bf16 under autocast
    }
    static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
        amp::CustomBwdScope bwd(ctx, kCPU);                                    // re-enters bf16 autocast
        tensor_list s = ctx->get_saved_variables();
        double alpha = ctx->saved_data["alpha"].toDouble();
        Tensor dy = grads[0] * alpha;
        return {matmul(dy, s[1].t()), matmul(s[0].t(), dy), Tensor()};        // bf16 GEMMs, like the forward
    }
};

struct Report {
    DType matmul_out = kFloat32, logsoftmax_out = kFloat32, w_grad = kFloat32;
    double first_loss = 0, last_loss = 0;
};

inline Report run(std::ostream& out, int steps = 30) {
    Batch batch = make_batch(64, 8, 4, 17);
    Tensor labels = batch.y.argmax(1);                                         // (B) 4 classes
    Tensor onehot = zeros({64, 4});
    manual_seed(18);
    Tensor w = (randn({8, 4}) * 0.3).requires_grad_(true);
    optim::SGD optimizer(std::vector<Tensor>{w}, optim::SGDOptions(0.5));
    Report report;
    {
        NoGradGuard no_grad;
        std::vector<int64_t> idx = labels.to_vector<int64_t>();
        for (int64_t i = 0; i < 64; ++i) onehot.select(0, i).narrow(0, idx[i], 1).fill_(1.0);
    }
    for (int step = 0; step < steps; ++step) {
        optimizer.zero_grad();
        Tensor logits, logp, loss;
        {
            amp::AutocastGuard autocast(kCPU);                                 // bf16
            logits = ScaledMatmul::apply(batch.x, w, 2.0)[0];                  // (B,4) bf16
            logp = SafeLogSoftmax::apply(logits)[0];                           // (B,4) f32
            loss = -(logp * onehot).sum() / 64.0;                              // () f32: NLL
        }
        loss.backward();                                                       // bf16 needs no scaler
        optimizer.step();
        if (step == 0) {
            report.matmul_out = logits.dtype();
            report.logsoftmax_out = logp.dtype();
            report.w_grad = w.grad().dtype();
            report.first_loss = loss.item<double>();
            out << "ScaledMatmul output " << dtype_name(logits.dtype()) << ", SafeLogSoftmax output "
                << dtype_name(logp.dtype()) << " (cast_inputs=f32), w.grad " << dtype_name(w.grad().dtype()) << "\n";
        }
        report.last_loss = loss.item<double>();
        if (step % 10 == 9) out << "step " << step << "  nll " << report.last_loss << "\n";
    }
    return report;
}

}  // namespace amp_examples::custom_function

#ifndef AMPGRAD_EXAMPLE_NO_MAIN
int main() {
    amp_examples::custom_function::run(std::cout);
    return 0;
}
#endif
