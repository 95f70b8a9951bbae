// graph_dump.cpp: the tape as DOT or JSON (graph_dump.hpp). One walk collects the nodes in
// breadth-first order from the roots; two small writers format them.
#include "autograd/graph_dump.hpp"

#include <fstream>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "autograd/autograd_meta.hpp"
#include "autograd/node.hpp"
#include "core/error.hpp"

namespace ampgrad::autograd {

namespace {

struct Walk {
    std::vector<const Node*> nodes;                       // index = id in the dump
    std::unordered_map<const Node*, size_t> ids;
    std::vector<std::pair<size_t, uint32_t>> roots;       // (node id, input_nr) per root tensor

    size_t id_of(const Node* n) {
        auto [it, inserted] = ids.try_emplace(n, nodes.size());
        if (inserted) nodes.push_back(n);
        return it->second;
    }
};

Walk walk_graph(const tensor_list& roots) {
    Walk w;
    for (const Tensor& t : roots) {
        Edge e = gradient_edge(t);
        w.roots.emplace_back(e.fn ? w.id_of(e.fn.get()) : SIZE_MAX, e.input_nr);
    }
    for (size_t i = 0; i < w.nodes.size(); ++i)           // nodes grows while we walk: BFS
        for (const Edge& e : w.nodes[i]->next_edges())
            if (e.fn) w.id_of(e.fn.get());
    return w;
}

nlohmann::json meta_json(const TensorMeta& m) {
    return {{"shape", m.shape}, {"dtype", std::string(dtype_name(m.dtype))}, {"device", m.device.str()}};
}

std::string meta_list(const std::vector<TensorMeta>& metas) {
    std::string s;
    for (const TensorMeta& m : metas) {
        if (!s.empty()) s += ", ";
        s += fmt::format("{} {}", shape_str(m.shape), dtype_name(m.dtype));
    }
    return s.empty() ? "-" : s;
}

// For an AccumulateGrad: the leaf's name (Tensor::set_name, e.g. "fc1.weight"), if any.
std::string leaf_name(const Node* n) {
    if (!n->is_accumulate_grad()) return {};
    return static_cast<const AccumulateGrad*>(n)->variable().name();
}

std::string to_json(const tensor_list& roots, const Walk& w) {
    nlohmann::json doc;
    doc["roots"] = nlohmann::json::array();
    for (size_t i = 0; i < roots.size(); ++i) {
        nlohmann::json r = {{"shape", roots[i].sizes()}, {"dtype", std::string(dtype_name(roots[i].dtype()))}};
        r["node"] = w.roots[i].first == SIZE_MAX ? nlohmann::json(nullptr) : nlohmann::json(w.roots[i].first);
        r["input_nr"] = w.roots[i].second;
        doc["roots"].push_back(r);
    }
    doc["nodes"] = nlohmann::json::array();
    for (size_t id = 0; id < w.nodes.size(); ++id) {
        const Node* n = w.nodes[id];
        nlohmann::json j = {{"id", id}, {"op", std::string(n->op())}, {"name", n->name()},
                            {"saved_bytes", n->saved_bytes()}, {"checkpointed", n->checkpointed},
                            {"hooks", n->num_hooks()}};
        j["sequence_nr"] = n->sequence_nr() == kAccumulateGradSequenceNr ? nlohmann::json(nullptr)
                                                                         : nlohmann::json(n->sequence_nr());
        j["inputs"] = nlohmann::json::array();
        for (const TensorMeta& m : n->input_meta) j["inputs"].push_back(meta_json(m));
        j["outputs"] = nlohmann::json::array();
        for (const TensorMeta& m : n->output_meta) j["outputs"].push_back(meta_json(m));
        j["next"] = nlohmann::json::array();
        for (const Edge& e : n->next_edges())
            j["next"].push_back(e.fn ? nlohmann::json{{"node", w.ids.at(e.fn.get())}, {"input_nr", e.input_nr}}
                                     : nlohmann::json(nullptr));
        if (n->is_accumulate_grad()) j["variable"] = leaf_name(n);
        doc["nodes"].push_back(j);
    }
    return doc.dump(2) + "\n";
}

std::string dot_escape(const std::string& s) {
    std::string out;
    for (char c : s) {
        if (c == '"' || c == '\\') out += '\\';
        out += c;
    }
    return out;
}

std::string to_dot(const tensor_list& roots, const Walk& w) {
    std::string out = "digraph autograd {\n  rankdir=TB;\n  node [shape=box, fontname=\"monospace\", fontsize=10];\n";
    for (size_t i = 0; i < roots.size(); ++i) {
        out += fmt::format("  r{} [shape=ellipse, label=\"root {}\\n{}\"];\n", i, i, roots[i].describe());
        if (w.roots[i].first != SIZE_MAX) out += fmt::format("  r{} -> n{};\n", i, w.roots[i].first);
    }
    for (size_t id = 0; id < w.nodes.size(); ++id) {
        const Node* n = w.nodes[id];
        std::string label;
        if (n->is_accumulate_grad()) {
            std::string name = leaf_name(n);
            label = fmt::format("AccumulateGrad{}\\n{}", name.empty() ? std::string() : fmt::format(" {}", dot_escape(name)),
                                meta_list(n->output_meta));
        } else {
            label = fmt::format("{} ({})\\nin: {}\\nout: {}\\nsaved: {} B", n->name(), n->op(), meta_list(n->input_meta),
                                meta_list(n->output_meta), n->saved_bytes());
        }
        if (n->checkpointed) label += "\\ncheckpointed";
        std::string style = n->is_accumulate_grad() ? ", style=filled, fillcolor=lightblue"
                            : n->checkpointed        ? ", style=dashed, color=blue"
                                                     : "";
        out += fmt::format("  n{} [label=\"{}\"{}];\n", id, label, style);
        for (const Edge& e : n->next_edges())
            if (e.fn) out += fmt::format("  n{} -> n{};\n", id, w.ids.at(e.fn.get()));
    }
    return out + "}\n";
}

}  // namespace

std::string dump_graph(const tensor_list& roots, GraphFormat format) {
    Walk w = walk_graph(roots);
    return format == GraphFormat::kJson ? to_json(roots, w) : to_dot(roots, w);
}

void write_graph(const tensor_list& roots, const std::string& path) {
    bool json = path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0;
    std::ofstream f(path);
    if (!f) throw IOError(fmt::format("write_graph: cannot open {} for writing", path));
    f << dump_graph(roots, json ? GraphFormat::kJson : GraphFormat::kDot);
    if (!f) throw IOError(fmt::format("write_graph: failed writing {}", path));
}

}  // namespace ampgrad::autograd
