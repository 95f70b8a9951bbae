// dump_graph: print the autograd tape of a small built-in model as Graphviz DOT or JSON, to see
// what backward will run: each node's op, shapes and dtypes, bytes held for backward, and
// whether it was made inside a checkpointed region. The API behind it: autograd/graph_dump.hpp.
//
//   build/tools/dump_graph --model mlp --format dot > mlp.dot && dot -Tsvg mlp.dot > mlp.svg
//   build/tools/dump_graph --model checkpointed --format json
#include <cstdio>
#include <cstring>
#include <string>

#include "ampgrad/ampgrad.h"

using namespace ampgrad;

namespace {

struct Args {
    std::string model = "mlp";
    std::string format = "dot";
    std::string out;                      // empty: stdout
};

const char* kUsage =
    "usage: dump_graph [--model mlp|checkpointed|reentrant] [--format dot|json] [--out FILE]\n"
    "  mlp           x (8,16) -> linear(16,32) -> gelu -> linear(32,4) -> cross_entropy\n"
    "  checkpointed  the same, with the hidden layer under non-reentrant checkpoint()\n"
    "  reentrant     the same, with checkpoint(use_reentrant=true): one CheckpointFunction node\n";

bool parse(int argc, char** argv, Args& args) {
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if ((a == "--model" || a == "--format" || a == "--out") && i + 1 < argc) {
            std::string v = argv[++i];
            (a == "--model" ? args.model : a == "--format" ? args.format : args.out) = v;
        } else {
            return false;
        }
    }
    return (args.model == "mlp" || args.model == "checkpointed" || args.model == "reentrant") &&
           (args.format == "dot" || args.format == "json");
}

// A two-layer MLP with named parameters (names show up on the AccumulateGrad nodes).
Tensor build_model(const std::string& model) {
    manual_seed(0);
    auto param = [](Shape shape, const char* name) {
        Tensor p = randn(shape, TensorOptions().requires_grad(true));
        p.set_name(name);
        return p;
    };
    Tensor w1 = param({32, 16}, "fc1.weight"), b1 = param({32}, "fc1.bias");
    Tensor w2 = param({4, 32}, "fc2.weight"), b2 = param({4}, "fc2.bias");
    Tensor x = param({8, 16}, "input");            // an activation from earlier layers
    Tensor targets = randint(0, 4, {8});
    auto hidden = [&](const tensor_list& in) { return tensor_list{gelu(linear(in[0], w1, b1), true)}; };
    Tensor h;
    if (model == "mlp") h = hidden({x})[0];
    else h = checkpoint(hidden, {x}, {.use_reentrant = model == "reentrant"})[0];
    return F::cross_entropy(linear(h, w2, b2), targets);
}

}  // namespace

int main(int argc, char** argv) {
    Args args;
    if (!parse(argc, argv, args)) {
        std::fputs(kUsage, stderr);
        return 2;
    }
    try {
        Tensor loss = build_model(args.model);
        if (!args.out.empty()) {
            autograd::write_graph({loss}, args.out);
            return 0;
        }
        auto format = args.format == "json" ? autograd::GraphFormat::kJson : autograd::GraphFormat::kDot;
        std::fputs(autograd::dump_graph({loss}, format).c_str(), stdout);
    } catch (const Error& e) {
        std::fprintf(stderr, "dump_graph: %s\n", e.what());
        return 1;
    }
    return 0;
}
