// graph_dump_test.cpp: the tape as DOT and JSON: op, shapes and dtypes, bytes saved, whether a
// node is checkpointed, edges; and write_graph() to a file.
#include <doctest/doctest.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tests/support/check_close.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

TEST_CASE("JSON dump: one entry per node with op, shapes, dtypes, saved bytes, checkpointed, edges") {
    Tensor x = randn({2, 3}, TensorOptions(kFloat32).requires_grad(true));
    Tensor w = randn({3, 4}, TensorOptions(kFloat32).requires_grad(true));
    x.set_name("x");
    w.set_name("fc.weight");
    Tensor h = checkpoint([&](const tensor_list& in) { return tensor_list{in[0].tanh()}; }, {matmul(x, w)})[0];
    Tensor loss = h.sum();
    nlohmann::json doc = nlohmann::json::parse(autograd::dump_graph({loss}, autograd::GraphFormat::kJson));
    REQUIRE(doc["roots"].size() == 1);
    CHECK(doc["roots"][0]["node"] == 0);
    const auto& nodes = doc["nodes"];
    REQUIRE(nodes.size() == 5);                       // sum, tanh, matmul, 2 x AccumulateGrad
    CHECK(nodes[0]["op"] == "sum");
    CHECK(nodes[0]["name"] == "SumBackward0");
    CHECK(nodes[0]["inputs"][0]["shape"] == std::vector<int64_t>{2, 4});
    CHECK(nodes[0]["outputs"][0]["shape"] == std::vector<int64_t>{});
    CHECK(nodes[1]["op"] == "tanh");
    CHECK(nodes[1]["checkpointed"] == true);
    CHECK(nodes[1]["saved_bytes"] == 0);              // its output is recomputed, not held
    CHECK((nodes[2]["op"] == "matmul" || nodes[2]["op"] == "mm"));
    CHECK(nodes[2]["checkpointed"] == false);
    CHECK(nodes[2]["saved_bytes"] == (2 * 3 + 3 * 4) * 4);
    CHECK(nodes[2]["inputs"][1]["dtype"] == "f32");
    std::vector<std::string> leaves;
    for (const auto& n : nodes)
        if (n["op"] == "AccumulateGrad") leaves.push_back(n["variable"]);
    std::sort(leaves.begin(), leaves.end());
    CHECK(leaves == std::vector<std::string>{"fc.weight", "x"});
    CHECK(nodes[0]["next"][0]["node"] == 1);
}

TEST_CASE("DOT dump: labels with shapes and a style for checkpointed nodes; write_graph") {
    Tensor x = randn({3}, TensorOptions(kFloat64).requires_grad(true));
    Tensor y = checkpoint([](const tensor_list& in) { return tensor_list{in[0].exp()}; }, {x * 2.0})[0].sum();
    std::string dot = autograd::dump_graph({y});
    CHECK(dot.rfind("digraph autograd {", 0) == 0);
    CHECK(dot.find("ExpBackward0 (exp)") != std::string::npos);
    CHECK(dot.find("in: (3) f64") != std::string::npos);
    CHECK(dot.find("checkpointed") != std::string::npos);
    CHECK(dot.find("style=dashed") != std::string::npos);
    CHECK(dot.find("AccumulateGrad") != std::string::npos);
    CHECK(dot.find("n0 -> n1;") != std::string::npos);
    std::string path = std::string(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp") + "/ampgrad_graph_test.json";
    autograd::write_graph({y}, path);
    std::ifstream f(path);
    std::stringstream ss;
    ss << f.rdbuf();
    CHECK(nlohmann::json::parse(ss.str())["nodes"].size() == 4);
    std::remove(path.c_str());
    CHECK_THROWS_AS(autograd::write_graph({y}, "/nonexistent-dir/graph.dot"), IOError);
}
