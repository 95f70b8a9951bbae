// deterministic_kernels_test.cpp: the deterministic mode's thread invariance on the CPU (issue 35 item 1;
// core/determinism.hpp, cpu/gemm_onednn.cpp's sgemm_fixed_tiles). Under ampgrad::set_deterministic(true)
// every reduction the training step makes (the GEMMs and their weight gradients over B*T, sum and
// mean, the norms' weight gradients, cross entropy, attention, the embedding's scatter-add) must give
// the same bits at 1, 2 and 3 threads, for shapes big enough that a library would split its sums. The
// tiled GEMM must also agree with the default path to within f32 rounding (it computes the same product).
#include <doctest/doctest.h>

#include <cstring>
#include <functional>

#include "autograd/ops/ops.hpp"
#include "core/determinism.hpp"
#include "core/threads.hpp"
#include "tests/support/check_close.hpp"

using namespace ampgrad;

namespace {

// The values of fn's result and of every input's gradient, concatenated as raw bytes.
using Step = std::function<std::vector<Tensor>()>;

std::string bytes_of(const std::vector<Tensor>& ts) {
    std::string out;
    for (const Tensor& t : ts) {
        Tensor c = t.contiguous();
        out.append(reinterpret_cast<const char*>(c.raw_data()), static_cast<size_t>(c.numel()) * c.element_size());
    }
    return out;
}

// Runs `step` at 1, 2 and 3 threads under the deterministic mode; CHECKs that the bits agree.
void check_thread_invariant(const char* what, const Step& step) {
    CAPTURE(what);
    DeterministicGuard on(true);
    const int saved = get_num_threads();
    set_num_threads(1);
    const std::string one = bytes_of(step());
    for (int threads : {2, 3}) {
        CAPTURE(threads);
        set_num_threads(threads);
        CHECK(bytes_of(step()) == one);
    }
    set_num_threads(saved);
}

Tensor randn_leaf(const Shape& shape) { return randn(shape).requires_grad_(true); }

}  // namespace

TEST_CASE("deterministic mode: a linear layer's forward and its weight gradient over B*T are thread-invariant") {
    manual_seed(11);
    Tensor x = randn_leaf({8, 512, 96}), w = randn_leaf({160, 96});   // (B,T,C), (C_out,C)
    check_thread_invariant("linear", [&] {
        x.set_grad(Tensor()), w.set_grad(Tensor());
        Tensor y = matmul(x, w.transpose(0, 1));                        // (B,T,C_out)
        y.backward(ones_like(y));
        return std::vector<Tensor>{y.detach(), x.grad(), w.grad()};     // dW sums over the 4096 rows
    });
}

TEST_CASE("deterministic mode: the tiled f32 GEMM computes the default path's product") {
    manual_seed(12);
    Tensor a = randn({300, 777}), b = randn({777, 130});
    Tensor fast = matmul(a, b);
    // Sums of 777 products of size ~1 that cancel: an absolute error of K * eps(f32) * a few.
    const ampgrad::testing::Tolerance tol{777 * 4 * 1.2e-7, 1e-4};
    Tensor tiled;
    {
        DeterministicGuard on(true);
        tiled = matmul(a, b);
    }
    CHECK_CLOSE(tiled, fast, tol);
    Tensor at = a.transpose(0, 1).contiguous(), bt = b.transpose(0, 1).contiguous();   // the transposed layouts
    DeterministicGuard on(true);
    CHECK_CLOSE(matmul(at.transpose(0, 1), bt.transpose(0, 1)), fast, tol);
}

TEST_CASE("deterministic mode: sum, mean, layer norm, cross entropy, attention and embedding backward are "
          "thread-invariant") {
    manual_seed(13);
    Tensor big = randn_leaf({4096, 64});
    check_thread_invariant("sum/mean", [&] {
        return std::vector<Tensor>{sum(big).detach(), mean(big, {0}).detach(), sum(big, {1}).detach()};
    });
    Tensor h = randn_leaf({4096, 64}), g = randn_leaf({64}), beta = randn_leaf({64});
    check_thread_invariant("layer_norm", [&] {
        h.set_grad(Tensor()), g.set_grad(Tensor()), beta.set_grad(Tensor());
        Tensor y = F::layer_norm(h, {64}, g, beta);
        y.backward(ones_like(y));
        return std::vector<Tensor>{y.detach(), h.grad(), g.grad(), beta.grad()};
    });
    Tensor logits = randn_leaf({2048, 97});
    Tensor targets = randint(0, 97, {2048});
    check_thread_invariant("cross_entropy", [&] {
        logits.set_grad(Tensor());
        Tensor loss = F::cross_entropy(logits, targets);
        loss.backward();
        return std::vector<Tensor>{loss.detach(), logits.grad()};
    });
    Tensor q = randn_leaf({2, 4, 256, 16}), k = randn_leaf({2, 4, 256, 16}), v = randn_leaf({2, 4, 256, 16});
    check_thread_invariant("attention", [&] {
        q.set_grad(Tensor()), k.set_grad(Tensor()), v.set_grad(Tensor());
        Tensor y = F::scaled_dot_product_attention(q, k, v, /*is_causal=*/true);   // (B,H,T,HS)
        y.backward(ones_like(y));
        return std::vector<Tensor>{y.detach(), q.grad(), k.grad(), v.grad()};
    });
    Tensor table = randn_leaf({50, 64});
    Tensor ids = randint(0, 50, {4096});                                         // many repeats: scatter-add
    check_thread_invariant("embedding", [&] {
        table.set_grad(Tensor());
        Tensor e = F::embedding(ids, table);
        e.backward(ones_like(e) * 0.37);
        return std::vector<Tensor>{table.grad()};
    });
}
