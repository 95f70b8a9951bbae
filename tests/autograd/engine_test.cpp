// engine_test.cpp: the backward engine itself (docs/autograd.md §2): graph task ids, scheduling,
// gradient accumulation, grad() and backward(inputs=), output validation and error messages.
#include <doctest/doctest.h>

#include <thread>

#include "autograd/autograd_meta.hpp"
#include "tests/support/check_close.hpp"
#include "tests/support/fixtures.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

namespace {
Tensor leaf(std::vector<double> v, DType dtype = kFloat64) {
    Tensor t = tensor<double>(v).to(dtype);
    t.requires_grad_(true);
    return t;
}
}  // namespace

TEST_CASE("graph task ids: -1 outside backward, constant within a task, new per call") {
    CHECK(autograd::current_graph_task_id() == -1);
    CHECK(autograd::current_graph_task_depth() == 0);
    Tensor x = leaf({1, 2, 3});
    Tensor a = x * 2.0, b = a.exp(), c = b * a;
    std::vector<int64_t> seen;
    auto record = [&](const Tensor&) {
        seen.push_back(autograd::current_graph_task_id());
        return Tensor();
    };
    a.register_hook(record);
    b.register_hook(record);
    c.register_hook(record);
    c.sum().backward(Tensor(), true);
    REQUIRE(seen.size() == 3);
    CHECK(seen[0] >= 0);
    CHECK(seen[0] == seen[1]);
    CHECK(seen[1] == seen[2]);
    c.sum().backward();
    REQUIRE(seen.size() == 6);
    CHECK(seen[3] > seen[0]);
    CHECK(seen[3] == seen[5]);
    CHECK(autograd::current_graph_task_id() == -1);
}

TEST_CASE("nodes run newest first; a node runs once all its gradients arrived") {
    Tensor x = leaf({1, 2});
    std::vector<std::string> order;
    Tensor a = x * 3.0;                       // used twice: runs after both consumers
    Tensor b = a.exp();
    Tensor c = a * a;
    Tensor d = b + c;
    for (const Tensor& t : {a, b, c, d}) {
        t.grad_fn()->register_prehook([&order, name = t.grad_fn()->name()](const tensor_list&) {
            order.push_back(name);
            return tensor_list{};
        });
    }
    d.sum().backward();
    REQUIRE(order.size() == 4);
    CHECK(order[0] == "AddBackward0");
    CHECK(order[3] == "MulBackward0");           // a's node: last, after exp and a*a
    // d(3x exp + 9x^2)/dx = 3 exp(3x) + 18x
    Tensor expected = (x.detach() * 3.0).exp() * 3.0 + x.detach() * 18.0;
    CHECK_CLOSE(x.grad(), expected, tol_for(kFloat64));
}

TEST_CASE("gradients accumulate into .grad across backward calls; grad() never writes .grad") {
    Tensor x = leaf({1, 2, 3});
    (x * x).sum().backward();
    (x * 2.0).sum().backward();
    CHECK_CLOSE(x.grad(), tensor<double>({4, 6, 8}), tol_for(kFloat64));
    Tensor g = autograd::grad({(x * x).sum()}, {x})[0];
    CHECK_CLOSE(g, tensor<double>({2, 4, 6}), tol_for(kFloat64));
    CHECK_CLOSE(x.grad(), tensor<double>({4, 6, 8}), tol_for(kFloat64));
}

TEST_CASE("the first .grad does not alias the incoming gradient") {
    Tensor x = leaf({1, 2});
    Tensor seed = tensor<double>({1, 1});
    x.backward(seed);                            // x is its own root: the seed arrives unchanged
    CHECK(x.grad().impl()->storage != seed.impl()->storage);
    x.mutable_grad().mul_(5.0);
    CHECK_CLOSE(seed, tensor<double>({1, 1}), tol_for(kFloat64));
}

