// tensor_test.cpp: a default-constructed (undefined) Tensor (core/tensor.cpp,
// autograd/tensor_autograd.cpp). Its shape and data queries throw a ValueError naming the query, as
// libtorch's throw c10::Error, and never crash; its autograd queries answer as libtorch's do; the
// device and dtype shorthand queries (is_cpu, is_cuda, untyped data_ptr, item<long long>).
#include <doctest/doctest.h>

#include "ampgrad/ampgrad.h"

using namespace ampgrad;

TEST_CASE("an undefined Tensor: data and shape queries throw ValueError naming the query") {
    Tensor u;
    CHECK(!u.defined());
    CHECK_THROWS_WITH_AS(u.sizes(), doctest::Contains("sizes()"), ValueError);
    CHECK_THROWS_WITH_AS(u.dim(), doctest::Contains("undefined"), ValueError);
    CHECK_THROWS_AS(u.numel(), ValueError);
    CHECK_THROWS_AS(u.dtype(), ValueError);
    CHECK_THROWS_AS(u.device(), ValueError);
    CHECK_THROWS_AS(u.size(0), ValueError);
    CHECK_THROWS_AS(u.is_contiguous(), ValueError);
    CHECK_THROWS_AS(u.item<float>(), ValueError);
    CHECK_THROWS_AS(u.data_ptr<float>(), ValueError);
    CHECK_THROWS_AS(u._version(), ValueError);
    CHECK_THROWS_AS(u.requires_grad_(true), ValueError);
    CHECK(u.describe() == "undefined");
}

TEST_CASE("an undefined Tensor: autograd queries answer as libtorch's") {
    Tensor u;
    CHECK(!u.requires_grad());
    CHECK(u.is_leaf());
    CHECK(!u.grad().defined());
    CHECK(u.grad_fn() == nullptr);
    CHECK(!u.detach().defined());
    CHECK(u.name().empty());
}

TEST_CASE("is_cpu / is_cuda, an untyped data_ptr, item and to_vector as long long") {
    Tensor t = tensor<int64_t>({7, 8});
    CHECK(t.is_cpu());
    CHECK(!t.is_cuda());
    CHECK(t.data_ptr() == static_cast<void*>(t.data_ptr<int64_t>()));
    CHECK(t.select(0, 1).item<long long>() == 8LL);
    CHECK(t.to_vector<long long>() == std::vector<long long>{7, 8});
}

TEST_CASE("libtorch's spellings: device().type() / index(), view(-1), reshape(n), chunk and masked_fill methods") {
    Tensor x = arange(6.0).reshape({2, 3});
    CHECK(x.device().type() == kCPU);
    CHECK(x.device().type == kCPU);                    // ampgrad's field form reads the same
    CHECK(x.device().index() == 0);
    CHECK_FALSE(x.device().has_index());
    Device d("cuda:1");
    CHECK(d.type() == kCUDA);
    CHECK(d.index() == 1);
    CHECK(d.has_index());
    CHECK(x.view(-1).sizes() == Shape{6});
    CHECK(x.reshape(6).sizes() == Shape{6});
    tensor_list parts = x.chunk(3, 1);
    CHECK(parts.size() == 3);
    CHECK(parts[0].sizes() == Shape{2, 1});
    Tensor filled = x.masked_fill(x > 2.0, -1.0);
    CHECK(filled.to_vector<float>() == std::vector<float>{0, 1, 2, -1, -1, -1});
}
