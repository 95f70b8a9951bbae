// view_history.cpp: CopySlices and AsStrided nodes, and the view bookkeeping around them (see
// view_history.hpp for the idea). The two backward formulas use raw kernels: they only move
// gradient values around, like the copy they undo.
#include "autograd/view_history.hpp"

#include "autograd/anomaly_mode.hpp"
#include "autograd/grad_mode.hpp"
#include "autograd/node.hpp"
#include "core/backend.hpp"
#include "core/error.hpp"

namespace ampgrad::autograd {

namespace {

// Where a view sits inside its (contiguous) base, so the same window can be cut from a gradient.
struct Window {
    Shape sizes;
    Shape strides;
    int64_t offset = 0;                // in elements, relative to the base's first element
    Tensor cut(const Tensor& contiguous_base_shaped) const {
        return make_view(contiguous_base_shaped, sizes, strides, contiguous_base_shaped.storage_offset() + offset);
    }
};

Window window_of(const Tensor& view, const Tensor& base) {
    return {view.sizes(), view.strides(), view.storage_offset() - base.storage_offset()};
}

void forbid_double_backward(std::string_view node) {
    if (GradMode::is_enabled())
        throw AutogradError(fmt::format("{}: double backward (create_graph=true) through an in-place write into a "
                                        "view is not supported", node));
}

// Contiguous copy of g: (base shape)
Tensor contiguous_copy(const Tensor& g) {
    Tensor out = make_empty(g.sizes(), g.dtype(), g.device());
    backend_of(out).copy(out, g);
    return out;
}

std::shared_ptr<Node> make_node(std::string_view op, edge_list edges, std::vector<TensorMeta> inputs,
                                TensorMeta output, BackwardFn fn) {
    auto node = std::make_shared<FunctionNode>(op, std::move(edges), std::vector<SavedVariable>{}, std::move(fn));
    node->input_meta = std::move(inputs);
    node->output_meta = {std::move(output)};
    if (anomaly_mode_enabled()) node->creation_trace = capture_creation_trace();
    return node;
}

// base_new = base_old with `window` replaced by result. Gradient: (g outside the window, g inside it).
std::shared_ptr<Node> make_copy_slices(const Tensor& base, const Window& window, const Tensor& result) {
    edge_list edges{gradient_edge(base), gradient_edge(result)};
    auto fn = [window](BackwardContext&, const tensor_list& g) -> tensor_list {
        forbid_double_backward("CopySlices");
        Tensor grad_base = contiguous_copy(g[0]);                        // (base shape)
        Tensor region = window.cut(grad_base);                          // (view shape)
        Tensor grad_result = contiguous_copy(region);
        backend_of(region).fill(region, 0.0);
        return {grad_base, grad_result};
    };
    return make_node("copy_slices", std::move(edges), {TensorMeta::of(base), TensorMeta::of(result)},
                     TensorMeta::of(base), std::move(fn));
}

// view = base[window]. Gradient: zeros of the base's shape with g in the window.
std::shared_ptr<Node> make_as_strided(const Tensor& base, const Window& window, const TensorMeta& view_meta) {
    TensorMeta base_meta = TensorMeta::of(base);
    auto fn = [window, base_meta](BackwardContext&, const tensor_list& g) -> tensor_list {
        forbid_double_backward("AsStridedBackward");
        Tensor grad_base = make_empty(base_meta.shape, g[0].dtype(), g[0].device());
        backend_of(grad_base).fill(grad_base, 0.0);
        backend_of(grad_base).copy(window.cut(grad_base), g[0]);
        return {grad_base};
    };
    return make_node("as_strided", {gradient_edge(base)}, {base_meta}, view_meta, std::move(fn));
}

uint64_t generation_of(const Tensor& t) {
    const AutogradMeta* m = maybe_meta(t);
    return m ? m->history_generation : 0;
}

bool overlaps_itself(const Tensor& t) {
    for (size_t d = 0; d < t.sizes().size(); ++d)
        if (t.strides()[d] == 0 && t.sizes()[d] > 1) return true;
    return false;
}

}  // namespace

void mark_view(const Tensor& view, const Tensor& input) {
    const AutogradMeta* in = maybe_meta(input);
    const Tensor& base = in && in->view ? in->view->base : input;
    if (base.impl() == view.impl()) return;        // a no-op "view" returned its input: not a view
    auto info = std::make_unique<ViewInfo>();
    info->base = base;
    info->base_generation = generation_of(base);
    info->made_in_no_grad = !GradMode::is_enabled();
    meta_of(view).view = std::move(info);
}

void check_inplace_history(std::string_view op, const Tensor& self) {
    const AutogradMeta* m = maybe_meta(self);
    if (!m || !m->view) return;
    const Tensor& base = m->view->base;
    if (base.is_leaf() && base.requires_grad())
        throw AutogradError(fmt::format("{}: a view of a leaf Variable that requires grad is being used in an in-place "
                                        "operation ({}; its base is {})", op, self.describe(), base.describe()));
    if (m->view->made_in_no_grad)
        throw AutogradError(fmt::format(
            "{}: A view was created in no_grad mode and is being modified inplace with grad mode enabled ({}). Given "
            "that this use case is ambiguous and error-prone, it is forbidden. Create the view and do the in-place "
            "op both inside the no_grad block or both outside it.", op, self.describe()));
    if (!base.is_contiguous())
        throw AutogradError(fmt::format("{}: in-place write with autograd into a view of a non-contiguous base is not "
                                        "supported ({}; base {}); call contiguous() on the base first", op,
                                        self.describe(), base.describe()));
    if (overlaps_itself(self))
        throw AutogradError(fmt::format("{}: unsupported operation: more than one element of the written-to tensor "
                                        "refers to a single memory location ({}); clone() it first", op,
                                        self.describe()));
}

void rebase_history(const Tensor& self, const std::shared_ptr<Node>& fn, uint32_t output_nr) {
    set_history(self, fn, output_nr);
    ++meta_of(self).history_generation;
}

void rebase_history(const Tensor& self, const Tensor& result) {
    AutogradMeta* m = maybe_meta(self);
    if (!m || !m->view) return rebase_history(self, result.grad_fn(), result.output_nr());
    Tensor base = m->view->base;
    rebase_history(base, make_copy_slices(base, window_of(self, base), result), 0);
    refresh_view_history(self, *m);            // now: self = as_strided(CopySlices)
}

void refresh_view_history(const Tensor& view, AutogradMeta& m) {
    const Tensor& base = m.view->base;
    uint64_t generation = generation_of(base);
    if (generation == m.view->base_generation) return;
    m.view->base_generation = generation;
    if (!base.requires_grad()) return;
    set_history(view, make_as_strided(base, window_of(view, base), TensorMeta::of(view)), 0);
}

}  // namespace ampgrad::autograd