TEST_CASE("grad(): allow_unused, materialize_grads and their errors") {
    Tensor x = leaf({1, 2}), unused = leaf({5});
    Tensor y = (x * x).sum();
    CHECK_THROWS_WITH_AS(autograd::grad({y}, {x, unused}, {}, true),
                         doctest::Contains("appears to not have been used in the graph"), AutogradError);
    tensor_list g = autograd::grad({y}, {x, unused}, {}, true, false, true);
    CHECK(g[1].defined() == false);
    g = autograd::grad({y}, {x, unused}, {}, true, false, true, true);
    CHECK_CLOSE(g[1], zeros({1}, kFloat64), tol_for(kFloat64));
    CHECK_THROWS_WITH_AS(autograd::grad({y}, {x}, {}, true, false, false, true),
                         doctest::Contains("Expected allow_unused to be True"), ValueError);
    CHECK_THROWS_WITH_AS(autograd::grad({y}, {}), doctest::Contains("grad requires non-empty inputs"), ValueError);
    Tensor no_grad = tensor<double>({1});
    CHECK_THROWS_WITH_AS(autograd::grad({y}, {no_grad}, {}, true),
                         doctest::Contains("One of the differentiated Tensors does not require grad"), AutogradError);
}

TEST_CASE("grad() of an intermediate tensor only runs the nodes it needs") {
    Tensor x = leaf({1, 2});
    Tensor h = x.exp();
    Tensor y = (h * h).sum();
    bool exp_node_ran = false;
    h.grad_fn()->register_prehook([&](const tensor_list&) {
        exp_node_ran = true;
        return tensor_list{};
    });
    Tensor gh = autograd::grad({y}, {h})[0];
    CHECK_CLOSE(gh, h.detach() * 2.0, tol_for(kFloat64));
    CHECK_FALSE(exp_node_ran);                   // h's own node is not on the path
    CHECK_FALSE(x.grad().defined());
    // Tensor hooks of a captured tensor still run, and change what grad() returns.
    h.register_hook([](const Tensor& g) { return g * 10.0; });
    gh = autograd::grad({(h * h).sum()}, {h})[0];
    CHECK_CLOSE(gh, h.detach() * 20.0, tol_for(kFloat64));
}

TEST_CASE("backward(inputs=) accumulates only into the listed tensors") {
    Tensor x = leaf({1, 2}), w = leaf({3, 4});
    Tensor h = x * w;
    Tensor y = (h * h).sum();
    y.backward(Tensor(), true, false, {w, h});
    CHECK_FALSE(x.grad().defined());
    CHECK_CLOSE(w.grad(), (h * x * 2.0).detach(), tol_for(kFloat64));
    CHECK_CLOSE(h.grad(), (h * 2.0).detach(), tol_for(kFloat64));
}

TEST_CASE("root gradients: implicit only for scalars, checked otherwise") {
    Tensor x = leaf({1, 2});
    Tensor y = x * 2.0;
    CHECK_THROWS_WITH_AS(y.backward(), doctest::Contains("grad can be implicitly created only for scalar outputs"),
                         AutogradError);
    CHECK_THROWS_WITH_AS(y.backward(ones({3}, kFloat64)), doctest::Contains("Mismatch in shape"), ShapeError);
    Tensor plain = tensor<double>({1});
    CHECK_THROWS_WITH_AS(plain.backward(), doctest::Contains("does not require grad and does not have a grad_fn"),
                         AutogradError);
    // An f32 seed for an f64 root is cast, like any node's result.
    y.backward(ones({2}, kFloat32));
    CHECK(x.grad().dtype() == kFloat64);
    CHECK_CLOSE(x.grad(), tensor<double>({2, 2}), tol_for(kFloat64));
}

TEST_CASE("a second backward through a freed graph names retain_graph") {
    Tensor x = leaf({1, 2});
    Tensor y = (x.exp() * x).sum();
    y.backward();
    CHECK_THROWS_WITH_AS(y.backward(), doctest::Contains("Trying to backward through the graph a second time"),
                         AutogradError);
    Tensor z = (x.exp() * x).sum();
    z.backward(Tensor(), true);
    CHECK_NOTHROW(z.backward());
}

TEST_CASE("create_graph gives differentiable gradients (double backward)") {
    Tensor x = leaf({0.5, -1.0, 2.0});
    Tensor y = (x * x * x).sum();
    Tensor g = autograd::grad({y}, {x}, {}, std::nullopt, true)[0];          // 3x^2
    CHECK(g.requires_grad());
    Tensor gg = autograd::grad({g.sum()}, {x})[0];                            // 6x
    CHECK_CLOSE(gg, x.detach() * 6.0, tol_for(kFloat64));
    // backward(create_graph): .grad carries history and the graph is retained by default.
    Tensor z = leaf({1.5});
    (z * z * z).sum().backward(Tensor(), std::nullopt, true);
    CHECK(z.grad().requires_grad());
    Tensor second = autograd::grad({z.grad().sum()}, {z})[0];
    CHECK_CLOSE(second, tensor<double>({9.0}), tol_for(kFloat64));
    z.set_grad(Tensor());                         // break the z -> .grad -> graph -> z cycle
}

