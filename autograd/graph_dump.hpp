// graph_dump.hpp: the tape as data. Walks the graph backward would run from `roots` and writes
// one entry per node: op, its inputs' and outputs' shapes and dtypes, the bytes it holds for
// backward, whether it was made inside a checkpointed region, and its edges. Graphviz DOT for
// looking at (`dot -Tsvg graph.dot > graph.svg`), JSON for tools. tools/dump_graph is the
// command-line front end.
//
//   Tensor loss = ...;
//   std::cout << autograd::dump_graph({loss}, autograd::GraphFormat::kJson);
#pragma once
#include <string>

#include "core/tensor.hpp"

namespace ampgrad::autograd {

enum class GraphFormat { kDot, kJson };

std::string dump_graph(const tensor_list& roots, GraphFormat format = GraphFormat::kDot);
// Writes dump_graph() to `path`; the format follows the extension (".json", else DOT).
// Throws IOError if the file cannot be written.
void write_graph(const tensor_list& roots, const std::string& path);

}  // namespace ampgrad::autograd