TEST_CASE("Function returned an invalid gradient: count and shape are checked per node") {
    Tensor x = leaf({1, 2, 3});
    Tensor y = x * 2.0;
    y.grad_fn()->register_hook([](const tensor_list& gi, const tensor_list&) { return tensor_list{gi[0], gi[0]}; });
    CHECK_THROWS_WITH_AS(y.sum().backward(), doctest::Contains("has returned an incorrect number of values"),
                         AutogradError);
}

TEST_CASE("a leaf that gained a grad_fn is reported") {
    Tensor x = leaf({1, 2});
    Tensor y = (x * 2.0).sum();
    autograd::set_history(x, y.grad_fn(), 0);     // what an illegal in-place op would do
    CHECK_THROWS_WITH_AS(y.backward(), doctest::Contains("leaf variable has been moved into the graph interior"),
                         AutogradError);
    x.detach_();                                  // break the x -> grad_fn -> ... -> x cycle
}

TEST_CASE("a node that throws leaves the graph reusable: nodes are given back") {
    Tensor x = leaf({1, 2});
    Tensor h = x * 3.0;
    Tensor y = h.sum();
    bool fail = true;
    h.register_hook([&](const Tensor& g) -> Tensor {
        if (fail) throw ValueError("boom");
        return g;
    });
    CHECK_THROWS_AS(y.backward(Tensor(), true), ValueError);
    CHECK(autograd::current_graph_task_id() == -1);
    CHECK(h.grad_fn()->task_state.owner.load() == nullptr);
    fail = false;
    y.backward();
    CHECK_CLOSE(x.grad(), tensor<double>({3, 3}), tol_for(kFloat64));
}

TEST_CASE("a 100k-node chain runs and is freed without recursion") {
    Tensor x = leaf({1.0}, kFloat32);
    Tensor y = x;
    for (int i = 0; i < 100000; ++i) y = y * 1.0;
    y.sum().backward();
    CHECK(x.grad().item<float>() == doctest::Approx(1.0));
    y = Tensor();
}

TEST_CASE("threads run independent graph tasks concurrently, each with its own id") {
    std::vector<int64_t> ids(2, -1);
    std::vector<Tensor> xs = {leaf({1, 2}), leaf({3, 4})};
    auto work = [&](int i) {
        Tensor y = (xs[static_cast<size_t>(i)] * xs[static_cast<size_t>(i)]).sum();
        y.grad_fn()->register_prehook([&ids, i](const tensor_list&) {
            ids[static_cast<size_t>(i)] = autograd::current_graph_task_id();
            return tensor_list{};
        });
        y.backward();
    };
    std::thread t0(work, 0), t1(work, 1);
    t0.join();
    t1.join();
    CHECK(ids[0] >= 0);
    CHECK(ids[1] >= 0);
    CHECK(ids[0] != ids[1]);
    CHECK_CLOSE(xs[1].grad(), tensor<double>({6, 8}), tol_for(kFloat64));
}

TEST_CASE("a graph shared by two live tasks: a reentrant backward over the same nodes") {
    Tensor x = leaf({1, 2});
    Tensor h = x.exp();
    Tensor y = (h * 2.0).sum();
    Tensor inner_grad;
    // While the outer task owns h's node, a hook runs a second task through that same node.
    y.grad_fn()->register_prehook([&](const tensor_list&) {
        EnableGradGuard grad_on;
        inner_grad = autograd::grad({h.sum()}, {x}, {}, true)[0];
        return tensor_list{};
    });
    y.backward(Tensor(), true);
    CHECK_CLOSE(inner_grad, x.detach().exp(), tol_for(kFloat64));
    CHECK_CLOSE(x.grad(), x.detach().exp() * 2.0, tol_for(kFloat64));
}

TEST_CASE("engine gradients match PyTorch (fixture autograd_engine_mlp)") {
    Fixture fx = load_fixture("autograd_engine_mlp");
    Tensor x = fx.at("x").clone().requires_grad_(true);
    Tensor w1 = fx.at("w1").clone().requires_grad_(true), w2 = fx.at("w2").clone().requires_grad_(true);
    Tensor h = matmul(x, w1).tanh();
    h.register_hook([](const Tensor& g) { return g * 2.0; });   // as in the fixture
    h.retain_grad();
    Tensor y = (matmul(h, w2) * matmul(h, w2)).sum();
    y.backward();
    CHECK_CLOSE(x.grad(), fx.at("dx"), tol_for(kFloat32));
    CHECK_CLOSE(w1.grad(), fx.at("dw1"), tol_for(kFloat32));
    CHECK_CLOSE(w2.grad(), fx.at("dw2"), tol_for(kFloat32));
    CHECK_CLOSE(h.grad(), fx.at("dh"), tol_for(kFloat32));
    // second order: d/dx of sum(dy/dx)
    Tensor gx = autograd::grad({(matmul(x, w1).tanh() * 3.0).pow(2.0).sum()}, {x}, {}, std::nullopt, true)[0];
    Tensor ggx = autograd::grad({gx.sum()}, {x})[0];
    CHECK_CLOSE(ggx, fx.at("ggx"), tol_for(kFloat32, 16));
}

TEST_CASE("engine handles f16 and bf16 graphs: gradients in the leaves' dtypes, close to f64") {
    manual_seed(11);
    Tensor x64 = randn({4, 3}, kFloat64);
    for (DType dt : {kFloat16, kBFloat16}) {
        CAPTURE(dtype_name(dt));
        Tensor x = x64.to(dt).requires_grad_(true);
        Tensor ref = x64.to(dt).to(kFloat64).requires_grad_(true);
        ((x * x).tanh() * 2.0).sum().backward();
        ((ref * ref).tanh() * 2.0).sum().backward();
        CHECK(x.grad().dtype() == dt);
        CHECK_CLOSE(x.grad().to(kFloat64), ref.grad(), tol_for(dt, 8));
    }
}

// PyTorch 2.15 gives these strides for the same three parameters (torch/csrc/autograd/utils/
// grad_layout_contract.h): a transposed or permuted weight's .grad has the weight's strides, and a
// parameter with gaps (a narrowed one) gets a contiguous .grad.
TEST_CASE("AccumulateGrad: .grad follows a dense parameter's strides, else is contiguous (the layout contract)") {
    Tensor t = randn({3, 4}).transpose(0, 1).requires_grad_(true);                 // (4,3) strides (1,4)
    (t * 1.0).sum().backward();
    CHECK(t.grad().strides() == Shape{1, 4});
    CHECK(t.grad().to_vector<float>() == std::vector<float>(12, 1.0f));
    Tensor p = randn({2, 3, 4}).permute({2, 0, 1}).requires_grad_(true);           // (4,2,3) strides (1,12,4)
    (p * 2.0).sum().backward();
    CHECK(p.grad().strides() == Shape{1, 12, 4});
    CHECK(p.grad().to_vector<float>() == std::vector<float>(24, 2.0f));
    Tensor n = randn({4, 6}).narrow(1, 0, 3).detach().requires_grad_(true);        // (4,3) strides (6,1)
    (n * 1.0).sum().backward();
    CHECK(n.grad().strides() == Shape{3, 1});
    Tensor c = randn({2, 3}, TensorOptions().requires_grad(true));                  // contiguous: unchanged
    (c * 3.0).sum().backward();
    CHECK(c.grad().is_contiguous());
    Tensor g = randn({3, 4}).transpose(0, 1).requires_grad_(true);                 // create_graph: the same layout
    (g * g).sum().backward({}, std::nullopt, /*create_graph=*/true);
    CHECK(g.grad().strides() == Shape{1, 4});
    CHECK(g.grad().requires_grad());                                              // and a differentiable .grad
    CHECK(allclose(g.grad(), g.detach() * 2.0));
    g.set_grad(Tensor());   // break the parameter <-> .grad cycle create_graph makes (LeakSanitizer)
}

TEST_CASE("grad mode under libtorch's names: autograd::GradMode, autograd::AutoGradMode, InferenceMode") {
    Tensor x = randn({2}, TensorOptions().requires_grad(true));
    {
        InferenceMode inference;
        CHECK_FALSE(autograd::GradMode::is_enabled());
        CHECK_FALSE((x * 2.0).requires_grad());
    }
    {
        autograd::AutoGradMode off(false);
        CHECK_FALSE((x * 2.0).requires_grad());
        autograd::NoGradGuard still_off;
        CHECK_FALSE(GradMode::is_enabled());
    }
    CHECK(autograd::GradMode::is_enabled());
    CHECK((x * 2.0).requires_grad());
}
